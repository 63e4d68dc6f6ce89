import ObsClient
import ObsCore

/// `obsctl wait EXPR`: exits 0 once EXPR is truthy. It watches every key (no snapshot) and
/// evaluates EXPR again after each change, and at least once a second for expressions over time.
/// The watch starts before the first evaluation, so a change between the two is never missed.
/// An expression that fails to evaluate (a key not there yet) is not true yet; one that does not
/// parse is an error.
enum WaitCommand {
    static func run(_ context: Context, _ parsed: ParsedArguments) throws -> Int32 {
        let expr = JSONValue.string(parsed.positionals[0])
        let deadline = context.deadline
        let connection = try context.connect(until: deadline)
        try connection.request("watch", ["keys": ["**"], "initial": false, "channels": false, "progress_ms": 1000],
                               deadline: deadline)
        while true {
            if try isTrue(connection, expr, deadline: deadline) { return 0 }
            // Wait for something to happen, then take every event already there before evaluating.
            guard try connection.nextEvent(deadline: deadline) != nil else { throw ClientError.timedOut }
            while try connection.nextEvent(deadline: monotonicNow()) != nil {}
        }
    }

    private static func isTrue(_ connection: ObsConnection, _ expr: JSONValue, deadline: Double?) throws(ClientError) -> Bool {
        do throws(ClientError) {
            return truthy(try connection.request("eval", ["expr": expr], deadline: deadline)["value"] ?? .null)
        } catch {
            if case .server(let failure) = error, failure.code == .evalError { return false }
            throw error
        }
    }

    /// docs/expressions.md: false, null, 0, "", [] and {} are falsy.
    static func truthy(_ value: JSONValue) -> Bool {
        switch value {
        case .null: false
        case .bool(let b): b
        case .int(let i): i != 0
        case .double(let d): d != 0
        case .string(let s): !s.isEmpty
        case .array(let a): !a.isEmpty
        case .object(let o): !o.isEmpty
        }
    }
}
