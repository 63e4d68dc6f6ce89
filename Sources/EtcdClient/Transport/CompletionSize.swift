// What a completion holds, estimated: `maxBytesPerTake` bounds the completions one
// `takeCompletions` returns.

extension EtcdCompletion {
    /// About the memory the completion holds: the bytes of its keys and values.
    var estimatedBytes: Int {
        switch self {
        case .response(_, .success(let response)): 64 + response.estimatedBytes
        case .response(_, .failure): 64
        case .watch(_, .events(_, let events)):
            events.reduce(64) { $0 + 64 + $1.kv.estimatedBytes + ($1.prevKV?.estimatedBytes ?? 0) }
        case .watch: 64
        }
    }
}

extension KeyValue {
    var estimatedBytes: Int { 48 + key.count + value.count }
}

extension EtcdResponse {
    var estimatedBytes: Int {
        func sum(_ kvs: [KeyValue]) -> Int { kvs.reduce(0) { $0 + $1.estimatedBytes } }
        switch self {
        case .range(let range): return sum(range.kvs)
        case .put(let put): return put.prevKV?.estimatedBytes ?? 0
        case .deleteRange(let delete): return sum(delete.prevKVs)
        case .txn(let txn):
            return txn.responses.reduce(0) { total, op in
                switch op {
                case .range(let range): total + sum(range.kvs)
                case .put(let put): total + (put.prevKV?.estimatedBytes ?? 0)
                case .deleteRange(let delete): total + sum(delete.prevKVs)
                }
            }
        case .compact, .leaseGrant, .leaseKeepAlive, .leaseRevoke, .status: return 0
        }
    }
}
