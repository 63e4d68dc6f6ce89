// The pages of a read of everything under the prefix: each from the key after the last, at the
// first page's revision; a page too large asked again smaller; a compaction between pages starts
// the read again, a few times at most.
import EtcdClient
import XCTest
@testable import ObsDaemon

final class PrefixReadTests: XCTestCase {
    private let prefix = Array("/p/".utf8)

    private func page(_ keys: [String], revision: Int64, more: Bool) -> RangeResponse {
        RangeResponse(header: ResponseHeader(revision: revision), kvs: keys.map { KeyValue(key: Array($0.utf8)) }, more: more,
                      count: 5)
    }

    func test_pagesFollowTheLastKey_atTheFirstPagesRevision() throws {
        var reading = PrefixRead(prefix: prefix)
        XCTAssertEqual(reading.nextPage.key, prefix)
        XCTAssertEqual(reading.nextPage.rangeEnd, Array("/p0".utf8))
        XCTAssertEqual(reading.nextPage.revision, 0)
        XCTAssertEqual(reading.nextPage.limit, PrefixRead.firstPageKeys)
        try reading.take(page(["/p/a", "/p/b"], revision: 40, more: true))
        XCTAssertFalse(reading.done)
        XCTAssertEqual(reading.nextPage.key, Array("/p/b".utf8) + [0])
        XCTAssertEqual(reading.nextPage.rangeEnd, Array("/p0".utf8))
        XCTAssertEqual(reading.nextPage.revision, 40)
        try reading.take(page(["/p/c"], revision: 41, more: false))
        XCTAssertTrue(reading.done)
        XCTAssertEqual(reading.read?.kvs.map { String(decoding: $0.key, as: UTF8.self) }, ["/p/a", "/p/b", "/p/c"])
        XCTAssertEqual(reading.read?.header.revision, 40, "the state is as of the first page's revision")
        XCTAssertEqual(reading.revision, 40)
    }

    func test_aPageTooLarge_isAskedAgainWithAnEighthOfTheKeys_downToOne() {
        var reading = PrefixRead(prefix: prefix)
        var limits: [Int64] = []
        while reading.retry(after: .responseTooLarge(limit: 64 << 20)) { limits.append(reading.nextPage.limit) }
        XCTAssertEqual(limits, [125, 15, 1])
        XCTAssertFalse(reading.retry(after: .unavailable("no quorum", mayHaveBeenApplied: false)))
    }

    func test_aCompactionBetweenPages_startsAgainFromTheNewest_aFewTimesAtMost() throws {
        var reading = PrefixRead(prefix: prefix)
        XCTAssertFalse(reading.retry(after: .compacted("first page")), "the newest revision cannot be compacted")
        for _ in 0..<PrefixRead.maxRestarts {
            try reading.take(page(["/p/a"], revision: 40, more: true))
            XCTAssertTrue(reading.retry(after: .compacted("mvcc: required revision has been compacted")))
            XCTAssertNil(reading.read)
            XCTAssertEqual(reading.nextPage.revision, 0)
            XCTAssertEqual(reading.nextPage.key, prefix)
        }
        try reading.take(page(["/p/a"], revision: 40, more: true))
        XCTAssertFalse(reading.retry(after: .compacted("again")))
    }

    /// A page that says more keys follow but holds none would have the read ask for the same page
    /// for ever: it is refused as malformed, and the read is not retried for it.
    func test_aPageSayingMoreButHoldingNoKey_isMalformed() throws {
        var reading = PrefixRead(prefix: prefix)
        try reading.take(page(["/p/a"], revision: 40, more: true))
        XCTAssertThrowsError(try reading.take(page([], revision: 40, more: true))) { error in
            guard case .malformedResponse = error as? EtcdError else { return XCTFail("\(error)") }
            XCTAssertFalse(reading.retry(after: error as! EtcdError))
        }
        XCTAssertFalse(reading.done)
        try reading.take(page([], revision: 40, more: false))
        XCTAssertTrue(reading.done, "an empty last page is a page like any other")
    }

    /// At start a host reads an older state (EtcdLog.startingRead): every page at that revision,
    /// whatever etcd's newest is, and a compaction past it is the caller's to handle.
    func test_aReadAtAGivenRevision_readsEveryPageAtIt_andLeavesACompactionToItsCaller() throws {
        var reading = PrefixRead(prefix: prefix, revision: 30, keysOnly: true)
        XCTAssertEqual(reading.nextPage.revision, 30)
        XCTAssertTrue(reading.nextPage.keysOnly)
        try reading.take(page(["/p/a"], revision: 45, more: true))
        XCTAssertEqual(reading.nextPage.revision, 30)
        XCTAssertEqual(reading.revision, 30, "the header says etcd's newest revision, not the one read")
        XCTAssertFalse(reading.retry(after: .compacted("mvcc: required revision has been compacted")))
        XCTAssertFalse(PrefixRead(prefix: prefix).nextPage.keysOnly)
    }
}
