import ObsCore
import XCTest

/// A binding shows wherever keys are shown, even before its keys exist: list, graph and describe
/// show such a key with kind "missing"; describe shows a key's value (or error) too.
final class BindingVisibilityTests: XCTestCase {
    /// `x ──bind, map value + 1──▶ y`, x missing: the map fails on null, so y is not written.
    private func unwrittenBinding() -> Client {
        let client = Harness().connect()
        XCTAssertEqual(client.request(#"{"op":"bind","from":"x","to":"y","map":"value + 1"}"#)["ok"], true)
        XCTAssertEqual(errorCode(client.request(#"{"op":"get","key":"y"}"#)), "not_found")
        return client
    }

    func test_list_showsABindingsKeysBeforeTheyExist() {
        let client = unwrittenBinding()
        client.request(#"{"op":"set","key":"other","value":1}"#)
        XCTAssertEqual(client.request(#"{"op":"list"}"#)["keys"],
                       [["key": "other", "kind": "value"], ["key": "x", "kind": "missing"], ["key": "y", "kind": "missing"]])
        XCTAssertEqual(client.request(#"{"op":"list","pattern":"y"}"#)["keys"], [["key": "y", "kind": "missing"]])
        client.request(#"{"op":"set","key":"x","value":1}"#)
        XCTAssertEqual(client.request(#"{"op":"list"}"#)["keys"],
                       [["key": "other", "kind": "value"], ["key": "x", "kind": "value"], ["key": "y", "kind": "value"]])
        client.request(#"{"op":"unbind","to":"y"}"#)
        client.request(#"{"op":"delete","key":"x"}"#)
        XCTAssertEqual(client.request(#"{"op":"list","pattern":"x"}"#)["keys"], [], "no binding, no key: nothing to show")
    }

    func test_graph_showsTheBindingEdgeBeforeItsKeysExist() {
        let client = unwrittenBinding()
        let graph = client.request(#"{"op":"graph"}"#)
        XCTAssertEqual(graph["nodes"], [["key": "x", "kind": "missing"], ["key": "y", "kind": "missing"]])
        XCTAssertEqual(graph["edges"], [["from": "x", "to": "y", "type": "bind"]])
    }

    func test_describe_showsBothEndsOfABinding_andValuesAndErrors() {
        let client = unwrittenBinding()
        let target = client.request(#"{"op":"describe","key":"y"}"#)
        XCTAssertEqual(target["kind"], "missing")
        XCTAssertEqual(target["binding"], ["from": "x", "map": "value + 1", "two_way": false])
        XCTAssertNil(target["value"])
        let source = client.request(#"{"op":"describe","key":"x"}"#)
        XCTAssertEqual(source["kind"], "missing")
        XCTAssertEqual(source["bound_to"], ["y"])
        XCTAssertEqual(errorCode(client.request(#"{"op":"describe","key":"unrelated"}"#)), "not_found")

        client.request(#"{"op":"set","key":"x","value":1}"#)
        XCTAssertEqual(client.request(#"{"op":"describe","key":"y"}"#)["value"], 2)
        XCTAssertEqual(client.request(#"{"op":"describe","key":"x"}"#)["value"], 1)
        client.request(#"{"op":"define","key":"broken","expr":"1 / 0"}"#)
        let broken = client.request(#"{"op":"describe","key":"broken"}"#)
        XCTAssertNil(broken["value"])
        XCTAssertEqual(broken["error"]?["code"], "eval_error")
    }

    func test_twoWay_eachKeyIsBoundToTheOther() {
        let client = Harness().connect()
        client.request(#"{"op":"set","key":"a","value":1}"#)
        client.request(#"{"op":"bind","from":"a","to":"b","two_way":true}"#)
        XCTAssertEqual(client.request(#"{"op":"describe","key":"a"}"#)["bound_to"], ["b"])
        XCTAssertEqual(client.request(#"{"op":"describe","key":"b"}"#)["bound_to"], ["a"])
    }
}
