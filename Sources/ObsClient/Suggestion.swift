/// "did you mean" for a mistyped command or option: the one candidate closest to what was typed,
/// if it is close enough to be a slip (an edit distance of 1, or 2 for words of five letters or
/// more), or the only candidate that starts with it.
public enum Suggestion {
    public static func closest(to typed: String, among candidates: [String]) -> String? {
        let limit = typed.count >= 5 ? 2 : 1
        let scored = candidates.map { (candidate: $0, distance: distance(typed, $0)) }
        if let best = scored.min(by: { $0.distance < $1.distance }), best.distance <= limit,
           scored.filter({ $0.distance == best.distance }).count == 1 {
            return best.candidate
        }
        let extending = candidates.filter { $0.hasPrefix(typed) && typed.count >= 3 }
        return extending.count == 1 ? extending[0] : nil
    }

    /// " (did you mean 'watch'?)", or nothing.
    public static func hint(for typed: String, among candidates: [String]) -> String {
        closest(to: typed, among: candidates).map { " (did you mean '\($0)'?)" } ?? ""
    }

    /// Levenshtein distance, with a swap of two neighbours counting as one edit.
    static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        if a.isEmpty || b.isEmpty { return max(a.count, b.count) }
        var previous2 = [Int](repeating: 0, count: b.count + 1)
        var previous = Array(0...b.count)
        for i in 1...a.count {
            var current = [i] + [Int](repeating: 0, count: b.count)
            for j in 1...b.count {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    current[j] = min(current[j], previous2[j - 2] + 1)
                }
            }
            previous2 = previous
            previous = current
        }
        return previous[b.count]
    }
}
