// A group of commits compacted to one transaction (CommitLog+Compaction.swift): whatever the group
// holds, the compacted group replays, onto any state, to what the group replays to, through
// `replay`, `replayNewestFirst` and a real SQLite database alike; it holds one record per name.
import Foundation
import TestSupport
import XCTest
@testable import ObsCore

final class CommitLogCompactionTests: XCTestCase {
    private func compacted(_ group: borrowing ByteBuffer, rev: UInt64) throws -> [UInt8] {
        var compacted = ByteBuffer()
        try CommitLog.compact(group.bytes, rev: rev, into: &compacted)
        return Array(compacted.bytes)
    }

    private func replayed(_ records: [UInt8], onto state: StoredState, after: UInt64 = 0) throws -> StoredState {
        var replay = CommitLog.Replay(state)
        try records.withUnsafeBytes { _ = try CommitLog.replay($0, onto: &replay, after: after) }
        return replay.state
    }

    private func replayedNewestFirst(_ records: [UInt8], rev: UInt64, onto state: StoredState, after: UInt64) throws -> StoredState {
        var replay = CommitLog.Replay(state)
        try records.withUnsafeBytes { try CommitLog.replayNewestFirst([($0, rev)], onto: &replay, after: after) }
        return replay.state
    }

    /// Random states, then random groups over the same few names (puts and deletes of keys with
    /// and without expiry, definitions, bindings): the compacted group leaves what the group
    /// leaves, and what committing its transactions one by one leaves.
    func test_aCompactedGroup_replaysToTheStateTheGroupReplaysTo() throws {
        var random = SplitMix64(seed: 41)
        for trial in 0..<200 {
            let model = MemoryStorage()
            var rev: UInt64 = 0
            for _ in 0..<random.below(12) {
                rev += 1
                try model.commit(random.storedTransaction(rev: rev))
            }
            let base = try model.load()
            var group = ByteBuffer()
            for _ in 0..<(1 + random.below(40)) {
                rev += 1
                let transaction = random.storedTransaction(rev: rev)
                try model.commit(transaction)
                CommitLog.append(transaction, to: &group)
            }
            let whole = Array(group.bytes)
            let compact = try compacted(group, rev: rev)
            let expected = try model.load()
            XCTAssertEqual(try replayed(whole, onto: base), expected, "trial \(trial): the group itself")
            XCTAssertEqual(try replayed(compact, onto: base), expected, "trial \(trial): the compacted group")
            XCTAssertEqual(try replayedNewestFirst(compact, rev: rev, onto: base, after: base.rev), expected, "trial \(trial)")
            XCTAssertEqual(try replayed(compact, onto: expected, after: rev), expected, "trial \(trial): skipped whole, as the group is")
            XCTAssertLessThanOrEqual(compact.count, whole.count, "trial \(trial)")
        }
    }

    /// A thousand writes of one key by a binding, with TTL expiries among them: one transaction at
    /// the last revision holding the expiries and the key's last write, as their records were.
    func test_aCompactedGroup_isOneTransactionHoldingTheLastRecordNamingEachThing() throws {
        var group = ByteBuffer()
        var rev: UInt64 = 100
        func stamp(_ n: Int) -> StoredKey {
            StoredKey(key: "stamp", value: .string(String(repeating: "x", count: 100) + "\(n)"), rev: rev, createdRev: 3,
                      version: UInt64(n))
        }
        for n in 1...1000 {
            rev += 1
            var transaction = StoredTransaction(rev: rev)
            if n % 200 == 0 {
                transaction.deletedKeys = ["ttl.\(n)"]
                transaction.reason = "ttl"
            } else {
                transaction.putKeys = [stamp(n)]
            }
            CommitLog.append(transaction, to: &group)
        }
        rev += 1
        var last = StoredTransaction(rev: rev)
        last.putKeys = [stamp(1001)]
        CommitLog.append(last, to: &group)

        // Its transaction record, then the records of the expiries and of the last write, in that
        // order: what appending this transaction writes.
        var expected = StoredTransaction(rev: rev)
        expected.deletedKeys = (1...5).map { "ttl.\($0 * 200)" }
        expected.putKeys = last.putKeys
        var records = ByteBuffer()
        CommitLog.append(expected, to: &records)
        XCTAssertEqual(try compacted(group, rev: rev), Array(records.bytes))
    }

    /// Logged into a real database, the compacted group loads, checkpoints and opens again as the
    /// group does.
    func test_aCompactedGroup_loggedIntoSQLite_loadsAsTheGroupDoes() throws {
        let directory = NSTemporaryDirectory() + "obsd-compact-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let whole = try SQLiteStorage(path: directory + "/whole.db")
        let compact = try SQLiteStorage(path: directory + "/compact.db")
        var random = SplitMix64(seed: 43)
        var rev: UInt64 = 0
        for round in 0..<40 {
            var group = ByteBuffer()
            for _ in 0..<(1 + random.below(30)) {
                rev += 1
                CommitLog.append(random.storedTransaction(rev: rev), to: &group)
            }
            try whole.commitLog(group.bytes, rev: rev)
            try compacted(group, rev: rev).withUnsafeBytes { try compact.commitLog($0, rev: rev) }
            XCTAssertEqual(try compact.load(), try whole.load(), "round \(round)")
            if round % 9 == 4 {
                try whole.checkpoint()
                try compact.checkpoint()
                XCTAssertEqual(try compact.load(), try whole.load(), "round \(round), after a checkpoint")
            }
        }
        whole.close()
        compact.close()
        XCTAssertEqual(try SQLiteStorage(path: directory + "/compact.db").load(), try SQLiteStorage(path: directory + "/whole.db").load())
    }

    /// Records that do not read, or do not end at the revision given, are refused, not compacted.
    func test_aGroupThatDoesNotRead_isRefused() throws {
        var group = ByteBuffer()
        var transaction = StoredTransaction(rev: 7)
        transaction.putKeys = [StoredKey(key: "k", value: 1, rev: 7, createdRev: 7, version: 1)]
        CommitLog.append(transaction, to: &group)
        let bytes = Array(group.bytes)
        var compacted = ByteBuffer()
        XCTAssertThrowsError(try bytes.withUnsafeBytes { try CommitLog.compact($0, rev: 8, into: &compacted) }, "not ending at 8")
        XCTAssertThrowsError(try bytes.dropLast(3).withUnsafeBytes { try CommitLog.compact($0, rev: 7, into: &compacted) }, "cut short")
        var unknownKind = bytes
        unknownKind[13] = 99
        XCTAssertThrowsError(try unknownKind.withUnsafeBytes { try CommitLog.compact($0, rev: 7, into: &compacted) }, "an unknown kind")
        XCTAssertThrowsError(try Array(bytes[13...]).withUnsafeBytes { try CommitLog.compact($0, rev: 7, into: &compacted) },
                             "a change before its transaction")
        XCTAssertEqual(compacted.count, 0, "nothing appended")
    }
}
