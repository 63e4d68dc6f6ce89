/// The one table of operations: dispatch, permission checks, field checks, which operations a
/// batch may hold, `unknown_op` and the operation list of docs/protocol.md all come from it.
struct Operation: Sendable {
    let name: String
    let fields: [Field]
    /// Whether it reads or writes: a read-only client gets `permission_denied` for a write.
    let access: Access
    let summary: String
    let body: Body

    /// What running the operation is.
    enum Body: Sendable {
        /// The operation answers by itself (now, or later in cluster mode).
        case answer(@Sendable (Session, Request) throws(ObsError) -> Answer)
        /// One write of the store, applied inside a transaction: its own when sent alone, or a
        /// batch's (these are the operations a batch may hold). It returns its result's fields,
        /// given the revision the transaction committed.
        case write(@Sendable (Session, Request) throws(ObsError) -> WriteResult)
    }

    /// Whether a batch may hold it.
    var isBatchable: Bool {
        if case .write = body { return true }
        return false
    }
}

/// A write's result fields, given the revision its transaction committed.
typealias WriteResult = (UInt64) -> [(String, JSONValue)]

enum Operations {
    static let all: [Operation] = [
        Operation(name: "hello", fields: [.optional("client", .string), .optional("protocol", .integer)], access: .read,
                  summary: "server name, version, protocol, current revision and pid", body: .answer { s, r throws(ObsError) in .now(try s.hello(r)) }),
        Operation(name: "ping", fields: [], access: .read,
                  summary: "the current revision", body: .answer { s, r throws(ObsError) in .now(s.ping(r)) }),
        Operation(name: "get", fields: [.optional("key", .string), .optional("pattern", .string)], access: .read,
                  summary: "one key's value, or every key matching a pattern", body: .answer { s, r throws(ObsError) in .now(try s.get(r)) }),
        Operation(name: "set", fields: [.required("key", .string), .required("value", .any), .optional("if_rev", .integer),
                                        .optional("ttl_ms", .integer), .optional("ephemeral", .bool), .optional("always", .bool)],
                  access: .write, summary: "writes a value key", body: .write { s, r throws(ObsError) in try s.applySet(r) }),
        Operation(name: "delete", fields: [.required("key", .string)], access: .write,
                  summary: "removes a key", body: .write { s, r throws(ObsError) in try s.applyDelete(r) }),
        Operation(name: "incr", fields: [.required("key", .string), .optional("by", .number)], access: .write,
                  summary: "adds to a number (a missing key counts as 0)", body: .write { s, r throws(ObsError) in try s.applyIncr(r) }),
        Operation(name: "batch", fields: [.required("ops", .array)], access: .write,
                  summary: "set, delete, incr, define, bind and unbind requests as one transaction, all or nothing",
                  body: .answer { s, r throws(ObsError) in try s.batch(r) }),
        Operation(name: "define", fields: [.required("key", .string), .required("expr", .string), .optional("replace", .bool)],
                  access: .write, summary: "defines a computed key", body: .write { s, r throws(ObsError) in try s.applyDefine(r) }),
        Operation(name: "bind", fields: [.required("from", .string), .required("to", .string), .optional("map", .string),
                                         .optional("two_way", .bool), .optional("unmap", .string)],
                  access: .write, summary: "keeps a value key in step with another key", body: .write { s, r throws(ObsError) in try s.applyBind(r) }),
        Operation(name: "unbind", fields: [.required("to", .string)], access: .write,
                  summary: "removes the binding into a key", body: .write { s, r throws(ObsError) in try s.applyUnbind(r) }),
        Operation(name: "publish", fields: [.required("channel", .string), .optional("payload", .any)], access: .write,
                  summary: "sends a message to the watches of a channel", body: .answer { s, r throws(ObsError) in try s.publish(r) }),
        Operation(name: "watch", fields: [.required("keys", .array), .optional("initial", .bool), .optional("since", .integer),
                                          .optional("mode", .string), .optional("throttle_ms", .integer), .optional("debounce_ms", .integer),
                                          .optional("progress_ms", .integer), .optional("channels", .bool), .optional("run", .string)],
                  access: .read, summary: "streams changes of keys and patterns", body: .answer { s, r throws(ObsError) in .now(try s.watch(r)) }),
        Operation(name: "unwatch", fields: [.required("watch", .integer)], access: .read,
                  summary: "stops a watch", body: .answer { s, r throws(ObsError) in .now(try s.unwatch(r)) }),
        Operation(name: "list", fields: [.optional("pattern", .string)], access: .read,
                  summary: "the keys matching a pattern, with their kinds", body: .answer { s, r throws(ObsError) in .now(try s.list(r)) }),
        Operation(name: "describe", fields: [.required("key", .string)], access: .read,
                  summary: "a key's kind, definition, dependencies, dependents, binding and metadata",
                  body: .answer { s, r throws(ObsError) in .now(try s.describe(r)) }),
        Operation(name: "graph", fields: [.optional("pattern", .string)], access: .read,
                  summary: "keys and the edges values flow along", body: .answer { s, r throws(ObsError) in .now(try s.graph(r)) }),
        Operation(name: "eval", fields: [.required("expr", .string)], access: .read,
                  summary: "evaluates an expression once against the current state", body: .answer { s, r throws(ObsError) in .now(try s.eval(r)) }),
        Operation(name: "stats", fields: [], access: .read,
                  summary: "counters of the store and the daemon", body: .answer { s, r throws(ObsError) in .now(s.statsReply(r)) }),
        Operation(name: "dump", fields: [], access: .read,
                  summary: "everything restore needs", body: .answer { s, r throws(ObsError) in .now(s.dump(r)) }),
        Operation(name: "restore", fields: [.required("keys", .array), .optional("bindings", .array), .optional("replace", .bool),
                                            .optional("more", .bool)],
                  access: .write, summary: "loads what dump returned, as one transaction (in parts: `more`)", body: .answer { s, r throws(ObsError) in try s.restore(r) }),
    ]

    static let byName: [String: Operation] = Dictionary(uniqueKeysWithValues: all.map { ($0.name, $0) })
    /// Each operation's index in `all`, which its request counter has.
    static let indexByName: [String: Int] = Dictionary(uniqueKeysWithValues: all.indices.map { (all[$0].name, $0) })

    /// The operation table of docs/protocol.md, generated from `all`.
    static var markdownTable: String {
        var lines = ["| op | access | request fields | summary |", "|---|---|---|---|"]
        for operation in all {
            let fields = operation.fields.map { field in
                field.required ? "`\(field.name)`: \(field.type.rawValue)" : "[`\(field.name)`: \(field.type.rawValue)]"
            }
            lines.append("| `\(operation.name)` | \(operation.access.rawValue) | \(fields.joined(separator: ", ")) | \(operation.summary) |")
        }
        return lines.joined(separator: "\n") + "\n"
    }
}

extension Session {
    /// The operation table as docs/protocol.md shows it (generated from the table itself).
    public static var operationTableMarkdown: String { Operations.markdownTable }
}
