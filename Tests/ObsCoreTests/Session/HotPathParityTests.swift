import XCTest
@testable import ObsCore
import TestSupport

/// The hot path (RequestScanner.swift, Session+Hot.swift, Store+PlainKeys.swift) answers some
/// requests from their bytes (and sets of keys that are nodes, Store+NodeKeySets.swift, with a
/// value made from the line's token); everything it answers must be answered exactly as the
/// general path (JSONValue.parse, the operation table) answers it. Two stores get the
/// same random lines, one with the hot path and one without; every line written to every session
/// (answers and events, and whether each waits for a sync), the stats and the dump must be the
/// same bytes.
final class HotPathParityTests: XCTestCase {
    /// Lines of every kind the scanner meets: hot requests written as clients write them, and the
    /// near misses it must leave to the general path (escapes, fractions, -0, leading zeros,
    /// big numbers, containers, other fields, duplicate members, bad syntax, bad names), and keys
    /// that are nodes (of which it answers sets only).
    private func randomLine(_ random: inout SplitMix64) -> String {
        let keys = ["a", "b.c", "k.1", "k.2", "long.name.with.many.segments-and_more", "c", "bad..key", "x y", ""]
        let values = ["1", "-7", "0", "-0", "01", "1.5", "2e3", "123456789012345678", "9223372036854775807", "99999999999999999999",
                      "\"text\"", "\"with \\\"escape\\\"\"", "\"caf\u{e9}\"", "\"\\u0041\"", "true", "false", "null", "[1,2]",
                      "{\"b\":1,\"a\":2}", "\"\"", "-9223372036854775808",
                      // Equal values in other bytes: the Kelvin sign is "K" by canonical equivalence.
                      "\"\\u212A\"", "\"K\"", "\"\\u212Ak\"", "\"Kk\"", "\"0123456789\\u212A\"", "\"0123456789K\"",
                      // Long strings, which the scanner reads eight bytes at a time: plain, and with
                      // what it must refuse (an escape, a non-ASCII byte, a raw tab) past the first word.
                      "\"" + String(repeating: "0123456789abcdef", count: 4) + "\"",
                      "\"" + String(repeating: "x", count: 20) + "\\\"q\\\"" + String(repeating: "y", count: 13) + "\"",
                      "\"" + String(repeating: "z", count: 30) + "\u{e9}" + String(repeating: "w", count: 9) + "\"",
                      "\"" + String(repeating: "t", count: 17) + "\t" + String(repeating: "u", count: 8) + "\""]
        let ids = ["1", "\"r-1\"", "null", "1.0", "-0", "[1]", "true", "12345678901234567890"]
        func string(_ text: String) -> String { "\"\(text)\"" }
        var members: [String] = []
        let op = random.pick(["get", "set", "incr", "ping", "publish", "set", "get", "incr", "delete", "nope"])
        if random.below(10) > 0 { members.append("\"op\":\(string(op))") }
        if random.below(3) > 0 { members.append("\"id\":\(random.pick(ids))") }
        switch op {
        case "publish":
            if random.below(8) > 0 { members.append("\"channel\":\(string(random.pick(keys)))") }
            if random.below(3) > 0 { members.append("\"payload\":\(random.pick(values))") }
        case "ping":
            break
        default:
            if random.below(10) > 0 {
                let key = random.below(12) == 0 ? random.pick(["1", "null", "[\"a\"]"]) : string(random.pick(keys))
                members.append("\"key\":\(key)")
            }
            if op == "set" || random.below(6) == 0 { members.append("\"value\":\(random.pick(values))") }
            if op == "incr" && random.below(2) == 0 { members.append("\"by\":\(random.pick(["1", "-3", "2.5", "\"1\"", "0", "9223372036854775807"]))") }
        }
        if random.below(12) == 0 { members.append(random.pick(["\"ttl_ms\":5000", "\"ephemeral\":true", "\"if_rev\":3", "\"always\":true",
                                                                 "\"pattern\":\"k.*\"", "\"extra\":1"])) }
        if random.below(20) == 0, let first = members.first { members.append(first) }
        members.shuffle(using: &random)
        let separator = random.pick([",", ", ", " , "])
        var line = "{" + members.joined(separator: separator) + "}"
        switch random.below(40) {
        case 0: line = " " + line + "\t"
        case 1: line.removeLast()
        case 2: line = "[" + line + "]"
        default: break
        }
        return line
    }

    /// The lines a client got since the last call, each marked when it waits for a sync (strict
    /// durability holds it until then; the store's storage keeps commits, so writes are marked).
    private static func take(_ client: Client) -> [String] {
        defer { client.output.lines.removeAll() }
        return client.output.lines.map { ($0.needsSync ? "sync " : "") + $0.text }
    }

    func test_hotAndGeneralPaths_writeTheSameLines() {
        for seed in UInt64(1)...6 {
            var random = SplitMix64(seed: seed)
            let hot = Harness(), general = Harness()
            general.store.answersHotRequests = false
            let hotClients = (0..<3).map { _ in hot.connect() }
            let generalClients = (0..<3).map { _ in general.connect() }
            // Watches on both, so that events are compared too; computeds make some keys nodes,
            // whose sets the hot path answers through the general path's transaction.
            for (harness, clients) in [(hot, hotClients), (general, generalClients)] {
                clients[1].request(#"{"op":"watch","keys":["**"],"initial":false}"#)
                clients[2].request(#"{"op":"watch","keys":["k.*","a"],"mode":"latest","initial":false}"#)
                clients[0].request(#"{"op":"define","key":"c","expr":"$k.1 + 1"}"#)
                clients[0].request(#"{"op":"define","key":"m","expr":"count(match(\"b.*\"))"}"#)
                // Read by a computed whose name no line deletes: nodes throughout.
                clients[0].request(#"{"op":"define","key":"pair","expr":"[$k.1, $a]"}"#)
                _ = harness
            }
            var scanned = 0, synced = 0
            var previous = ""
            for step in 0..<1500 {
                // A line sent again now and then: a set that changes nothing, an incr of a key
                // the line made.
                let line = random.below(8) == 0 && !previous.isEmpty ? previous : randomLine(&random)
                previous = line
                if line.utf8CString.withUnsafeBytes({ RequestScanner.scan(UnsafeRawBufferPointer(rebasing: $0.dropLast())) }) != nil {
                    scanned += 1
                }
                let sender = random.below(3) == 2 ? 0 : random.below(2)
                hotClients[sender].session.receive(line)
                generalClients[sender].session.receive(line)
                for index in 0..<3 {
                    let hotLines = Self.take(hotClients[index])
                    let generalLines = Self.take(generalClients[index])
                    synced += hotLines.filter { $0.hasPrefix("sync ") }.count
                    XCTAssertEqual(hotLines, generalLines, "seed \(seed), step \(step), client \(index), line \(line)")
                    if hotLines != generalLines { return }
                }
            }
            XCTAssertGreaterThan(scanned, 300, "a good part of the lines should be the scanner's")
            XCTAssertGreaterThan(synced, 100, "writes should be marked as waiting for a sync: \(synced)")
            XCTAssertEqual(hotClients[0].send(#"{"op":"dump"}"#), generalClients[0].send(#"{"op":"dump"}"#))
            let stats = { (client: Client) in client.request(#"{"op":"stats"}"#).filter { $0.key != "uptime_s" } }
            XCTAssertEqual(stats(hotClients[0]), stats(generalClients[0]))
            XCTAssertGreaterThanOrEqual(hot.store.keyCount, 3)
        }
    }

    /// The scanner's eight-bytes-at-a-time search against the byte rule it stands for: every byte
    /// value at every position of a word, then random words of bytes drawn mostly from the
    /// interesting ones, several special bytes in one word included. The first special byte must be
    /// the one found.
    func test_specialBytes_findTheFirstByteTheByteRuleRefuses() {
        func isSpecial(_ byte: UInt8) -> Bool { byte < 0x20 || byte > 0x7F || byte == 0x22 || byte == 0x5C }
        func check(_ bytes: [UInt8]) {
            let word = bytes.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
            let mask = RequestScanner.specialBytes(word)
            let found = mask == 0 ? 8 : mask.trailingZeroBitCount >> 3
            XCTAssertEqual(found, bytes.firstIndex(where: isSpecial) ?? 8, "\(bytes)")
        }
        for position in 0..<8 {
            for byte in 0...255 {
                var bytes = [UInt8](repeating: UInt8(ascii: "a"), count: 8)
                bytes[position] = UInt8(byte)
                check(bytes)
            }
        }
        var random = SplitMix64(seed: 88)
        let pool: [UInt8] = [0x00, 0x01, 0x1F, 0x20, 0x21, 0x22, 0x23, 0x5B, 0x5C, 0x5D, 0x7E, 0x7F, 0x80, 0x9F, 0xC3, 0xFF, 0x61, 0x30]
        for _ in 0..<20_000 {
            check((0..<8).map { _ in random.below(4) == 0 ? UInt8(truncatingIfNeeded: random.next()) : random.pick(pool) })
        }
    }

    /// The hot path does answer what it is for (the parity test would pass, uselessly, if it never
    /// did), and leaves the rest.
    func test_hotPath_answersTheHotOperations_andLeavesTheRest() {
        let harness = Harness()
        let client = harness.connect()
        let reader = harness.connect(.read)
        client.request(#"{"op":"define","key":"c","expr":"1"}"#)
        client.request(#"{"op":"define","key":"d","expr":"$src + 1"}"#)
        let cases: [(String, Bool, Session)] = [
            (#"{"op":"set","key":"a","value":"v","id":1}"#, true, client.session),
            (#"{"op":"get","key":"a"}"#, true, client.session),
            (#" { "id" : "x" , "op" : "incr" , "key" : "n" , "by" : -2 } "#, true, client.session),
            (#"{"op":"ping"}"#, true, client.session),
            (#"{"op":"publish","channel":"ch","payload":7}"#, true, client.session),
            (#"{"op":"set","key":"a","value":[1]}"#, false, client.session),
            (#"{"op":"set","key":"a","value":"v","ttl_ms":10}"#, false, client.session),
            (#"{"op":"set","key":"c","value":1}"#, false, client.session),
            // A key a computed reads is a node: set through the general path's transaction.
            (#"{"op":"set","key":"src","value":41,"id":2}"#, true, client.session),
            (#"{"op":"set","key":"src","value":"forty-one, long enough to be on the heap"}"#, true, client.session),
            (#"{"op":"set","key":"src","value":41,"if_rev":1}"#, false, client.session),
            (#"{"op":"set","key":"src","value":41}"#, false, reader.session),
            // An incr of a node too: of a string, the transaction's type error, answered as the
            // general path answers it.
            (#"{"op":"incr","key":"src"}"#, true, client.session),
            (#"{"op":"set","key":"src","value":40}"#, true, client.session),
            (#"{"op":"incr","key":"src","by":2}"#, true, client.session),
            (#"{"op":"incr","key":"src","by":2.5}"#, false, client.session),
            (#"{"op":"get","key":"c"}"#, false, client.session),
            (#"{"op":"get","key":"missing"}"#, false, client.session),
            (#"{"op":"set","key":"a","value":"v"}"#, false, reader.session),
            (#"{"op":"incr","key":"a"}"#, false, client.session),
            (#"{"op":"set","key":"a","key":"b","value":1}"#, false, client.session),
            (#"{"op":"set","key":"a","value":1.5}"#, false, client.session),
            (#"{"op":"set","key":"a\u0062","value":1}"#, false, client.session),
        ]
        for (line, hot, session) in cases {
            let handled = line.utf8CString.withUnsafeBytes { session.handleHot(UnsafeRawBufferPointer(rebasing: $0.dropLast())) }
            XCTAssertEqual(handled, hot, line)
        }
        if case .record? = harness.store.view("a") {} else { XCTFail("a plain key is a record") }
        XCTAssertEqual(harness.store.value(forKey: "d"), .int(43), "the computed saw the hot writes of its source")
    }

    /// The same in cluster mode (a shared log in memory behind two hosts): there the hot path
    /// takes `get`, and `set` of a plain key to a new value, which it proposes to the log without
    /// running a transaction; the log's revisions of one plain key are applied without one too.
    /// Two clusters get the same random lines, one with the hot path and one without, on either
    /// host; every line written to every session, the stats and the dump must be the same bytes.
    func test_inClusterMode_hotAndGeneralPaths_writeTheSameLines() {
        for seed in UInt64(21)...24 {
            var random = SplitMix64(seed: seed)
            let hot = SimulatedCluster(hosts: 2), general = SimulatedCluster(hosts: 2)
            for store in general.stores { store.answersHotRequests = false }
            let hotClients = [0, 1, 1].map { Client(store: hot.stores[$0], access: .write) }
            let generalClients = [0, 1, 1].map { Client(store: general.stores[$0], access: .write) }
            for clients in [hotClients, generalClients] {
                clients[1].request(#"{"op":"watch","keys":["**"],"initial":false}"#)
                clients[2].request(#"{"op":"watch","keys":["k.*","a"],"mode":"latest","initial":false}"#)
                clients[0].request(#"{"op":"define","key":"c","expr":"$k.1 + 1"}"#)
                clients[0].request(#"{"op":"define","key":"m","expr":"count(match(\"b.*\"))"}"#)
                clients[0].request(#"{"op":"define","key":"pair","expr":"[$k.1, $a]"}"#)
            }
            var hotSets = 0
            var previous = ""
            for step in 0..<1500 {
                let line = random.below(8) == 0 && !previous.isEmpty ? previous : randomLine(&random)
                previous = line
                let sender = random.below(3) == 2 ? 0 : random.below(2)
                let serial = hot.stores[sender == 0 ? 0 : 1].transactionSerial
                hotClients[sender].session.receive(line)
                generalClients[sender].session.receive(line)
                if line.contains(#""op":"set""#), hot.stores[sender == 0 ? 0 : 1].transactionSerial == serial,
                   hotClients[sender].output.lines.first?.text.contains(#""changed":true"#) == true {
                    hotSets += 1
                }
                for index in 0..<3 {
                    let hotLines = Self.take(hotClients[index])
                    let generalLines = Self.take(generalClients[index])
                    XCTAssertEqual(hotLines, generalLines, "seed \(seed), step \(step), client \(index), line \(line)")
                    if hotLines != generalLines { return }
                }
            }
            XCTAssertGreaterThan(hotSets, 8, "sets of plain keys to new values are proposed without a transaction: \(hotSets)")
            for host in 0..<2 {
                let (hotClient, generalClient) = (hotClients[host == 0 ? 0 : 1], generalClients[host == 0 ? 0 : 1])
                XCTAssertEqual(hotClient.send(#"{"op":"dump"}"#), generalClient.send(#"{"op":"dump"}"#))
                let stats = { (client: Client) in client.request(#"{"op":"stats"}"#).filter { $0.key != "uptime_s" } }
                XCTAssertEqual(stats(hotClient), stats(generalClient))
            }
            XCTAssertEqual(hot.log, general.log, "the same transactions decided")
        }
    }

    /// A value equal to the key's in other bytes (the Kelvin sign is "K" by canonical
    /// equivalence), with the non-ASCII bytes anywhere in the value (in the words the check reads
    /// eight bytes at a time, or in the bytes after them): the hot path leaves the `set` to the
    /// general path, which finds it changes nothing.
    func test_aSetToAnEqualValueInOtherBytes_changesNothing_whereverTheNonASCIIBytesAre() {
        for (offset, suffix) in [0, 1, 7, 8, 9, 15, 16, 17, 29].flatMap({ [($0, "z"), ($0, "zzzzzzzzzz")] }) {
            let padding = String(repeating: "p", count: offset)
            let hot = Harness(), general = Harness()
            general.store.answersHotRequests = false
            for harness in [hot, general] {
                let client = harness.connect()
                client.request(#"{"op":"set","key":"t","value":"\#(padding)\u212A\#(suffix)"}"#)
                let answer = client.send(#"{"id":1,"op":"set","key":"t","value":"\#(padding)K\#(suffix)"}"#)
                XCTAssertEqual(answer, [#"{"id":1,"ok":true,"rev":1,"changed":false}"#], "offset \(offset), suffix \(suffix)")
            }
        }
    }

    /// A record keeps whether its value has non-ASCII bytes, and a hot `set` (whose value is ASCII)
    /// trusts it: so every way a record is written must say so, or a `set` of "K" to a key holding
    /// the Kelvin sign would change it. The ways: a plain write of the library's `setValue`, a key
    /// made a record again after the general path wrote it, a key loaded at start-up, and a record
    /// whose value was replaced in place or moved.
    func test_everyWayARecordIsWritten_keepsWhetherItsValueIsASCII() throws {
        let kelvin = "\u{212A}", tail = String(repeating: "k", count: 100)
        func unchanged(_ id: Int, _ rev: Int) -> [String] { [#"{"id":\#(id),"ok":true,"rev":\#(rev),"changed":false}"#] }
        // The library's plain writes: an equal value in other bytes changes nothing either way
        // round; a non-ASCII value written in place, then one that moves the record.
        let store = try Store(storage: MemoryStorage(), clock: ManualClock())
        let client = Client(store: store, access: .write)
        try store.setValue(.string("K"), forKey: "a")
        XCTAssertEqual(try store.setValue(.string(kelvin), forKey: "a"), 1)
        try store.setValue(.string("Kelvin"), forKey: "b")
        try store.setValue(.string(kelvin), forKey: "b")
        XCTAssertEqual(client.send(#"{"id":1,"op":"set","key":"b","value":"K"}"#), unchanged(1, 3))
        try store.setValue(.string(kelvin + tail), forKey: "b")
        XCTAssertEqual(client.send(#"{"id":2,"op":"set","key":"b","value":"K\#(tail)"}"#), unchanged(2, 4))
        // Written by the general path (a batch), then loaded at start-up.
        let storage = MemoryStorage()
        let first = Harness(storage: storage).connect()
        first.request(#"{"op":"batch","ops":[{"op":"set","key":"c","value":"\u212A"}]}"#)
        XCTAssertEqual(first.send(#"{"id":3,"op":"set","key":"c","value":"K"}"#), unchanged(3, 1))
        let second = Harness(storage: storage).connect()
        XCTAssertEqual(second.send(#"{"id":4,"op":"set","key":"c","value":"K"}"#), unchanged(4, 1))
    }
}
