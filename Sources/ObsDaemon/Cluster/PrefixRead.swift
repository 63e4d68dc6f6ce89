// Everything under the prefix, read as of one revision a page at a time: at start, after etcd
// compacted what a host had not applied, and for `obsd --check`. At start the revision is an
// older one, so that the host applies etcd's history since then (EtcdLog.start). One answer of the whole prefix
// would pass the client's bound on an answer (EtcdConfiguration.maxResponseBytes, 64 MiB) once
// the state grows past it, and no host could start on it any more. The first page is read at
// etcd's newest revision and every later one at that same revision, from the key after the last
// one read, so the pages add up to one consistent state (a read at a given revision reads every
// page at it). etcd bounds a page by its number of keys only: a page whose answer is too large is
// asked again with an eighth of the keys. A revision compacted between two pages starts a read of
// the newest again from the newest; a read at a given revision fails with `compacted`.
import EtcdClient

struct PrefixRead {
    /// Keys asked for in a page at first.
    static let firstPageKeys: Int64 = 1000
    /// Reads started again after a compaction between pages, before giving up.
    static let maxRestarts = 3

    let prefix: [UInt8]
    /// Keys and their revisions only, without values.
    let keysOnly: Bool
    /// The revision read: the one asked for, or etcd's newest when the first page came.
    private(set) var revision: Int64
    /// A revision was asked for (not the newest).
    private let given: Bool
    /// What the pages read so far hold: their header is the first page's (etcd's newest revision
    /// then, whatever revision was read).
    private(set) var read: RangeResponse?
    private(set) var pageKeys = firstPageKeys
    private var restarts = 0
    /// Set once the last page is in.
    private(set) var done = false

    /// A read of the newest state, or of the state as of `revision`.
    init(prefix: [UInt8], revision: Int64 = 0, keysOnly: Bool = false) {
        self.prefix = prefix
        self.revision = revision
        self.keysOnly = keysOnly
        given = revision != 0
    }

    /// The request for the next page.
    var nextPage: RangeRequest {
        var request = RangeRequest.prefix(prefix, revision: revision)
        if let last = read?.kvs.last { request.key = last.key + [0] }
        request.limit = pageKeys
        request.keysOnly = keysOnly
        return request
    }

    /// Takes a page's answer. A page that says more keys follow but holds none would have the read
    /// ask for the same page for ever: etcd never answers so, and it is taken as malformed.
    mutating func take(_ page: RangeResponse) throws(EtcdError) {
        if page.more && page.kvs.isEmpty { throw .malformedResponse("a page of the prefix says more keys follow, but holds none") }
        if read == nil {
            read = page
            if !given { revision = page.header.revision }
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
        case .compacted where !given && read != nil && restarts < Self.maxRestarts:
            restarts += 1
            read = nil
            revision = 0
            return true
        default:
            return false
        }
    }

    /// Reads it all, waiting for each answer: at start and for `--check`, before the loop runs.
    /// The records, and the revision they are as of.
    static func wait(_ client: EtcdClient, prefix: [UInt8], revision: Int64 = 0,
                     keysOnly: Bool = false) throws(EtcdError) -> (range: RangeResponse, revision: Int64) {
        var reading = PrefixRead(prefix: prefix, revision: revision, keysOnly: keysOnly)
        while !reading.done {
            do throws(EtcdError) {
                guard case .range(let page) = try client.waitForAnswer(client.submit(.range(reading.nextPage))) else {
                    throw EtcdError.malformedResponse("a range answered with another kind")
                }
                try reading.take(page)
            } catch {
                guard reading.retry(after: error) else { throw error }
            }
        }
        // `done` is set by a page taken, so there is one.
        return (reading.read!, reading.revision)
    }
}
