// Small typed views of a value, each nil when the value is of another kind.

extension JSONValue {
    /// Whether this is `.null`.
    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    /// The member named `key` of an object; nil for a missing member or a non-object.
    public subscript(key: String) -> JSONValue? {
        if case .object(let members) = self { return members[key] }
        return nil
    }

    /// The string of a `.string`.
    public var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    /// The integer of an `.int`; nil for doubles, even integral ones, so integer and floating
    /// arithmetic stay distinguishable.
    public var intValue: Int64? {
        if case .int(let value) = self { return value }
        return nil
    }

    /// Any number as a Double (an `.int` beyond 2^53 is rounded to the nearest double).
    public var doubleValue: Double? {
        switch self {
        case .double(let value): return value
        case .int(let value): return Double(value)
        default: return nil
        }
    }

    /// The flag of a `.bool`.
    public var boolValue: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    /// The elements of an `.array`.
    public var arrayValue: [JSONValue]? {
        if case .array(let elements) = self { return elements }
        return nil
    }

    /// The members of an `.object`.
    public var objectValue: [String: JSONValue]? {
        if case .object(let members) = self { return members }
        return nil
    }

    /// The value's type as the expression language's `type()` names it: "null", "bool", "number",
    /// "string", "array" or "object".
    public var typeName: String {
        switch self {
        case .null: return "null"
        case .bool: return "bool"
        case .int, .double: return "number"
        case .string: return "string"
        case .array: return "array"
        case .object: return "object"
        }
    }
}
