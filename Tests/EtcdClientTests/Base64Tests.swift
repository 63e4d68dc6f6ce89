// The gateway's base64, against Foundation's.
@testable import EtcdClient
import Foundation
import XCTest

final class Base64Tests: XCTestCase {
    func test_encodeAndDecode_agreeWithFoundation_forEveryLengthAndByte() {
        var generator = SystemRandomNumberGenerator()
        for length in 0..<64 {
            for _ in 0..<20 {
                let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
                let encoded = Base64.encode(bytes)
                XCTAssertEqual(encoded, Data(bytes).base64EncodedString(), "\(bytes)")
                XCTAssertEqual(Base64.decode(encoded), bytes)
            }
        }
        XCTAssertEqual(Base64.decode(Base64.encode(Array(0...255))), Array(0...255))
    }

    func test_decode_refusesWhatIsNotBase64() {
        for text in ["a", "abc", "ab=c", "a===", "@@@@", "YW Jj", "YWJj\n"] {
            XCTAssertNil(Base64.decode(text), text)
        }
        XCTAssertEqual(Base64.decode(""), [])
    }
}
