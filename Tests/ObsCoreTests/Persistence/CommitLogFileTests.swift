// The commit log's files (CommitLogFile.swift): frames read back as written; a file that ends
// inside its last frame (a crash in the middle of a write) is a torn tail, dropped only at the end
// of the newest file; any flipped bit is damage, never taken for a torn tail; and the checkpoint's
// newest-first replay leaves what replaying in order leaves.
import TestSupport
import XCTest
@testable import ObsCore

final class CommitLogFileTests: XCTestCase {
    /// A file of `groups` frames of random transactions, and each frame's records and revision.
    private func randomFile(_ random: inout SplitMix64, groups: Int) -> (file: [UInt8], groups: [([UInt8], UInt64)]) {
        var file = CommitLogFile.magic
        var written: [([UInt8], UInt64)] = []
        var rev: UInt64 = 0
        for _ in 0..<groups {
            var records = ByteBuffer()
            for _ in 0..<(1 + random.below(4)) {
                rev += 1
                CommitLog.append(random.storedTransaction(rev: rev), to: &records)
            }
            let bytes = Array(records.bytes)
            var header = bytes.withUnsafeBytes { CommitLogFile.header(rev: rev, records: $0) }
            withUnsafeBytes(of: &header) { file += $0 }
            file += bytes
            written.append((bytes, rev))
        }
        return (file, written)
    }

    private func read(_ file: [UInt8], newest: Bool) throws -> (frames: [([UInt8], UInt64)], torn: Int) {
        try file.withUnsafeBytes { bytes in
            let contents = try CommitLogFile.read(bytes, newest: newest)
            return (contents.frames.map { (Array(bytes[$0.records]), $0.rev) }, contents.torn)
        }
    }

    func test_framesReadBackAsWritten() throws {
        var random = SplitMix64(seed: 3)
        let (file, groups) = randomFile(&random, groups: 20)
        for newest in [true, false] {
            let contents = try read(file, newest: newest)
            XCTAssertEqual(contents.frames.map(\.0), groups.map(\.0))
            XCTAssertEqual(contents.frames.map(\.1), groups.map(\.1))
            XCTAssertEqual(contents.torn, 0)
        }
    }

    /// A file cut at every byte: the newest file reads as the frames before the cut and a torn
    /// tail of what is left; any other file is damaged unless the cut falls between frames.
    func test_aFileCutAnywhere_isATornTailOfTheNewestFile_andDamageOfAnOlderOne() throws {
        var random = SplitMix64(seed: 5)
        let (file, groups) = randomFile(&random, groups: 6)
        var ends = [CommitLogFile.magic.count]
        for group in groups { ends.append(ends.last! + CommitLogFile.headerSize + group.0.count) }
        for cut in 0..<file.count {
            let prefix = Array(file.prefix(cut))
            let whole = ends.filter { $0 <= cut }.count - 1
            let contents = try read(prefix, newest: true)
            XCTAssertEqual(contents.frames.count, max(0, whole), "cut at \(cut)")
            XCTAssertEqual(contents.torn, cut - (ends.last(where: { $0 <= cut }) ?? 0), "cut at \(cut)")
            if ends.contains(cut) {
                XCTAssertEqual(try read(prefix, newest: false).frames.count, whole, "cut at \(cut), between frames")
            } else {
                XCTAssertThrowsError(try read(prefix, newest: false), "cut at \(cut) of an older file")
            }
        }
    }

    /// Every single flipped bit of a file is damage, wherever it is (the last frame's length and
    /// records included): never dropped as a torn tail, never read as other frames.
    func test_everyFlippedBit_isDamage_neverATornTail() throws {
        var random = SplitMix64(seed: 7)
        let (file, _) = randomFile(&random, groups: 4)
        for offset in 0..<file.count {
            for bit in 0..<8 {
                var flipped = file
                flipped[offset] ^= UInt8(1) << UInt8(bit)
                XCTAssertThrowsError(try read(flipped, newest: true), "bit \(bit) of byte \(offset)")
            }
        }
    }

    /// The checkpoint's replay, newest record first and decoding only each name's last change,
    /// leaves what replaying every record in order leaves, over any stored state and with any
    /// revision already folded.
    func test_replayNewestFirst_leavesWhatReplayingInOrderLeaves() throws {
        var random = SplitMix64(seed: 11)
        for round in 0..<200 {
            let (_, groups) = randomFile(&random, groups: 1 + random.below(8))
            var base = CommitLog.Replay()
            var seed = ByteBuffer()
            CommitLog.append(random.storedTransaction(rev: 1), to: &seed)
            try CommitLog.replay(seed.bytes, onto: &base)
            let after = UInt64(random.below(Int(groups.last!.1) + 1))
            var inOrder = base
            for group in groups { try group.0.withUnsafeBytes { _ = try CommitLog.replay($0, onto: &inOrder, after: after) } }
            var newestFirst = base
            try withGroups(groups) { try CommitLog.replayNewestFirst($0, onto: &newestFirst, after: after) }
            XCTAssertEqual(newestFirst.state, inOrder.state, "round \(round), after \(after)")
            XCTAssertEqual(newestFirst.transaction.rev, inOrder.transaction.rev)
        }
    }

    /// A group whose transactions end at another revision than its frame's is damage.
    func test_replayNewestFirst_refusesAGroupEndingAtAnotherRevision() throws {
        var random = SplitMix64(seed: 13)
        let (_, groups) = randomFile(&random, groups: 3)
        var wrong = groups
        wrong[1].1 += 1
        var replay = CommitLog.Replay()
        XCTAssertThrowsError(try withGroups(wrong) { try CommitLog.replayNewestFirst($0, onto: &replay, after: 0) }) { error in
            XCTAssertEqual((error as? CommitLog.Damage)?.group, 1)
        }
    }

    private func withGroups(_ groups: [([UInt8], UInt64)],
                            _ body: ([(records: UnsafeRawBufferPointer, rev: UInt64)]) throws -> Void) throws {
        var pointers: [(records: UnsafeRawBufferPointer, rev: UInt64)] = []
        var copies: [UnsafeMutableRawBufferPointer] = []
        defer { for copy in copies { copy.deallocate() } }
        for group in groups {
            let copy = UnsafeMutableRawBufferPointer.allocate(byteCount: max(1, group.0.count), alignment: 8)
            copy.copyBytes(from: group.0)
            copies.append(copy)
            pointers.append((UnsafeRawBufferPointer(rebasing: copy[0..<group.0.count]), group.1))
        }
        try body(pointers)
    }
}
