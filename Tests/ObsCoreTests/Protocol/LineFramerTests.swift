import XCTest
import ObsCore

final class LineFramerTests: XCTestCase {
    /// Feeds `input` split at `cuts` and returns the lines, or nil if the framer refused a line.
    private func frame(_ input: [UInt8], chunks: [Int], limit: Int = 64) -> (lines: [String], tooLong: Bool, buffered: Int) {
        var framer = LineFramer(maxLineBytes: limit)
        var lines: [String] = []
        var start = 0
        for size in chunks + [input.count] where start < input.count {
            let end = min(input.count, start + size)
            let failed = input[start..<end].withUnsafeBytes { raw in
                do throws(LineTooLong) {
                    try framer.append(raw) { lines.append(String(decoding: $0, as: UTF8.self)) }
                    return false
                } catch {
                    return true
                }
            }
            if failed { return (lines, true, framer.bufferedBytes) }
            start = end
        }
        return (lines, false, framer.bufferedBytes)
    }

    private let input = Array("{\"op\":\"ping\"}\n\n  \r\n{\"a\":1}\r\n{\"b\":\"é\"}\npartial".utf8)
    private let expected = ["{\"op\":\"ping\"}", "{\"a\":1}", "{\"b\":\"é\"}"]

    func test_allAtOnce() {
        let result = frame(input, chunks: [input.count])
        XCTAssertEqual(result.lines, expected)
        XCTAssertFalse(result.tooLong)
        XCTAssertEqual(result.buffered, "partial".utf8.count, "the partial line waits, never delivered")
    }

    func test_oneByteAtATime() {
        let result = frame(input, chunks: Array(repeating: 1, count: input.count))
        XCTAssertEqual(result.lines, expected)
        XCTAssertEqual(result.buffered, "partial".utf8.count)
    }

    func test_randomChunks_giveTheSameLines() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<500 {
            let chunks = (0..<input.count).map { _ in Int.random(in: 1...9, using: &generator) }
            XCTAssertEqual(frame(input, chunks: chunks).lines, expected, "\(chunks)")
        }
    }

    func test_lineAtTheLimit_isAccepted_andOneByteMore_isRefused() {
        let exact = Array(repeating: UInt8(ascii: "x"), count: 64)
        XCTAssertEqual(frame(exact + [0x0A], chunks: [65]).lines.map(\.count), [64])
        XCTAssertEqual(frame(exact + [0x0D, 0x0A], chunks: [1, 1, 1, 1, 1, 61]).lines.map(\.count), [64], "CR is not counted")
        let over = exact + [UInt8(ascii: "y"), 0x0A]
        for chunks in [[66], Array(repeating: 1, count: 66), [10, 56]] {
            XCTAssertTrue(frame(over, chunks: chunks).tooLong, "\(chunks)")
        }
    }

    func test_overlongLine_isRefusedBeforeItsNewlineArrives() {
        let endless = Array(repeating: UInt8(ascii: "x"), count: 1000)
        let result = frame(endless, chunks: [100])
        XCTAssertTrue(result.tooLong)
        XCTAssertLessThanOrEqual(result.buffered, 65, "buffering stops at the limit")
    }

    func test_linesBeforeAnOverlongOne_areDelivered() {
        let bytes = Array("ok\n".utf8) + Array(repeating: UInt8(ascii: "x"), count: 100) + [0x0A]
        let result = frame(bytes, chunks: [bytes.count])
        XCTAssertEqual(result.lines, ["ok"])
        XCTAssertTrue(result.tooLong)
    }
}
