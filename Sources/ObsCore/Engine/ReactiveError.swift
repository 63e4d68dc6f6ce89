/// The errors the engine itself raises while evaluating (a computed's closure raises its own).
public enum ReactiveError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A computed read itself, directly or through others, while it was being evaluated.
    case cycle
    /// Evaluations nested deeper than the thread's stack allows: evaluate long chains as they are
    /// built (reading each new computed once), not all at once at the end.
    case nestedTooDeeply

    public var description: String {
        switch self {
        case .cycle: "cycle: a computed depends on itself"
        case .nestedTooDeeply: "computed values nest too deeply to evaluate here: evaluate long chains as they are built"
        }
    }
}

/// Whether two errors are the same for change detection: values of one `Equatable` error type
/// that compare equal are; anything else is a new error.
func sameError(_ a: any Error, _ b: any Error) -> Bool {
    guard let a = a as Any as? any Equatable else { return false }
    return a.isEqual(to: b)
}

extension Equatable {
    fileprivate func isEqual(to other: Any) -> Bool {
        guard let other = other as? Self else { return false }
        return self == other
    }
}
