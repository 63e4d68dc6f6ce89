/// A JSON value as a key holds it: null, bool, int64, double, string, array or object.
///
/// Equality is structural: object member order is not significant and numbers compare by value
/// (`.int(1) == .double(1.0)`). Hashing agrees with equality.
public enum JSONValue: Sendable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])
}

extension JSONValue: Equatable {
    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case let (.bool(a), .bool(b)): return a == b
        case let (.int(a), .int(b)): return a == b
        case let (.double(a), .double(b)): return a == b
        case let (.int(a), .double(b)), let (.double(b), .int(a)): return JSONValue.exactlyEqual(a, b)
        case let (.string(a), .string(b)): return a == b
        case let (.array(a), .array(b)): return a == b
        case let (.object(a), .object(b)): return a == b
        default: return false
        }
    }

    /// `Int64` and `Double` compare by mathematical value, without rounding the integer.
    static func exactlyEqual(_ i: Int64, _ d: Double) -> Bool {
        guard let exact = Int64(exactly: d) else { return false }
        return exact == i
    }
}

extension JSONValue: Hashable {
    public func hash(into hasher: inout Hasher) {
        switch self {
        case .null: hasher.combine(0 as UInt8)
        case .bool(let b): hasher.combine(1 as UInt8); hasher.combine(b)
        case .int(let i): hasher.combine(2 as UInt8); hasher.combine(i)
        case .double(let d):
            if let i = Int64(exactly: d) { hasher.combine(2 as UInt8); hasher.combine(i) }
            else { hasher.combine(3 as UInt8); hasher.combine(d) }
        case .string(let s): hasher.combine(4 as UInt8); hasher.combine(s)
        case .array(let a): hasher.combine(5 as UInt8); hasher.combine(a)
        case .object(let o): hasher.combine(6 as UInt8); hasher.combine(o)
        }
    }
}
