@testable import ObsCore

/// A watch sink that keeps every line it is sent, for tests of the watch unit without a session;
/// `unsentBytes` is set by the test to play a client that reads slowly (or not at all).
final class RecordingSink: WatchSink {
    var lines: [String] = []
    var unsentBytes = 0

    func send(_ line: EncodedLine) { lines.append(line.text) }

    /// The lines sent since the last call.
    func take() -> [String] {
        defer { lines.removeAll() }
        return lines
    }
}

/// The state a watch unit under test snapshots: keys and values set by the test.
final class FixedState: WatchedState {
    var keys: [String: (value: JSONValue, rev: UInt64)] = [:]

    func snapshot(matching patterns: [KeyPattern]) -> [KeyState] {
        keys.keys.filter { key in patterns.contains { $0.matches(key) } }.sorted().map { key in
            KeyState(key: key, kind: .value, content: .value(keys[key]!.value), rev: keys[key]!.rev)
        }
    }
}
