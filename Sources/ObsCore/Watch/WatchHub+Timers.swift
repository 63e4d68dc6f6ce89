/// The watch timers: the end of throttle intervals and debounce waits, `latest` retries and
/// `progress`.
extension WatchHub {
    /// Monotonic seconds of the next due timer, if any.
    var nextDeadline: Double? { timers.first?.deadline }

    /// Runs every timer due now.
    func tick() {
        let now = clock.monotonic
        while let first = timers.first, first.deadline <= now {
            _ = timers.pop()
            let watch = first.element
            guard Self.isLive(first.deadline, watch) else { continue }
            watch.scheduledAt = nil
            fire(watch, now: now)
        }
    }

    func schedule(_ watch: Watch, at requested: Double) {
        // Never at or before the tick running now: a timer that reschedules itself must wait.
        let deadline = max(requested, clock.monotonic + 0.000_001)
        if let scheduled = watch.scheduledAt, scheduled <= deadline { return }
        watch.scheduledAt = deadline
        timers.push(deadline, watch, isLive: Self.isLive)
    }

    /// Whether a timer entry is still its watch's next deadline (not rescheduled, not removed).
    static func isLive(_ deadline: Double, _ watch: Watch) -> Bool {
        watch.active && watch.scheduledAt == deadline
    }

    func scheduleProgress(_ watch: Watch) {
        if let progress = watch.progress { schedule(watch, at: watch.lastSent + progress) }
    }

    private func fire(_ watch: Watch, now: Double) {
        if watch.throttle != nil || watch.debounce != nil {
            var due: [KeyEvent] = []
            var next: Double?
            for (key, deadline) in watch.windows {
                if deadline <= now {
                    if let event = watch.pending.removeValue(forKey: key) {
                        due.append(event)
                        if let throttle = watch.throttle {
                            watch.windows[key] = now + throttle
                            next = min(next ?? .infinity, now + throttle)
                            continue
                        }
                    }
                    watch.windows[key] = nil
                } else {
                    next = min(next ?? .infinity, deadline)
                }
            }
            sendHeld(due, to: watch)
            if let next { schedule(watch, at: next) }
        } else if watch.mode == .latest {
            flushLatest(watch)
        }
        if let progress = watch.progress {
            if watch.lastSent + progress <= now, watch.overflowFrom == nil {
                let line = EncodedLine(head: LineEncoding.head(.progress, watch: watch.id), body: LineEncoding.body([("rev", .int(Int64(rev)))]))
                sendEvent(line, of: watch, rev: rev)
            }
            scheduleProgress(watch)
        }
    }
}
