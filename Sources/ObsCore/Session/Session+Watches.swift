/// `watch` and `unwatch`.
extension Session {
    func watch(_ request: Request) throws(ObsError) -> Reply {
        let keys = request.array("keys")!
        guard !keys.isEmpty else { throw ObsError(.badRequest, "field 'keys' must not be empty") }
        var parsed: [KeyPattern] = []
        for key in keys {
            guard case .string(let text) = key else { throw ObsError(.badRequest, "field 'keys' must hold strings") }
            parsed.append(try KeyPattern(text))
        }
        let mode: Watch.Mode
        switch request.string("mode") ?? "all" {
        case "all": mode = .all
        case "latest": mode = .latest
        default: throw ObsError(.badRequest, "field 'mode' must be \"all\" or \"latest\"")
        }
        for field in ["throttle_ms", "debounce_ms", "progress_ms"] where request.uint(field) == 0 {
            throw ObsError(.badRequest, "field '\(field)' must be at least 1")
        }
        let throttle = request.uint("throttle_ms").map { Double($0) / 1000 }
        let debounce = request.uint("debounce_ms").map { Double($0) / 1000 }
        if throttle != nil && debounce != nil {
            throw ObsError(.badRequest, "field 'throttle_ms' cannot be combined with 'debounce_ms'")
        }
        if watches.count >= store.configuration.maxWatchesPerConnection {
            throw ObsError(.limit, "this connection already has \(watches.count) watches (the limit)")
        }
        var seen = Set<String>()
        let entries = parsed.filter { seen.insert($0.text).inserted }.map { store.patterns.entry(for: $0) }
        let watch = Watch(id: nextWatchID, session: self, entries: entries, mode: mode, throttle: throttle, debounce: debounce,
                          progress: request.uint("progress_ms").map { Double($0) / 1000 }, channels: request.bool("channels") ?? true,
                          now: store.clock.monotonic)
        nextWatchID += 1
        watches[watch.id] = watch
        for entry in entries { entry.watches.append(watch) }
        store.stats.watches += 1
        engine.enter()
        if let since = request.uint("since") {
            store.sendReplay(watch, since: since)
        } else if request.bool("initial") ?? true {
            store.sendSnapshot(watch)
        } else {
            sendControl(watch, "synced", [("rev", .int(Int64(store.rev)))])
        }
        engine.exit()
        store.scheduleProgress(watch)
        return Reply(fields: [("watch", .int(Int64(watch.id)))])
    }

    func unwatch(_ request: Request) throws(ObsError) -> Reply {
        let id = Int(request.uint("watch")!)
        guard let watch = watches.removeValue(forKey: id) else { throw ObsError(.notFound, "no watch \(id) on this connection") }
        removeWatch(watch)
        return Reply(fields: [])
    }
}
