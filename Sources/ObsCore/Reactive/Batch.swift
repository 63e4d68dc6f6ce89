/// Runs `body` as one transaction: every computed affected by its writes is recomputed at most once,
/// after all of them, and observers are called once, after it returns, with the final values.
///
/// Reads inside `body` see its writes. Called from inside an observer's handler, its writes are
/// applied together after the change being delivered, like every write made there.
public func batch<Result>(_ body: () throws -> Result) rethrows -> Result {
    engine.enter()
    let grouped = engine.mustDefer
    if grouped { engine.openDeferredGroup() }
    defer {
        if grouped { engine.closeDeferredGroup() }
        engine.exit()
    }
    return try body()
}
