// Everything under the prefix, read as of one revision a page at a time: at start, after etcd
// compacted what a host had not applied, and for `obsd --check`. One answer of the whole prefix
// would pass the client's bound on an answer (EtcdConfiguration.maxResponseBytes, 64 MiB) once
// the state grows past it, and no host could start on it any more. The first page is read at
// etcd's newest revision and every later one at that same revision, from the key after the last
// one read, so the pages add up to one consistent state. etcd bounds a page by its number of keys
// only: a page whose answer is too large is asked again with an eighth of the keys. A revision
// compacted between two pages starts the read again from the newest.
import EtcdClient

struct PrefixRead {
    /// Keys asked for in a page at first.
    static let firstPageKeys: Int64 = 1000
    /// Reads started again after a compaction between pages, before giving up.
    static let maxRestarts = 3

    let prefix: [UInt8]
    /// What the pages read so far hold: their header is the first page's.
    private(set) var read: RangeResponse?
    private(set) var pageKeys = firstPageKeys
    private var restarts = 0
    /// Set once the last page is in.
    private(set) var done = false

    init(prefix: [UInt8]) {
        self.prefix = prefix
    }

    /// The request for the next page.
    var nextPage: RangeRequest {
        var request = RangeRequest.prefix(prefix, revision: read?.header.revision ?? 0)
        if let last = read?.kvs.last { request.key = last.key + [0] }
        request.limit = pageKeys
        return request
    }

    /// Takes a page's answer.
    mutating func take(_ page: RangeResponse) {
        if read == nil {
            read = page
        } else {
            read?.kvs.append(contentsOf: page.kvs)
        }
        done = !page.more
    }

    /// What to do after the page failed with `error`: whether to ask again (with fewer keys, or
    /// from the start after a compaction); false when the failure is the read's.
    mutating func retry(after error: EtcdError) -> Bool {
        switch error {
        case .responseTooLarge where pageKeys > 1:
            pageKeys = max(1, pageKeys / 8)
            return true
        case .compacted where read != nil && restarts < Self.maxRestarts:
            restarts += 1
            read = nil
            return true
        default:
            return false
        }
    }

    /// Reads it all, waiting for each answer: at start and for `--check`, before the loop runs.
    static func wait(_ client: EtcdClient, prefix: [UInt8]) throws(EtcdError) -> RangeResponse {
        var reading = PrefixRead(prefix: prefix)
        while !reading.done {
            do throws(EtcdError) {
                guard case .range(let page) = try client.waitForAnswer(client.submit(.range(reading.nextPage))) else {
                    throw EtcdError.malformedResponse("a range answered with another kind")
                }
                reading.take(page)
            } catch {
                guard reading.retry(after: error) else { throw error }
            }
        }
        // `done` is set by a page taken, so there is one.
        return reading.read!
    }
}
