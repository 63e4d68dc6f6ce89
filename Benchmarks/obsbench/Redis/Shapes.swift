// What each row sends to each server. The values are the same bytes for both: 64-byte strings for
// plain keys, numbers where obsd computes. Redis has no computed keys, so the propagation rows give
// it the closest equivalent that delivers the same information to the same watchers: the writer
// computes the derived values itself and sends SET of the source plus one PUBLISH per derived
// value, pipelined. That is the cheapest Redis path (it keeps no derived values), so obsd is
// compared against a lower bound.
import Foundation

/// Keys the throughput rows spread their requests over.
let throughputKeys = 10_000

func throughputKey(_ n: Int) -> String { "k.\(n % throughputKeys)" }

func setRequest(_ wire: Wire, _ n: Int) -> [UInt8] {
    wire.set(throughputKey(n), .payload(n))
}

func getRequest(_ wire: Wire, _ n: Int) -> [UInt8] {
    wire.get(throughputKey(n))
}

/// One key watched (obsd) or one channel subscribed (Redis) by `watchers` connections.
func keyFanout(_ wire: Wire, watchers: Int) -> FanoutShape {
    switch wire {
    case .obsd:
        return FanoutShape(watchers: watchers, eventsPerUpdate: 1, setup: [wire.set("hot", .payload(-1))],
                           watch: (Array(#"{"op":"watch","keys":["hot"],"initial":false}"#.utf8) + [0x0A], 1),
                           update: { (wire.set("hot", .payload($0)), 1) })
    case .redis:
        return FanoutShape(watchers: watchers, eventsPerUpdate: 1, setup: [],
                           watch: (RESP.command("SUBSCRIBE", "hot"), 1),
                           update: { (RESP.command("PUBLISH", "hot", WireValue.payload($0).text), 1) })
    }
}

/// The propagation rows: a set of `src` reaches watchers through computeds.
enum Propagation: String, CaseIterable {
    /// `c = $src + 1`, watched by 100 connections.
    case computed
    /// `c1 = $src + 1`, `c2 = $c1 + 1`, ... `c50`; one connection watches `c50`.
    case chain
    /// `f.1 = $src + 1` ... `f.1000 = $src + 1000`; one connection watches `f.*`.
    case fan

    var watchers: Int { self == .computed ? 100 : 1 }

    /// The derived keys and how far each is from `src`'s value.
    var derived: [(key: String, offset: Int)] {
        switch self {
        case .computed: [("c", 1)]
        case .chain: [("c50", 50)]
        case .fan: (1...1000).map { ("f.\($0)", $0) }
        }
    }

    var watched: String {
        switch self {
        case .computed: "c"
        case .chain: "c50"
        case .fan: "f.*"
        }
    }

    private var definitions: [(key: String, expr: String)] {
        switch self {
        case .computed: [("c", "$src + 1")]
        case .chain: (1...50).map { ("c\($0)", $0 == 1 ? "$src + 1" : "$c\($0 - 1) + 1") }
        case .fan: (1...1000).map { ("f.\($0)", "$src + \($0)") }
        }
    }

    func shape(_ wire: Wire) -> FanoutShape {
        let derived = derived
        switch wire {
        case .obsd:
            let setup = [wire.set("src", .number(0))] + definitions.map {
                Array(#"{"op":"define","key":"\#($0.key)","expr":"\#($0.expr)"}"#.utf8) + [0x0A]
            }
            return FanoutShape(watchers: watchers, eventsPerUpdate: derived.count, setup: setup,
                               watch: (Array(#"{"op":"watch","keys":["\#(watched)"],"initial":false}"#.utf8) + [0x0A], 1),
                               update: { (wire.set("src", .number($0 + 1)), 1) })
        case .redis:
            let subscribe = self == .fan ? RESP.command("PSUBSCRIBE", watched) : RESP.command("SUBSCRIBE", watched)
            return FanoutShape(watchers: watchers, eventsPerUpdate: derived.count, setup: [],
                               watch: (subscribe, 1),
                               update: { n in
                                   let value = n + 1
                                   var command = RESP.command("SET", "src", String(value))
                                   for (key, offset) in derived { command += RESP.command("PUBLISH", key, String(value + offset)) }
                                   return (command, 1 + derived.count)
                               })
        }
    }
}
