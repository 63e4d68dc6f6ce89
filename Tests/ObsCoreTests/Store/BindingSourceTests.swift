import ObsCore
import XCTest

/// A binding reads its source as an expression reads a key: a missing source is null. So the map
/// runs when the binding is made and after every delete of the source; without a map the target
/// becomes null. A source in the error state, or a map that fails, leaves the target alone.
///
///     net.wifi.ssid ──bind, map value ?? "offline"──▶ bar.wifi
final class BindingSourceTests: XCTestCase {
    private let offline = #"{"op":"bind","from":"net.wifi.ssid","to":"bar.wifi","map":"value ?? \"offline\""}"#

    func test_bindingAMissingSource_mapsNullAtOnce() {
        let harness = Harness()
        let client = harness.connect()
        let watcher = harness.connect()
        watcher.request(#"{"op":"watch","keys":["bar.*"],"initial":false}"#)
        XCTAssertEqual(client.request(offline)["rev"], 1)
        XCTAssertEqual(client.request(#"{"op":"get","key":"bar.wifi"}"#)["value"], "offline")
        XCTAssertEqual(watcher.output.take(), [#"{"event":"change","watch":1,"key":"bar.wifi","new":"offline","rev":1,"created":true}"#])
    }

    func test_deletingTheSource_mapsNullInTheSameTransaction_everyTime() {
        let harness = Harness()
        let client = harness.connect()
        client.request(offline)
        let watcher = harness.connect()
        watcher.request(#"{"op":"watch","keys":["**"],"initial":false}"#)
        for ssid in ["home", "cafe"] {
            client.request(#"{"op":"set","key":"net.wifi.ssid","value":"\#(ssid)"}"#)
            XCTAssertEqual(client.request(#"{"op":"get","key":"bar.wifi"}"#)["value"], .string(ssid))
            let rev = client.request(#"{"op":"delete","key":"net.wifi.ssid"}"#)["rev"]!
            XCTAssertEqual(client.request(#"{"op":"get","key":"bar.wifi"}"#)["value"], "offline")
            let events = watcher.events()
            XCTAssertEqual(events.suffix(2).map { $0["event"]! }, ["change", "delete"], "bar.wifi, then net.wifi.ssid: key order")
            XCTAssertEqual(events.last?["rev"], rev, "the delete and the binding's write are one transaction")
            XCTAssertEqual(events.suffix(2).first?["key"], "bar.wifi")
            XCTAssertEqual(events.suffix(2).first?["new"], "offline")
        }
    }

    func test_sourceExpiring_mapsNullToo() {
        let harness = Harness()
        let client = harness.connect()
        client.request(offline)
        client.request(#"{"op":"set","key":"net.wifi.ssid","value":"home","ttl_ms":1000}"#)
        XCTAssertEqual(client.request(#"{"op":"get","key":"bar.wifi"}"#)["value"], "home")
        harness.clock.advance(1.5)
        harness.store.tick()
        XCTAssertEqual(client.request(#"{"op":"get","key":"bar.wifi"}"#)["value"], "offline")
    }

    func test_withoutAMap_aMissingSourceWritesNull() {
        let client = Harness().connect()
        client.request(#"{"op":"bind","from":"a","to":"b"}"#)
        XCTAssertEqual(client.request(#"{"op":"get","key":"b"}"#)["value"], .null)
        client.request(#"{"op":"set","key":"a","value":5}"#)
        XCTAssertEqual(client.request(#"{"op":"get","key":"b"}"#)["value"], 5)
        client.request(#"{"op":"delete","key":"a"}"#)
        XCTAssertEqual(client.request(#"{"op":"get","key":"b"}"#)["value"], .null)
    }

    func test_sourceInError_orAFailingMap_keepsTheTarget() {
        let client = Harness().connect()
        client.request(#"{"op":"set","key":"d","value":2}"#)
        client.request(#"{"op":"define","key":"q","expr":"10 / $d"}"#)
        client.request(#"{"op":"bind","from":"q","to":"t"}"#)
        XCTAssertEqual(client.request(#"{"op":"get","key":"t"}"#)["value"], 5)
        client.request(#"{"op":"set","key":"d","value":0}"#)
        XCTAssertEqual(client.request(#"{"op":"get","key":"t"}"#)["value"], 5, "q is in error: t keeps its value")
        // A map that cannot take null (null + 1 fails): deleting the source leaves the target.
        client.request(#"{"op":"set","key":"n","value":1}"#)
        client.request(#"{"op":"bind","from":"n","to":"m","map":"value + 1"}"#)
        XCTAssertEqual(client.request(#"{"op":"get","key":"m"}"#)["value"], 2)
        client.request(#"{"op":"delete","key":"n"}"#)
        XCTAssertEqual(client.request(#"{"op":"get","key":"m"}"#)["value"], 2)
        // Binding a missing source through such a map writes nothing at all.
        client.request(#"{"op":"bind","from":"none","to":"untouched","map":"value + 1"}"#)
        XCTAssertEqual(errorCode(client.request(#"{"op":"get","key":"untouched"}"#)), "not_found")
    }

    /// Each side of a two-way binding is the other's source: deleting one writes null into the
    /// other (the binding's own writes never echo back).
    func test_twoWay_deletingOneSide_writesNullIntoTheOther() {
        let client = Harness().connect()
        client.request(#"{"op":"set","key":"a","value":1}"#)
        client.request(#"{"op":"bind","from":"a","to":"b","two_way":true}"#)
        XCTAssertEqual(client.request(#"{"op":"get","key":"b"}"#)["value"], 1)
        client.request(#"{"op":"delete","key":"a"}"#)
        XCTAssertEqual(client.request(#"{"op":"get","key":"b"}"#)["value"], .null)
        XCTAssertEqual(errorCode(client.request(#"{"op":"get","key":"a"}"#)), "not_found", "no echo recreates a")
        client.request(#"{"op":"set","key":"b","value":3}"#)
        XCTAssertEqual(client.request(#"{"op":"get","key":"a"}"#)["value"], 3)
    }

    /// After a restart the binding is restored without writing (the target was saved), and a
    /// delete of the source maps null as before.
    func test_restart_keepsTheRule() {
        let storage = MemoryStorage()
        let first = Harness(storage: storage).connect()
        first.request(offline)
        first.request(#"{"op":"set","key":"net.wifi.ssid","value":"home"}"#)
        let client = Harness(storage: storage).connect()
        XCTAssertEqual(client.request(#"{"op":"ping"}"#)["rev"], 2)
        XCTAssertEqual(client.request(#"{"op":"get","key":"bar.wifi"}"#)["value"], "home")
        client.request(#"{"op":"delete","key":"net.wifi.ssid"}"#)
        XCTAssertEqual(client.request(#"{"op":"get","key":"bar.wifi"}"#)["value"], "offline")
    }
}
