import ObsCore
import XCTest

/// Collects a session's lines; `pendingBytes` is set by the test to play a slow consumer.
final class CaptureOutput: SessionOutput {
    var lines: [EncodedLine] = []
    var pendingBytes = 0
    /// When set, every written line adds its size to `pendingBytes` (nothing is ever sent).
    var accumulates = false

    func write(_ line: EncodedLine) {
        lines.append(line)
        if accumulates { pendingBytes += line.count }
    }

    /// The lines written since the last call, as text.
    func take() -> [String] {
        defer { lines.removeAll() }
        return lines.map(\.text)
    }
}

/// A store on a manual clock and in-memory storage, with sessions that speak text.
final class Harness {
    let clock = ManualClock()
    let storage: MemoryStorage
    let store: Store

    init(configuration: StoreConfiguration = .init(), storage: MemoryStorage = MemoryStorage()) {
        self.storage = storage
        store = try! Store(configuration: configuration, storage: storage, clock: clock)
    }

    func connect(_ access: Access = .write) -> Client {
        Client(store: store, access: access)
    }
}

final class Client {
    let output = CaptureOutput()
    let session: Session

    init(store: Store, access: Access) {
        session = Session(store: store, access: access, output: output)
    }

    /// Sends a line; returns every line written since the previous call.
    @discardableResult
    func send(_ line: String) -> [String] {
        session.receive(line)
        return output.take()
    }

    /// Sends a request object and returns the parsed response (the first line with `ok`).
    @discardableResult
    func request(_ line: String, file: StaticString = #filePath, lineNumber: UInt = #line) -> [String: JSONValue] {
        let lines = send(line)
        for text in lines {
            if let object = (try? JSONValue.parse(text))?.objectValue, object["ok"] != nil {
                pendingEvents = lines.filter { $0 != text }
                return object
            }
        }
        XCTFail("no response to \(line): \(lines)", file: file, line: lineNumber)
        return [:]
    }

    /// The non-response lines of the last `request`.
    var pendingEvents: [String] = []

    /// Events written since the last call, parsed.
    func events() -> [[String: JSONValue]] {
        output.take().compactMap { (try? JSONValue.parse($0))?.objectValue }.filter { $0["event"] != nil }
    }
}

func errorCode(_ response: [String: JSONValue]) -> String? {
    response["error"]?["code"]?.stringValue
}
