extension Builtin {
    static let time: [Builtin] = [
        Builtin(name: "now", arity: 0...0, effect: .readsClock, implementation: .nullary { call throws(ObsError) in
            try call.finite(call.context.now)
        }),
        unary("ago", .readsClock) { v, call throws(ObsError) in
            .string(relativeTime(call.context.now - (try call.number(v, "timestamp"))))
        },
        binary("time_format", .rendersTime) { ts, fmt, call throws(ObsError) in
            .string(try TimeFormat.render(try call.number(ts, "timestamp"), try call.string(fmt, "format"), call))
        },
    ]

    /// "just now" within a minute either way, else the largest whole unit: "5 minutes ago",
    /// "in 2 hours", "1 day ago"; months are 30 days and years 365.
    static func relativeTime(_ seconds: Double) -> String {
        let magnitude = Swift.abs(seconds)
        guard magnitude >= 60 else { return "just now" }
        let units: [(name: String, seconds: Double)] = [
            ("year", 365 * 86_400), ("month", 30 * 86_400), ("day", 86_400), ("hour", 3_600), ("minute", 60),
        ]
        let unit = units.first { magnitude >= $0.seconds }!
        let count = Int64(Swift.min((magnitude / unit.seconds).rounded(.down), 1e15))
        let phrase = "\(count) \(unit.name)\(count == 1 ? "" : "s")"
        return seconds > 0 ? phrase + " ago" : "in " + phrase
    }
}
