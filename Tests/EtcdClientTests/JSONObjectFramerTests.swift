// The framer that cuts a watch stream into JSON objects, fed all at once, a byte at a time and in
// random chunks; with the gateway's quirks (objects on one line, padding) and its bound.
@testable import EtcdClient
import XCTest

final class JSONObjectFramerTests: XCTestCase {
    private let stream = #"""
        {"result":{"header":{"revision":"3"},"created":true}}
        {"result":{"events":[{"kv":{"key":"e30=","value":"In0i"}}]}}
        {"s":"a \"quoted\" } brace and a \\ backslash","n":[{"x":[]}]}     {"error":{"grpc_code":14,"message":"etcdserver: no leader"}}
        """#

    private var expected: [String] {
        [
            #"{"result":{"header":{"revision":"3"},"created":true}}"#,
            #"{"result":{"events":[{"kv":{"key":"e30=","value":"In0i"}}]}}"#,
            #"{"s":"a \"quoted\" } brace and a \\ backslash","n":[{"x":[]}]}"#,
            #"{"error":{"grpc_code":14,"message":"etcdserver: no leader"}}"#,
        ]
    }

    private func frame(_ chunks: [[UInt8]], maxBytes: Int = 1 << 20) throws -> [String] {
        var framer = JSONObjectFramer(maxBytes: maxBytes)
        var objects: [String] = []
        for chunk in chunks {
            objects += try chunk.withUnsafeBytes { try framer.append($0) }.map { String(decoding: $0, as: UTF8.self) }
        }
        XCTAssertEqual(framer.pendingBytes, 0)
        return objects
    }

    func test_wholeStream() throws {
        XCTAssertEqual(try frame([Array(stream.utf8)]), expected)
    }

    func test_oneByteAtATime() throws {
        XCTAssertEqual(try frame(Array(stream.utf8).map { [$0] }), expected)
    }

    func test_randomChunks() throws {
        var generator = SystemRandomNumberGenerator()
        let bytes = Array(stream.utf8)
        for _ in 0..<200 {
            var chunks: [[UInt8]] = []
            var start = 0
            while start < bytes.count {
                let end = min(bytes.count, start + Int.random(in: 1...40, using: &generator))
                chunks.append(Array(bytes[start..<end]))
                start = end
            }
            XCTAssertEqual(try frame(chunks), expected)
        }
    }

    func test_objectOverTheBound_isRefused_evenWhenItArrivesInPieces() {
        let object = Array(#"{"value":"\#(String(repeating: "x", count: 100))"}"#.utf8)
        XCTAssertThrowsError(try frame([object], maxBytes: 64)) { XCTAssertEqual($0 as? JSONObjectFramer.FramingError, .tooLarge) }
        XCTAssertThrowsError(try frame(object.map { [$0] }, maxBytes: 64)) {
            XCTAssertEqual($0 as? JSONObjectFramer.FramingError, .tooLarge)
        }
        XCTAssertEqual(try frame([object], maxBytes: object.count).count, 1)
    }

    func test_somethingOtherThanAnObject_isRefused() {
        XCTAssertThrowsError(try frame([Array(#"{"a":1} [1]"#.utf8)])) {
            XCTAssertEqual($0 as? JSONObjectFramer.FramingError, .notAnObject(UInt8(ascii: "[")))
        }
    }
}
