// Damaged, truncated, missing and vanishing database and WAL files. Whatever the damage, obsd either
// refuses to start, naming the file, or serves a state that was really committed: never a wrong
// value, never a mix of transactions.
import Foundation
import Glibc
import ObsCore
import TestSupport
import XCTest

final class HostileDatabaseTests: XCTestCase {
    /// A database written by obsd and closed cleanly (everything checkpointed into obsd.db), and
    /// what `dump` said of it.
    private func referenceDatabase(_ sandbox: Sandbox) throws -> (bytes: Data, dump: NSDictionary) {
        let obsd = try ObsdProcess.started(sandbox)
        let client = try Client(sandbox.socket)
        let writes = (0..<300).map { #"{"op":"set","key":"k.\#($0)","value":{"n":\#($0),"text":"value \#($0) \#(String(repeating: "x", count: $0 % 50))"}}"# }
            + [#"{"op":"define","key":"sum","expr":"$k.1.n + $k.2.n"}"#, #"{"op":"bind","from":"k.3","to":"copy","map":"value.n * 2"}"#]
        client.send(writes.map { $0 + "\n" }.joined())
        for _ in writes { XCTAssertEqual(json(client.readLine())["ok"] as? Bool, true) }
        let dump = try XCTUnwrap(client.dump())
        obsd.signal(SIGTERM)
        XCTAssertEqual(obsd.waitForExit(), 0)
        return (try Data(contentsOf: URL(fileURLWithPath: sandbox.state + "/obsd.db")), dump)
    }

    private enum Outcome { case refused, intact, wrong }

    /// Starts obsd on `bytes` as its database: refused (naming the file), or serving `expected`
    /// exactly, or something else.
    private func outcome(of bytes: Data, expected: NSDictionary, trial: String) throws -> Outcome {
        let sandbox = try Sandbox()
        try FileManager.default.createDirectory(atPath: sandbox.state, withIntermediateDirectories: true)
        let database = sandbox.state + "/obsd.db"
        try bytes.write(to: URL(fileURLWithPath: database))
        let obsd = try ObsdProcess.started(sandbox)
        defer { obsd.kill9() }
        guard obsd.process.isRunning else {
            XCTAssertEqual(obsd.waitForExit(), 1, "\(trial): \(obsd.log)")
            XCTAssertTrue(obsd.log.contains(database), "\(trial): the refusal names the file: \(obsd.log)")
            XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: database)), bytes, "\(trial): a refused file is left as it was")
            return .refused
        }
        let served = try Client(sandbox.socket).dump()
        if served == expected { return .intact }
        XCTFail("\(trial): obsd served a state that differs from the one written")
        return .wrong
    }

    /// One flipped bit anywhere in the file: refused or intact, never a wrong value.
    func test_flippedBytesInTheDatabase_areRefusedOrHarmless_neverServed() throws {
        let seed = Hostile.seed()
        var random = SplitMix64(seed: seed)
        let reference = try referenceDatabase(try Sandbox())
        var counts: [Outcome: Int] = [:]
        let trials = Hostile.pick(quick: 40, long: 2000)
        for trial in 0..<trials {
            var bytes = reference.bytes
            let offset = Int.random(in: 0..<bytes.count, using: &random)
            bytes[offset] ^= UInt8(1) << UInt8.random(in: 0..<8, using: &random)
            counts[try outcome(of: bytes, expected: reference.dump, trial: "trial \(trial), bit flipped at byte \(offset)"), default: 0] += 1
        }
        XCTAssertEqual(counts[.wrong, default: 0], 0)
        Hostile.report("flipped bit in obsd.db", seed: seed,
                       "\(trials) trials (\(reference.bytes.count)-byte file): \(counts[.refused, default: 0]) refused, \(counts[.intact, default: 0]) served intact, \(counts[.wrong, default: 0]) served wrong")
    }

    func test_truncatedDatabases_areRefusedOrHarmless_neverServed() throws {
        let seed = Hostile.seed()
        var random = SplitMix64(seed: seed)
        let reference = try referenceDatabase(try Sandbox())
        var counts: [Outcome: Int] = [:]
        let trials = Hostile.pick(quick: 12, long: 300)
        for trial in 0..<trials {
            // Page boundaries, a page and a byte short of them, and anywhere.
            let pages = reference.bytes.count / 4096
            let cut = [Int.random(in: 0..<pages, using: &random) * 4096, Int.random(in: 0..<reference.bytes.count, using: &random),
                       max(0, Int.random(in: 0...pages, using: &random) * 4096 - 1)][trial % 3]
            counts[try outcome(of: reference.bytes.prefix(cut), expected: reference.dump, trial: "trial \(trial), cut at \(cut)"), default: 0] += 1
        }
        XCTAssertEqual(counts[.wrong, default: 0], 0)
        Hostile.report("truncated obsd.db", seed: seed,
                       "\(trials) trials: \(counts[.refused, default: 0]) refused, \(counts[.intact, default: 0]) served intact, \(counts[.wrong, default: 0]) served wrong")
    }

    // MARK: - The WAL

    /// A database killed with everything since its creation in the WAL: `count` transactions, the
    /// Nth setting `k.N` to N (so revision N is exactly keys k.1 to k.N), each one SQLite
    /// transaction written by ObsCore's `SQLiteStorage` (as obsd's checkpoint writes its folds,
    /// and an older obsd wrote every batch), the files copied while it is open: what a kill -9
    /// leaves. (obsd itself copies the WAL into the database after every fold and empties it, so
    /// a running obsd leaves no WAL worth damaging; CommitLogFilesTests checks that.)
    private func crashedDatabase(_ sandbox: Sandbox, count: Int) throws -> (database: Data, wal: Data) {
        try FileManager.default.createDirectory(atPath: sandbox.state, withIntermediateDirectories: true)
        let storage = try SQLiteStorage(path: sandbox.state + "/obsd.db")
        defer { storage.close() }
        for index in 1...count {
            var transaction = StoredTransaction(rev: UInt64(index))
            transaction.putKeys = [StoredKey(key: "k.\(index)", value: .int(Int64(index)), rev: UInt64(index),
                                             createdRev: UInt64(index), version: 1)]
            try storage.commit(transaction)
        }
        let wal = try Data(contentsOf: URL(fileURLWithPath: sandbox.state + "/obsd.db-wal"))
        XCTAssertGreaterThan(wal.count, 32 * 1024, "the transactions are in the WAL")
        return (try Data(contentsOf: URL(fileURLWithPath: sandbox.state + "/obsd.db")), wal)
    }

    /// Starts obsd on `database` and `wal` (nil: no WAL file): nil if refused (naming the file),
    /// otherwise the revision it serves, checked to be a whole prefix of the transactions.
    private func servedRevision(_ database: Data, _ wal: Data?, of count: Int, trial: String) throws -> Int? {
        let sandbox = try Sandbox()
        try FileManager.default.createDirectory(atPath: sandbox.state, withIntermediateDirectories: true)
        try database.write(to: URL(fileURLWithPath: sandbox.state + "/obsd.db"))
        try wal?.write(to: URL(fileURLWithPath: sandbox.state + "/obsd.db-wal"))
        let obsd = try ObsdProcess.started(sandbox)
        defer { obsd.kill9() }
        guard obsd.process.isRunning else {
            XCTAssertTrue(obsd.log.contains(sandbox.state + "/obsd.db"), "\(trial): \(obsd.log)")
            return nil
        }
        let client = try Client(sandbox.socket)
        let rev = client.request(#"{"op":"ping"}"#)?["rev"] as? Int ?? -1
        let keys = (client.request(#"{"op":"list"}"#)?["keys"] as? [[String: Any]] ?? []).compactMap { $0["key"] as? String }
        XCTAssertEqual(Set(keys), Set((0..<max(0, rev)).map { "k.\($0 + 1)" }), "\(trial): revision \(rev) must hold exactly k.1 to k.\(rev)")
        for key in keys {
            XCTAssertEqual(client.request(#"{"op":"get","key":"\#(key)"}"#)?["value"] as? Int, Int(key.dropFirst(2)), "\(trial): \(key)")
        }
        return rev
    }

    /// Flipped and cut WALs: SQLite's frame checksums end the WAL at the first damaged frame, so
    /// obsd serves the transactions before it, whole; never a mix, never a wrong value.
    func test_damagedWALs_serveAWholeEarlierState_orAreRefused() throws {
        let seed = Hostile.seed()
        var random = SplitMix64(seed: seed)
        let count = 60
        let crashed = try crashedDatabase(try Sandbox(), count: count)
        let trials = Hostile.pick(quick: 20, long: 600)
        var refused = 0
        var whole = 0
        var earlier = 0
        for trial in 0..<trials {
            var wal = crashed.wal
            let description: String
            if trial % 2 == 0 {
                let offset = Int.random(in: 0..<wal.count, using: &random)
                wal[offset] ^= UInt8(1) << UInt8.random(in: 0..<8, using: &random)
                description = "trial \(trial), bit flipped at WAL byte \(offset)"
            } else {
                let cut = Int.random(in: 0..<wal.count, using: &random)
                wal = wal.prefix(cut)
                description = "trial \(trial), WAL cut at \(cut)"
            }
            switch try servedRevision(crashed.database, wal, of: count, trial: description) {
            case nil: refused += 1
            case count?: whole += 1
            default: earlier += 1
            }
        }
        let missing = try servedRevision(crashed.database, nil, of: count, trial: "WAL deleted after kill -9")
        Hostile.report("damaged obsd.db-wal", seed: seed,
                       "\(trials) trials: \(refused) refused, \(whole) served every transaction, \(earlier) served a whole earlier revision, 0 served a mix; WAL deleted after kill -9: revision \(missing.map(String.init) ?? "refused") of \(count)")
    }

    func test_aMissingDatabaseWithItsWAL_isRefused() throws {
        let crashed = try crashedDatabase(try Sandbox(), count: 5)
        let sandbox = try Sandbox()
        try FileManager.default.createDirectory(atPath: sandbox.state, withIntermediateDirectories: true)
        try crashed.wal.write(to: URL(fileURLWithPath: sandbox.state + "/obsd.db-wal"))
        let obsd = try ObsdProcess.started(sandbox)
        XCTAssertEqual(obsd.waitForExit(), 1, obsd.log)
        XCTAssertTrue(obsd.log.contains("\(sandbox.state)/obsd.db is missing but its WAL"), obsd.log)
        XCTAssertFalse(FileManager.default.fileExists(atPath: sandbox.state + "/obsd.db"))
        Hostile.report("obsd.db deleted, its WAL left", "refused at start, nothing created")
    }

    /// The WAL (or the database) deleted while obsd runs: noticed, logged as an error, writes
    /// refused from then on; after kill -9 and a restart, every acknowledged write is there.
    func test_filesDeletedUnderARunningDaemon_stopWrites_andLoseNothingAcknowledged() throws {
        var figures: [String] = []
        for file in ["obsd.db-wal", "obsd.db"] {
            let sandbox = try Sandbox()
            let obsd = try ObsdProcess.started(sandbox)
            let client = try Client(sandbox.socket, timeout: 3)
            var acknowledged: [Int] = []
            var refused = 0
            var unanswered = 0
            // The checkpoint thread notices within a second (writes acknowledged meanwhile are in
            // the commit log's file, which the restart replays), so the writes go on until refused.
            let deadline = Date().addingTimeInterval(60)
            for index in 0..<1_000_000 where refused == 0 && Date() < deadline {
                if index == 100 { XCTAssertEqual(unlink(sandbox.state + "/" + file), 0) }
                guard let answer = client.request(#"{"op":"set","key":"k.\#(index)","value":\#(index)}"#) else {
                    // Held: written to a file that is gone, so never acknowledged. The connection
                    // is done; go on with a new one.
                    unanswered += 1
                    break
                }
                if answer["ok"] as? Bool == true {
                    acknowledged.append(index)
                } else {
                    XCTAssertTrue((answer["error"] as? [String: Any])?["message"].map { "\($0)" }?.contains("writes are refused") == true, "\(answer)")
                    refused += 1
                }
            }
            let other = try Client(sandbox.socket, timeout: 3)
            XCTAssertNotEqual(other.request(#"{"op":"set","key":"other","value":1}"#)?["ok"] as? Bool, true, "writes are refused")
            XCTAssertEqual(other.request(#"{"op":"get","key":"k.0"}"#)?["value"] as? Int, 0, "reads go on")
            XCTAssertTrue(waitFor("the error in the log") { obsd.log.contains("\(sandbox.state)/\(file) was deleted while obsd was running") }, obsd.log)
            obsd.kill9()
            if file == "obsd.db" { continue }
            let restarted = try ObsdProcess.started(sandbox)
            let reader = try Client(sandbox.socket)
            let lost = acknowledged.filter { reader.request(#"{"op":"get","key":"k.\#($0)"}"#)?["value"] as? Int != $0 }
            XCTAssertEqual(lost, [], "acknowledged writes lost")
            restarted.kill9()
            figures.append("\(file) deleted after 100 writes: \(acknowledged.count) acknowledged, \(refused) refused, \(unanswered) held unanswered, \(lost.count) lost after kill -9")
        }
        figures.append("obsd.db deleted: writes refused, logged")
        Hostile.report("files deleted under a running obsd", figures.joined(separator: "; "))
    }
}
