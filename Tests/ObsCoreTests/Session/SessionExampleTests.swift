import ObsCore
import XCTest

/// The example session of docs/protocol.md, byte for byte.
final class SessionExampleTests: XCTestCase {
    func test_protocolExampleSession_verbatim() {
        let harness = Harness()
        let client = harness.connect()
        XCTAssertEqual(client.send(#"{"id":1,"op":"set","key":"price","value":3}"#), [#"{"id":1,"ok":true,"rev":1,"changed":true}"#])
        XCTAssertEqual(client.send(#"{"id":2,"op":"set","key":"qty","value":2}"#), [#"{"id":2,"ok":true,"rev":2,"changed":true}"#])
        XCTAssertEqual(client.send(#"{"id":3,"op":"define","key":"total","expr":"$price * $qty"}"#),
                       [#"{"id":3,"ok":true,"rev":3,"deps":["price","qty"]}"#])
        XCTAssertEqual(client.send(#"{"id":4,"op":"watch","keys":["total"]}"#), [
            #"{"id":4,"ok":true,"watch":1}"#,
            #"{"event":"initial","watch":1,"key":"total","kind":"computed","value":6,"rev":3}"#,
            #"{"event":"synced","watch":1,"rev":3}"#,
        ])
        XCTAssertEqual(client.send(#"{"id":5,"op":"batch","ops":[{"op":"set","key":"price","value":4},{"op":"set","key":"qty","value":5}]}"#), [
            #"{"id":5,"ok":true,"rev":4,"results":[{"rev":4,"changed":true},{"rev":4,"changed":true}]}"#,
            #"{"event":"change","watch":1,"key":"total","old":6,"new":20,"rev":4,"created":false}"#,
        ])
    }
}
