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

    func test_valueRecords_areTheGeneralEncodersBytes_andReadBack() throws {
        for trial in 0..<2_000 {
            var key = StoredKey(key: "k", value: randomValue(), rev: 7, createdRev: 3, version: 2)
            if Bool.random() { key.expiresAt = Double(Int.random(in: 1_700_000_000_000...1_900_000_000_000)) / 1000 }
            let session: UInt64? = Bool.random() ? UInt64.random(in: 1...UInt64.max) : nil
            let bindingsRev: Int64? = Bool.random() ? Int64.random(in: 0...Int64.max) : nil
            let written = records.value(key, session: session, bindingsRev: bindingsRev)
            XCTAssertEqual(written, generalEncoding(key, session: session, bindingsRev: bindingsRev),
                           "trial \(trial): \(String(decoding: written, as: UTF8.self))")
            let kv = KeyValue(key: records.key(.value, "k"), value: written, createRevision: 3, modRevision: 7, version: 2)
            let read = try records.writtenKey("k", kv)
            XCTAssertEqual(read.key.value, key.value)
            XCTAssertEqual(read.key.expiresAt, key.expiresAt)
            XCTAssertEqual(read.key.owner, session)
            XCTAssertEqual(read.bindingsRev, bindingsRev)
            if trial % 500 == 0 { XCTAssertEqual(read.key.rev, 7) }
        }
    }
}
