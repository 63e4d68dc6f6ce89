/// The type a request field must have.
enum FieldType: String, Sendable {
    case string
    case bool
    /// A non-negative integer.
    case integer
    case number
    case array
    case object
    case any

    func accepts(_ value: JSONValue) -> Bool {
        switch (self, value) {
        case (.any, _), (.string, .string), (.bool, .bool), (.number, .int), (.number, .double),
            (.array, .array), (.object, .object):
            return true
        case (.integer, .int(let value)):
            return value >= 0
        default:
            return false
        }
    }

    var article: String {
        switch self {
        case .string: "a string"
        case .bool: "a bool"
        case .integer: "a non-negative integer"
        case .number: "a number"
        case .array: "an array"
        case .object: "an object"
        case .any: "any JSON value"
        }
    }
}

/// One field of an operation, as the table declares it.
struct Field: Sendable {
    let name: String
    let type: FieldType
    let required: Bool

    static func required(_ name: String, _ type: FieldType) -> Field { Field(name: name, type: type, required: true) }
    static func optional(_ name: String, _ type: FieldType) -> Field { Field(name: name, type: type, required: false) }
}

/// A request whose declared fields have been checked against the operation table.
struct Request {
    let object: [String: JSONValue]

    /// The request's `id` as the answer echoes it.
    var id: JSONValue { object["id"] ?? .null }

    init(_ object: [String: JSONValue], fields: [Field]) throws(ObsError) {
        for field in fields {
            guard let value = object[field.name] else {
                if field.required { throw ObsError(.badRequest, "missing field '\(field.name)'") }
                continue
            }
            guard field.type.accepts(value) else {
                throw ObsError(.badRequest, "field '\(field.name)' must be \(field.type.article)")
            }
        }
        self.object = object
    }

    subscript(_ name: String) -> JSONValue? { object[name] }
    func string(_ name: String) -> String? { object[name]?.stringValue }
    func bool(_ name: String) -> Bool? { object[name]?.boolValue }
    func uint(_ name: String) -> UInt64? { object[name]?.intValue.map { UInt64($0) } }
    func array(_ name: String) -> [JSONValue]? { object[name]?.arrayValue }
}

/// What handling a request gives: its answer now, or later (cluster mode: once the shared log
/// decided; `Session.answerLater`).
enum Answer {
    case now(Reply)
    case later
}

/// A successful response's fields, in order.
struct Reply {
    var fields: [(String, JSONValue)]
    /// Members already encoded (objects whose member order matters), after `fields`.
    var raw: [(String, [UInt8])] = []
    /// The response acknowledges persisted changes (see `EncodedLine.needsSync`).
    var needsSync = false
}
