/// A value computed by a closure from other observable values, which become its dependencies
/// automatically: the ones the closure read on its last run, and no others.
///
/// It is lazy: the closure runs when the value is read or observed and a dependency changed since
/// the last run, never otherwise. A closure that throws puts the computed in an error state, kept
/// until a dependency changes; read it with `try get()`.
public class Computed<Value: Sendable>: ObservableValue<Value>, @unchecked Sendable {
    private let compute: @Sendable () throws -> Value
    /// The last value computed successfully.
    private(set) var cached: Value?
    /// The error of the last run, if it failed.
    private(set) var error: (any Error)?

    /// A computed whose equal results are not changes: dependents are not recomputed, observers not called.
    public init(_ compute: @escaping @Sendable () throws -> Value) where Value: Equatable {
        self.compute = compute
        super.init(flags: [.computed, .dirty], isEqual: { $0 == $1 })
    }

    /// A computed whose every run is a change.
    public init(_ compute: @escaping @Sendable () throws -> Value) {
        self.compute = compute
        super.init(flags: [.computed, .dirty], isEqual: nil)
    }

    /// A computed that uses `isEqual` to decide whether a new result is a change.
    public init(isEqual: @escaping @Sendable (Value, Value) -> Bool, _ compute: @escaping @Sendable () throws -> Value) {
        self.compute = compute
        super.init(flags: [.computed, .dirty], isEqual: isEqual)
    }

    /// The current value, or the error of the closure (also `ObsError` with code `cycle` when the
    /// computed depends on itself).
    public final func get() throws -> Value {
        engine.enter()
        defer { engine.exit() }
        return try readTracked().get()
    }

    override final func readTracked() -> Result<Value, any Error> {
        let reader = engine.activeSub
        if flags.contains(.running) {
            if let reader { engine.link(self, reader) }
            return .failure(ObsError(.cycle, "cycle: a computed depends on itself"))
        }
        engine.refresh(self)
        if let reader { engine.link(self, reader) }
        if let error { return .failure(error) }
        return .success(cached!)
    }

    /// `.value` cannot throw: a failed read fails the computed being evaluated (if any) with the same
    /// error and returns the last good value. With no good value ever, it is a programming error.
    override final func unwrapForValue(_ result: Result<Value, any Error>) -> Value {
        switch result {
        case .success(let value):
            return value
        case .failure(let error):
            if engine.activeSub != nil, engine.poison == nil { engine.poison = error }
            if let cached { return cached }
            preconditionFailure("ObsCore: a Computed read with .value has no value (\(error)); read it with try get()")
        }
    }

    override final func update() -> Bool {
        let reader = engine.activeSub
        let outerPoison = engine.poison
        engine.activeSub = self
        engine.poison = nil
        depsTail = nil
        flags.remove([.dirty, .pending])
        flags.insert(.running)
        engine.evaluationDepth += 1
        var result: Result<Value, any Error>
        do {
            result = .success(try compute())
        } catch {
            result = .failure(error)
        }
        engine.evaluationDepth -= 1
        flags.remove(.running)
        if let poison = engine.poison { result = .failure(poison) }
        engine.activeSub = reader
        engine.poison = outerPoison
        engine.purgeStaleDependencies(of: self)

        switch result {
        case .success(let value):
            if error == nil, let old = cached, let isEqual, isEqual(old, value) { return false }
            error = nil
            cached = value
            return true
        case .failure(let newError):
            let same = error.map { sameError($0, newError) } ?? false
            error = newError
            return !same
        }
    }
}

/// Whether two errors are the same for change detection: equal `ObsError`s are; anything else is
/// a new error.
func sameError(_ a: any Error, _ b: any Error) -> Bool {
    guard let a = a as? ObsError, let b = b as? ObsError else { return false }
    return a == b
}

/// A computed value that can also be set: setting it runs `set`, which writes the observables the
/// value is computed from.
public final class WritableComputed<Value: Sendable>: Computed<Value>, @unchecked Sendable {
    private let set: @Sendable (Value) -> Void

    /// A writable computed whose equal results are not changes.
    public init(get: @escaping @Sendable () throws -> Value, set: @escaping @Sendable (Value) -> Void) where Value: Equatable {
        self.set = set
        super.init(get)
    }

    /// A writable computed whose every run is a change.
    public init(get: @escaping @Sendable () throws -> Value, set: @escaping @Sendable (Value) -> Void) {
        self.set = set
        super.init(get)
    }

    /// The computed value; setting it calls the setter, as one transaction.
    public override var value: Value {
        get { super.value }
        set { batch { set(newValue) } }
    }
}
