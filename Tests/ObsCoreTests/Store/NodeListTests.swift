import XCTest
@testable import ObsCore
import TestSupport

/// `NodeList`, the list a transaction keeps its touched, promoted and changed keys in: the order
/// kept, the keys a retaining list keeps alive until it is emptied (and a list that does not
/// retain keeps none), its memory given back after a transaction over many keys.
final class NodeListTests: XCTestCase {
    private func makeStore() throws -> Store {
        try Store(storage: MemoryStorage(), clock: ManualClock())
    }

    func test_keepsTheOrderOfAppends_pastItsFirstCapacity() throws {
        let store = try makeStore()
        let nodes = (0..<100).map { KeyNode(name: "k\($0)", store: store) }
        var list = NodeList(retaining: true)
        for node in nodes { list.append(node) }
        XCTAssertEqual(list.count, 100)
        var seen: [String] = []
        list.forEachGuaranteed { seen.append($0.name) }
        XCTAssertEqual(seen, nodes.map(\.name))
        XCTAssertTrue(list[37] === nodes[37])
        list.removeAll()
        XCTAssertTrue(list.isEmpty)
        list.append(nodes[5])
        XCTAssertTrue(list[0] === nodes[5])
    }

    func test_aRetainingList_keepsItsNodesAliveUntilEmptied() throws {
        let store = try makeStore()
        var list = NodeList(retaining: true)
        weak var weakNode: KeyNode?
        do {
            let node = KeyNode(name: "a", store: store)
            weakNode = node
            list.append(node)
        }
        XCTAssertNotNil(weakNode, "the list keeps the node it holds alive")
        list.removeAll()
        XCTAssertNil(weakNode, "emptied, the list lets go of it")
    }

    func test_aListThatDoesNotRetain_keepsNothingAlive() throws {
        let store = try makeStore()
        var list = NodeList(retaining: false)
        weak var weakNode: KeyNode?
        do {
            let node = KeyNode(name: "a", store: store)
            weakNode = node
            list.append(node)
            XCTAssertTrue(list[0] === node)
        }
        XCTAssertNil(weakNode)
        list.removeAll()
    }

    func test_aRetainingList_letsGoOfItsNodesWhenItGoes() throws {
        let store = try makeStore()
        weak var weakNode: KeyNode?
        do {
            var list = NodeList(retaining: true)
            let node = KeyNode(name: "a", store: store)
            weakNode = node
            list.append(node)
            XCTAssertEqual(list.count, 1)
        }
        XCTAssertNil(weakNode)
    }

    /// A transaction over more keys than the list keeps memory for (4,096): emptied, the list
    /// works as before, with its first capacity.
    func test_aListGrownPastWhatItKeeps_isEmptiedAndUsedAgain() throws {
        let store = try makeStore()
        let nodes = (0..<5_000).map { KeyNode(name: "k\($0)", store: store) }
        var list = NodeList(retaining: true)
        for node in nodes { list.append(node) }
        XCTAssertEqual(list.count, 5_000)
        list.removeAll()
        XCTAssertEqual(list.count, 0)
        for node in nodes.prefix(20) { list.append(node) }
        var seen: [String] = []
        list.forEachGuaranteed { seen.append($0.name) }
        XCTAssertEqual(seen, nodes.prefix(20).map(\.name))
    }
}
