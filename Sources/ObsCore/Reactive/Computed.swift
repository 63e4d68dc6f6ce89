/// What `Computed` and `WritableComputed` share: a value computed by a closure from other
/// observable values, which become its dependencies automatically (the ones the closure read on its
/// last run, and no others). Use it through those two; it has no public initialiser.
///
/// It is lazy: the closure runs when the value is read or observed and a dependency changed since
/// the last run, never otherwise. A closure that throws puts the computed in an error state, kept
/// until a dependency changes; read it with `try get()`.
public class ComputedValue<Value: Sendable>: ObservableValue<Value>, @unchecked Sendable {
    private let compute: @Sendable () throws -> Value
    /// The error of the last run, if it failed (`failed`).
    @exclusivity(unchecked) private(set) var error: (any Error)?

    /// The last value computed successfully, initialised once `hasValue` (in the node's value cell).
    @inlinable
    final var slot: UnsafeMutablePointer<Value> {
        @inline(__always) get { ValueCell<Value>.address(in: self) }
    }

    /// Whether a run has succeeded yet (the value cell is initialised), kept in the node's flags.
    final var hasValue: Bool {
        get { flags.contains(.hasValue) }
        set { if newValue { flags.insert(.hasValue) } else { flags.remove(.hasValue) } }
    }

    /// Whether the last run failed (`error` is the state), kept in the node's flags.
    @usableFromInline
    final var failed: Bool {
        @inlinable get { flags.contains(.failed) }
        set { if newValue { flags.insert(.failed) } else { flags.remove(.failed) } }
    }

    init(isEqual: @escaping @Sendable (Value, Value) -> Bool, compute: @escaping @Sendable () throws -> Value) {
        self.compute = compute
        super.init(flags: [.computed, .dirty], isEqual: isEqual)
        ValueCell<Value>.prepare(in: self)
    }

    deinit {
        if hasValue { slot.deinitialize(count: 1) }
        ValueCell<Value>.release(in: self)
    }

    /// The current value, or the error of the closure (also `ReactiveError.cycle` when the
    /// computed depends on itself).
    public final func get() throws -> Value {
        engine.enter()
        defer { engine.exit() }
        return try read()
    }

    @_specialize(where Value == Int)
    @_specialize(where Value == Double)
    @_specialize(where Value == Bool)
    @_specialize(where Value == String)
    override final func read() throws -> Value {
        try withEngine { engine in
            if isEvaluating {
                engine.recordRead(of: self)
                throw ReactiveError.cycle
            }
            engine.refresh(self)
            engine.recordRead(of: self)
            if failed { throw error! }
            return slot.pointee
        }
    }

    /// `.value` cannot throw: a failed read fails the computed being evaluated (if any) with the same
    /// error and returns the last good value. With no good value ever, it is a programming error.
    @_specialize(where Value == Int)
    @_specialize(where Value == Double)
    @_specialize(where Value == Bool)
    @_specialize(where Value == String)
    @usableFromInline
    override final func readForValue() -> Value {
        do {
            return try read()
        } catch {
            withEngine { $0.poisonActiveEvaluation(with: error) }
            if hasValue { return slot.pointee }
            preconditionFailure("ObsCore: a Computed read with .value has no value (\(error)); read it with try get()")
        }
    }

    /// `readForValue()`, for the inlined getters: a computed that is up to date and not failed is
    /// read in place; anything else (it must be brought up to date, it failed, or reading it now
    /// closes a cycle) goes the long way.
    @inlinable @inline(__always)
    final func readInside(_ engine: Engine) -> Value {
        if flags.isDisjoint(with: [.dirty, .pending, .running, .failed]) {
            engine.recordRead(of: self)
            return slot.pointee
        }
        return readForValue()
    }

    /// Whether a read of `.value` can take the value as it is: the calling thread is inside the
    /// engine, in an evaluation that read this computed at this point last time (or just now), and
    /// the computed is up to date and not failed. The read is then recorded. This is most reads
    /// inside a graph, and they cost a few loads and compares, with no call.
    @inlinable @inline(__always)
    final func readsInPlace() -> Bool {
        withEngine { engine in
            engine.lock.isHeld(by: currentThreadID())
                && flags.isDisjoint(with: [.dirty, .pending, .running, .failed])
                && engine.recordExpectedRead(of: self)
        }
    }

    /// Every other read of `.value`: entering the engine, bringing the value up to date. A read from
    /// outside the engine of a computed that is up to date only takes the lock: it changes nothing,
    /// so the transaction it makes has nothing to settle.
    @inlinable @inline(never)
    final func valueOutOfPlace() -> Value {
        withEngine { engine in
            let thread = currentThreadID()
            if engine.lock.isHeld(by: thread) {
                engine.depth += 1
            } else {
                engine.lock.lock(as: thread)
                if flags.isDisjoint(with: [.dirty, .pending, .running, .failed]) {
                    let value = slot.pointee
                    engine.lock.unlock()
                    return value
                }
                engine.depth = 1
            }
            let value = readInside(engine)
            engine.exit()
            return value
        }
    }

    override final func prefetchWork() {
        deps?.prefetch()
    }

    @_specialize(where Value == Int)
    @_specialize(where Value == Double)
    @_specialize(where Value == Bool)
    @_specialize(where Value == String)
    override final func update() -> Bool {
        withEngine { engine in
            let newValue: Value
            do {
                newValue = try engine.track(self, compute)
            } catch {
                return fail(with: error)
            }
            if !failed, hasValue, isEqual(slot.pointee, newValue) { return false }
            if failed {
                error = nil
                failed = false
            }
            if hasValue {
                slot.pointee = newValue
            } else {
                slot.initialize(to: newValue)
                hasValue = true
            }
            return true
        }
    }

    private func fail(with newError: any Error) -> Bool {
        let same = failed && sameError(error!, newError)
        error = newError
        failed = true
        return !same
    }
}

/// A value computed by a closure from other observable values, which become its dependencies
/// automatically: the ones the closure read on its last run, and no others.
///
/// It is lazy: the closure runs when the value is read or observed and a dependency changed since
/// the last run, never otherwise. A closure that throws puts the computed in an error state, kept
/// until a dependency changes; read it with `try get()`.
public final class Computed<Value: Sendable>: ComputedValue<Value>, @unchecked Sendable {
    /// A computed whose equal results are not changes: dependents are not recomputed, observers not called.
    @inlinable
    public convenience init(_ compute: @escaping @Sendable () throws -> Value) where Value: Equatable {
        self.init(isEqual: { $0 == $1 }, compute)
    }

    /// A computed whose every run is a change.
    @inlinable
    public convenience init(_ compute: @escaping @Sendable () throws -> Value) {
        self.init(isEqual: neverEqual, compute)
    }

    /// A computed that uses `isEqual` to decide whether a new result is a change.
    public init(isEqual: @escaping @Sendable (Value, Value) -> Bool, _ compute: @escaping @Sendable () throws -> Value) {
        super.init(isEqual: isEqual, compute: compute)
    }

    /// The current value. Read inside a `Computed`'s closure, it becomes a dependency.
    public override var value: Value {
        // Inlined into the caller, as `Observable.value` is (a final class: no dynamic dispatch).
        @_specialize(where Value == Int)
        @_specialize(where Value == Double)
        @_specialize(where Value == Bool)
        @_specialize(where Value == String)
        @inlinable get {
            if readsInPlace() { return slot.pointee }
            return valueOutOfPlace()
        }
    }
}

/// A computed value that can also be set: setting it runs `set`, which writes the observables the
/// value is computed from.
public final class WritableComputed<Value: Sendable>: ComputedValue<Value>, @unchecked Sendable {
    private let set: @Sendable (Value) -> Void

    /// A writable computed whose equal results are not changes.
    @inlinable
    public convenience init(get: @escaping @Sendable () throws -> Value, set: @escaping @Sendable (Value) -> Void) where Value: Equatable {
        self.init(isEqual: { $0 == $1 }, get: get, set: set)
    }

    /// A writable computed whose every run is a change.
    @inlinable
    public convenience init(get: @escaping @Sendable () throws -> Value, set: @escaping @Sendable (Value) -> Void) {
        self.init(isEqual: neverEqual, get: get, set: set)
    }

    /// A writable computed that uses `isEqual` to decide whether a new result is a change.
    public init(isEqual: @escaping @Sendable (Value, Value) -> Bool,
                get: @escaping @Sendable () throws -> Value, set: @escaping @Sendable (Value) -> Void) {
        self.set = set
        super.init(isEqual: isEqual, compute: get)
    }

    /// The computed value; setting it calls the setter, as one transaction.
    public override var value: Value {
        @_specialize(where Value == Int)
        @_specialize(where Value == Double)
        @_specialize(where Value == Bool)
        @_specialize(where Value == String)
        @inlinable get {
            if readsInPlace() { return slot.pointee }
            return valueOutOfPlace()
        }
        set { batch { set(newValue) } }
    }
}
