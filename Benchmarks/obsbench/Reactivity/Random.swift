/// The suite's seeded generator (`pseudoRandom` in its src/util): sfc32 seeded with four draws of
/// the xmur3a string hash of "seed". Ported bit for bit, because the dynamic graphs' shapes, and so
/// the suite's expected sums and recompute counts, depend on every draw.
struct PseudoRandom {
    private var a: UInt32
    private var b: UInt32
    private var c: UInt32
    private var d: UInt32

    init(seed: String = "seed") {
        var hash = XMur3a(seed)
        a = hash.next()
        b = hash.next()
        c = hash.next()
        d = hash.next()
    }

    /// A Double in [0, 1), as JavaScript's `(t >>> 0) / 4294967296`.
    mutating func next() -> Double {
        var t = a &+ b
        a = b ^ (b >> 9)
        b = c &+ (c << 3)
        c = (c << 21) | (c >> 11)
        d = d &+ 1
        t = t &+ d
        c = c &+ t
        return Double(t) / 4_294_967_296
    }
}

/// MurmurHash3's mixing as the suite uses it: a string hashed once, then a stream of 32-bit draws.
private struct XMur3a {
    private var h: UInt32

    init(_ string: String) {
        // JavaScript strings are UTF-16: charCodeAt reads code units.
        let units = Array(string.utf16)
        var h: UInt32 = 2_166_136_261
        for unit in units {
            var k = UInt32(unit) &* 3_432_918_353
            k = (k << 15) | (k >> 17)
            h ^= k &* 461_845_907
            h = (h << 13) | (h >> 19)
            h = (h &* 5) &+ 3_864_292_196
        }
        h ^= UInt32(units.count)
        self.h = h
    }

    mutating func next() -> UInt32 {
        h ^= h >> 16
        h = h &* 2_246_822_507
        h ^= h >> 13
        h = h &* 3_266_489_909
        h ^= h >> 16
        return h
    }
}
