/// `watch` and `unwatch`: the request's fields checked here, the watch itself kept and fed by the
/// store's watch unit.
extension Session {
    func watch(_ request: Request) throws(ObsError) -> Reply {
        let keys = request.array("keys")!
        guard !keys.isEmpty else { throw ObsError(.badRequest, "field 'keys' must not be empty") }
        var patterns: [KeyPattern] = []
        for key in keys {
            guard case .string(let text) = key else { throw ObsError(.badRequest, "field 'keys' must hold strings") }
            patterns.append(try KeyPattern(text))
        }
        var options = Watch.Options(patterns: patterns)
        switch request.string("mode") ?? "all" {
        case "all": options.mode = .all
        case "latest": options.mode = .latest
        default: throw ObsError(.badRequest, "field 'mode' must be \"all\" or \"latest\"")
        }
        for field in ["throttle_ms", "debounce_ms", "progress_ms"] where request.uint(field) == 0 {
            throw ObsError(.badRequest, "field '\(field)' must be at least 1")
        }
        options.throttle = request.uint("throttle_ms").map { Double($0) / 1000 }
        options.debounce = request.uint("debounce_ms").map { Double($0) / 1000 }
        if options.throttle != nil && options.debounce != nil {
            throw ObsError(.badRequest, "field 'throttle_ms' cannot be combined with 'debounce_ms'")
        }
        options.progress = request.uint("progress_ms").map { Double($0) / 1000 }
        options.channels = request.bool("channels") ?? true
        if let since = request.uint("since") {
            options.start = .since(since)
            // The run the client saw `since` in (RunLineage): one this daemon never gave out is no
            // error, only a run it cannot resume from.
            if let run = request.string("run") { options.run = .named(RunLineage.parse(run)) }
        } else if !(request.bool("initial") ?? true) {
            options.start = .nothing
        }
        let id = try store.watches.watch(watchClient, options)
        return Reply(fields: [("watch", .int(Int64(id)))])
    }

    func unwatch(_ request: Request) throws(ObsError) -> Reply {
        try store.watches.unwatch(watchClient, Int(request.uint("watch")!))
        return Reply(fields: [])
    }
}
