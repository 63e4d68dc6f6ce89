// A value key's record, written field by field for speed, is byte for byte what the general JSON
// encoder makes of the same object (so records written before and after read the same), and reads
// back as the key it was written from.
import EtcdClient
import ObsCore
import XCTest
@testable import ObsDaemon

final class ClusterRecordTests: XCTestCase {
    private let records = ClusterRecords(prefix: Array("/p/".utf8), host: "5eed")

    /// The record as the general encoder writes it: an object, names sorted.
    private func generalEncoding(_ key: StoredKey, session: UInt64?, bindingsRev: Int64?) -> [UInt8] {
        var object: [String: JSONValue] = ["value": key.value]
        if let expiresAt = key.expiresAt { object["expires_at"] = .double(expiresAt) }
        if let session { object["owner"] = .string("5eed/\(session)") }
        if let bindingsRev { object["bindings_rev"] = .int(bindingsRev) }
        return Array(JSONValue.object(object).encoded.utf8)
    }

    private func randomValue(_ depth: Int = 0) -> JSONValue {
        switch Int.random(in: 0..<(depth < 2 ? 8 : 6)) {
        case 0: return .null
        case 1: return .bool(Bool.random())
        case 2: return .int(Int64.random(in: Int64.min...Int64.max))
        case 3: return .double(Double.random(in: -1e12...1e12))
        case 4: return .string(String((0..<Int.random(in: 0..<12)).map { _ in "aé\"\\\n\u{1}z/😀".randomElement()! }))
        case 5: return .int(Int64.random(in: -5...5))
        case 6: return .array((0..<Int.random(in: 0..<4)).map { _ in randomValue(depth + 1) })
        default:
            var object: [String: JSONValue] = [:]
            for _ in 0..<Int.random(in: 0..<4) { object["k\(Int.random(in: 0..<9))"] = randomValue(depth + 1) }
            return .object(object)
        }
    }

    /// A binding or definition record is read only as a whole: one whose expression does not
    /// compile (a newer version's function, garbage) or whose members have the wrong type is
    /// unreadable, not installed with the part it could read (a binding without its map copies
    /// its source unchanged).
    func test_bindingAndDefinitionRecords_withAnythingUnreadable_areUnreadable() throws {
        func binding(_ json: String) throws(ClusterRecords.Unreadable) -> StoredBinding {
            try records.storedBinding("t", KeyValue(key: records.key(.binding, "t"), value: Array(json.utf8), createRevision: 1, modRevision: 1, version: 1))
        }
        func definition(_ json: String) throws(ClusterRecords.Unreadable) -> StoredDefinition {
            try records.storedDefinition("c", KeyValue(key: records.key(.definition, "c"), value: Array(json.utf8), createRevision: 1, modRevision: 1, version: 1))
        }
        let read = try binding(#"{"from":"s","to":"t","map":"value * 2","unmap":"value / 2","two_way":true}"#)
        XCTAssertEqual([read.from, read.to, read.map, read.unmap], ["s", "t", "value * 2", "value / 2"])
        XCTAssertTrue(read.twoWay)
        XCTAssertNil(try binding(#"{"from":"s","to":"t","map":null}"#).map)
        XCTAssertEqual(try definition(#"{"expr":"$a + 1"}"#).expr, "$a + 1")
        for bad in [#"{"from":"s","to":"t","map":"value *"}"#, #"{"from":"s","to":"t","map":"nofunction(value)"}"#,
                    #"{"from":"s","to":"t","map":5}"#, #"{"from":"s","to":"t","unmap":"("}"#,
                    #"{"from":"s","to":"t","two_way":"yes"}"#, #"{"from":"t","to":"t"}"#] {
            XCTAssertThrowsError(try binding(bad), bad)
        }
        for bad in [#"{"expr":"1 +"}"#, #"{"expr":"nofunction(1)"}"#, #"{"expr":5}"#] {
            XCTAssertThrowsError(try definition(bad), bad)
        }
    }

    func test_valueRecords_areTheGeneralEncodersBytes_andReadBack() throws {
        for trial in 0..<2_000 {
            var key = StoredKey(key: "k", value: randomValue(), rev: 7, createdRev: 3, version: 2)
            if Bool.random() { key.expiresAt = Double(Int.random(in: 1_700_000_000_000...1_900_000_000_000)) / 1000 }
            let session: UInt64? = Bool.random() ? UInt64.random(in: 1...UInt64.max) : nil
            let bindingsRev: Int64? = Bool.random() ? Int64.random(in: 0...Int64.max) : nil
            let written = records.value(key, owner: session.map { records.owner(session: $0) }, bindingsRev: bindingsRev)
            XCTAssertEqual(written, generalEncoding(key, session: session, bindingsRev: bindingsRev),
                           "trial \(trial): \(String(decoding: written, as: UTF8.self))")
            let kv = KeyValue(key: records.key(.value, "k"), value: written, createRevision: 3, modRevision: 7, version: 2)
            let read = try records.writtenKey("k", kv)
            XCTAssertEqual(read.key.value, key.value)
            XCTAssertEqual(read.key.expiresAt, key.expiresAt)
            XCTAssertEqual(read.key.owner, session)
            XCTAssertEqual(read.owner, session.map { records.owner(session: $0) }, "the owner as written")
            XCTAssertEqual(read.bindingsRev, bindingsRev)
            if trial % 500 == 0 { XCTAssertEqual(read.key.rev, 7) }
        }
    }

    /// A plain key's record (no TTL, no owner) is read without building its object
    /// (`plainRecord`), and reads as the general reading does; bytes it is not sure of are left to
    /// the general reading.
    func test_plainRecords_readWithoutTheObject_asTheGeneralReadingDoes() throws {
        func general(_ bytes: [UInt8]) -> (value: JSONValue, bindingsRev: Int64?)? {
            guard case .object(let object)? = try? JSONValue.parse(bytes), let value = object["value"] else { return nil }
            return (value, object["bindings_rev"]?.intValue)
        }
        for trial in 0..<1_000 {
            let key = StoredKey(key: "k", value: randomValue(), rev: 7, createdRev: 3, version: 2)
            let bindingsRev: Int64? = trial % 3 == 0 ? nil : (trial % 3 == 1 ? Int64.random(in: 0...99) : Int64.random(in: 0...999_999_999_999))
            let written = records.value(key, owner: nil, bindingsRev: bindingsRev)
            let plain = try XCTUnwrap(ClusterRecords.plainRecord(written), "trial \(trial): \(String(decoding: written, as: UTF8.self))")
            XCTAssertEqual(plain.value, key.value)
            XCTAssertEqual(plain.bindingsRev, bindingsRev)
        }
        let deep = String(repeating: "[", count: 127) + String(repeating: "]", count: 127)
        let tooDeep = String(repeating: "[", count: 128) + String(repeating: "]", count: 128)
        let cases: [(String, Bool)] = [
            (#"{"value":1}"#, true), (#"{"value": 1 }"#, true), (#"{"value":"}"}"#, true), (#"{"value":{"a":[1,{}]}}"#, true),
            (#"{"bindings_rev":0,"value":2}"#, true), (#"{"bindings_rev":907,"value":null}"#, true),
            (#"{"value":\#(deep)}"#, true), (#"{"value":\#(tooDeep)}"#, false),
            (#"{"value":1,"owner":"x/1"}"#, false), (#"{"value":{"a":1},"x":2}"#, false), (#"{"value":1}}"#, false),
            (#"{"value":}"#, false), (#"{"value":1,"value":2}"#, false), (#"{"bindings_rev":00,"value":2}"#, false),
            (#"{"bindings_rev":012,"value":2}"#, false), (#"{"bindings_rev":-1,"value":2}"#, false),
            (#"{"bindings_rev":1.5,"value":2}"#, false), (#"{"bindings_rev":123456789012345678901,"value":2}"#, false),
            (#"{"bindings_rev":5,"value":2,"value":3}"#, false), (#"{"expires_at":5,"value":2}"#, false),
            (#"{"value":1"#, false), (#"{"value":"#, false), (#"{"bindings_rev":"#, false), ("", false), ("[1]", false),
        ]
        for (text, plain) in cases {
            let bytes = Array(text.utf8)
            let read = ClusterRecords.plainRecord(bytes)
            XCTAssertEqual(read != nil, plain, text)
            if let read {
                let expected = try XCTUnwrap(general(bytes), text)
                XCTAssertEqual(read.value, expected.value, text)
                XCTAssertEqual(read.bindingsRev, expected.bindingsRev, text)
            }
            // Whichever way it is read, a record reads as the general reading has it, or not at all.
            let kv = KeyValue(key: records.key(.value, "k"), value: bytes, createRevision: 3, modRevision: 7, version: 2)
            let key = try? records.writtenKey("k", kv)
            XCTAssertEqual(key?.key.value, general(bytes)?.value, text)
            XCTAssertEqual(key?.bindingsRev, general(bytes)?.bindingsRev, text)
        }
    }

    /// The revisions a host applied, by record: looked up by the key's bytes, and counting the
    /// definitions among them (a value put looks for a definition it replaces only when there is one).
    func test_recordRevisions_lookUpByBytes_andCountDefinitions() {
        var revisions = RecordRevisions(prefix: records.prefix)
        let (a, b) = (records.key(.definition, "a"), records.key(.definition, "b"))
        let (value, epoch) = (records.key(.value, "a"), records.bindingsEpoch)
        revisions[a] = 3
        revisions[value] = 4
        revisions[epoch] = 5
        revisions[a] = 6
        XCTAssertEqual(revisions.definitions, 1, "a definition put twice is one")
        revisions[b] = 7
        XCTAssertEqual(revisions.definitions, 2)
        XCTAssertEqual([revisions[a], revisions[value], revisions[epoch], revisions[Array("/p/k/b".utf8)]], [6, 4, 5, nil])
        XCTAssertEqual(revisions.newest, 7)
        revisions[a] = nil
        revisions[a] = nil
        revisions[value] = nil
        XCTAssertEqual(revisions.definitions, 1, "deleting a record that is not there changes nothing")
        var other = RecordRevisions(prefix: records.prefix)
        other[epoch] = 5
        other[b] = 7
        XCTAssertEqual(revisions, other)
        other[b] = 8
        XCTAssertNotEqual(revisions, other)
        revisions.removeAll()
        XCTAssertEqual(revisions.definitions, 0)
        XCTAssertNil(revisions.newest)
    }
}
