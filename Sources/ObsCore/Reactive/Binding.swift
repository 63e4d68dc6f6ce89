/// Keeps `target` equal to `source`: at once, then in the same transaction as every change of
/// `source`. `target` can still be set by anyone; the last write wins (in a `batch`, the binding
/// writes at its end, after the batch's own writes).
public func bind<Value>(_ source: ObservableValue<Value>, to target: Observable<Value>) -> ObservationToken {
    bind(source, to: target, transform: { $0 })
}

/// Keeps `target` equal to `transform(source)`, at once and whenever `source` changes. `transform`
/// runs inside the transaction, like a computed's closure: it must not write.
public func bind<Value, Target>(_ source: ObservableValue<Value>, to target: Observable<Target>,
                                transform: @escaping @Sendable (Value) -> Target) -> ObservationToken {
    let effect = EffectNode {
        // A failed source, or a failed computed the transform read, leaves the target as it is
        // until it recovers.
        guard let value = try? source.read() else { return }
        let mapped = transform(value)
        if !engine.evaluationFailed { target.apply(mapped) }
    }
    engine.enter()
    effect.run()
    engine.exit()
    return ObservationToken(cancelling: effect)
}

/// Calls `setter` with `target` and the value of `source`, at once and after every change, while
/// `target` exists (it is held weakly). The setter runs on `scheduler`, outside the transaction.
public func bind<Value, Target: AnyObject>(_ source: ObservableValue<Value>, to target: Target,
                                           on scheduler: some EventScheduler = ImmediateScheduler(),
                                           _ setter: @escaping @Sendable (Target, Value) -> Void) -> ObservationToken {
    let weakTarget = WeakReference(target)
    return source.observe(initial: true, on: scheduler) { change in
        guard let target = weakTarget.object else { return }
        setter(target, change.newValue)
    }
}

/// Keeps two observables equal: `right` takes `left`'s value at once, then a write to either
/// reaches the other once, in the same transaction. The binding's own writes never echo back.
public func bindTwoWay<Value>(_ left: Observable<Value>, _ right: Observable<Value>) -> ObservationToken {
    bindTwoWay(left, right, map: { $0 }, unmap: { $0 })
}

/// A two-way binding through a pair of conversions: `right = map(left)`, `left = unmap(right)`.
public func bindTwoWay<Left, Right>(_ left: Observable<Left>, _ right: Observable<Right>,
                                    map: @escaping @Sendable (Left) -> Right,
                                    unmap: @escaping @Sendable (Right) -> Left) -> ObservationToken {
    // The write counts the binding itself produced, guarded by the engine lock (effects run under it).
    let echo = EchoState()
    let forward = EffectNode {
        guard let value = try? left.read(), left.writeCount != echo.left else { return }
        let mapped = map(value)
        if !engine.evaluationFailed, right.apply(mapped) { echo.right = right.writeCount }
    }
    let backward = EffectNode {
        guard let value = try? right.read(), right.writeCount != echo.right else { return }
        let unmapped = unmap(value)
        if !engine.evaluationFailed, left.apply(unmapped) { echo.left = left.writeCount }
    }
    engine.enter()
    forward.run()
    backward.run()
    engine.exit()
    return ObservationToken {
        forward.cancel()
        backward.cancel()
    }
}

/// The write counts of a two-way binding's own last writes; accessed only under the engine lock.
private final class EchoState: @unchecked Sendable {
    var left: UInt64 = .max
    var right: UInt64 = .max
}

/// A weak reference that may cross threads; what is done with the object is the caller's affair.
final class WeakReference<Object: AnyObject>: @unchecked Sendable {
    weak var object: Object?
    init(_ object: Object) { self.object = object }
}
