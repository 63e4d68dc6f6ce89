// Literals let code and tests write values as JSON reads: `["id": 5, "tags": ["a", nil]]`.

extension JSONValue: ExpressibleByNilLiteral {
    /// `nil` is `.null`.
    public init(nilLiteral: ()) { self = .null }
}

extension JSONValue: ExpressibleByBooleanLiteral {
    /// `true` / `false` are `.bool`.
    public init(booleanLiteral value: Bool) { self = .bool(value) }
}

extension JSONValue: ExpressibleByIntegerLiteral {
    /// Integer literals are `.int`.
    public init(integerLiteral value: Int64) { self = .int(value) }
}

extension JSONValue: ExpressibleByFloatLiteral {
    /// Float literals are `.double`.
    public init(floatLiteral value: Double) { self = .double(value) }
}

extension JSONValue: ExpressibleByStringLiteral {
    /// String literals are `.string`.
    public init(stringLiteral value: String) { self = .string(value) }
}

extension JSONValue: ExpressibleByArrayLiteral {
    /// Array literals are `.array`.
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
}

extension JSONValue: ExpressibleByDictionaryLiteral {
    /// Dictionary literals are `.object`; like Swift's own dictionary literals, a repeated key traps.
    public init(dictionaryLiteral members: (String, JSONValue)...) {
        self = .object(Dictionary(uniqueKeysWithValues: members))
    }
}
