extension JSONValue {
    /// Whether it is an array or an object (the only values that nest).
    var isContainer: Bool {
        switch self {
        case .array, .object: true
        default: false
        }
    }

    /// Whether the value nests containers deeper than `limit` levels (a scalar is depth 0, `[1]` is
    /// 1). Recurses at most `limit + 1` levels, so it is safe on values of any depth.
    public func nests(deeperThan limit: Int) -> Bool {
        switch self {
        case .array(let elements):
            if limit == 0 { return true }
            return elements.contains { $0.nests(deeperThan: limit - 1) }
        case .object(let members):
            if limit == 0 { return true }
            return members.values.contains { $0.nests(deeperThan: limit - 1) }
        default:
            return false
        }
    }
}
