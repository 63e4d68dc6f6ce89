/// The order in which a watch gets the events of one transaction: by key.
extension WatchHub {
    /// Sorts the offsets of records in `base` by their keys (which differ: a transaction has one
    /// event per key). Compared first by the keys' first 8 bytes as one number, so that a wide
    /// transaction (a thousand computeds of one source) sorts mostly by integer comparisons, and by
    /// the whole key where those are equal; offsets already in order are left as they are.
    func sortByKey(_ offsets: inout [Int], _ base: UnsafeRawPointer) {
        var sorted = true
        for index in 1..<offsets.count
        where !EventRecord(base: base + offsets[index - 1]).keyPrecedes(EventRecord(base: base + offsets[index])) {
            sorted = false
            break
        }
        guard !sorted else { return }
        var keyed = sortKeys
        sortKeys = []
        keyed.removeAll(keepingCapacity: true)
        for offset in offsets { keyed.append((EventRecord(base: base + offset).keyPrefix, offset)) }
        // Merged bottom-up through kept scratch memory: the standard library's sort allocates its
        // scratch space on every call.
        var spare = sortSpare
        sortSpare = []
        spare.removeAll(keepingCapacity: true)
        spare.append(contentsOf: keyed)
        keyed.withUnsafeMutableBufferPointer { keyed in
            spare.withUnsafeMutableBufferPointer { spare in
                func precedes(_ a: (prefix: UInt64, offset: Int), _ b: (prefix: UInt64, offset: Int)) -> Bool {
                    a.prefix != b.prefix ? a.prefix < b.prefix
                        : EventRecord(base: base + a.offset).keyPrecedes(EventRecord(base: base + b.offset))
                }
                let count = keyed.count
                // Runs of 16 sorted by insertion, then merged in pairs, widths doubling.
                let run = 16
                for low in stride(from: 0, to: count, by: run) {
                    for index in low + 1..<min(low + run, count) {
                        let item = keyed[index]
                        var hole = index
                        while hole > low, precedes(item, keyed[hole - 1]) {
                            keyed[hole] = keyed[hole - 1]
                            hole -= 1
                        }
                        keyed[hole] = item
                    }
                }
                var from = keyed, to = spare
                var width = run
                while width < count {
                    var low = 0
                    while low < count {
                        let middle = min(low + width, count), high = min(low + 2 * width, count)
                        var left = low, right = middle, out = low
                        while left < middle && right < high {
                            if precedes(from[right], from[left]) {
                                to[out] = from[right]
                                right += 1
                            } else {
                                to[out] = from[left]
                                left += 1
                            }
                            out += 1
                        }
                        while left < middle { to[out] = from[left]; left += 1; out += 1 }
                        while right < high { to[out] = from[right]; right += 1; out += 1 }
                        low = high
                    }
                    swap(&from, &to)
                    width *= 2
                }
                if from.baseAddress != keyed.baseAddress { keyed.baseAddress!.update(from: from.baseAddress!, count: count) }
            }
        }
        spare.removeAll(keepingCapacity: spare.capacity <= 1 << 16)
        sortSpare = spare
        for index in keyed.indices { offsets[index] = keyed[index].offset }
        keyed.removeAll(keepingCapacity: keyed.capacity <= 1 << 16)
        sortKeys = keyed
    }
}
