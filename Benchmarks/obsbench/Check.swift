import Synchronization

/// Failed checks of the whole program, kept so that a section can mark a case FAILED and go on,
/// and so that main can exit non-zero once every section has printed its table.
private let failedChecks = Mutex<[String]>([])

/// Failures past this many are counted but not printed, so a check inside a hot loop cannot flood
/// the output.
private let printedFailureLimit = 20

/// An assertion that stays on in release builds: benchmarks run optimized, where `assert` is gone.
@inline(__always)
func check(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition {
        recordFailure(message())
    }
}

@inline(never)
private func recordFailure(_ message: String) {
    let count = failedChecks.withLock { failures in
        failures.append(message)
        return failures.count
    }
    if count <= printedFailureLimit {
        print("CHECK FAILED: \(message)")
    }
}

/// How many checks have failed so far.
func failedCheckCount() -> Int {
    failedChecks.withLock { $0.count }
}
