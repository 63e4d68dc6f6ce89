/// A value that can be set, read and observed.
///
/// Setting a value equal to the current one (for `Equatable` values) is not a change: nothing is
/// recomputed and no observer is called.
public final class Observable<Value: Sendable>: ObservableValue<Value>, @unchecked Sendable {
    /// The value as of the last time a subscriber checked it; see `update()`.
    @exclusivity(unchecked) private var committed: Value
    /// Bumped on every applied write; bindings use it to recognise their own writes.
    @exclusivity(unchecked) private(set) var writeCount: UInt64 = 0
    /// Objects this observable keeps alive (the subscription feeding a throttled copy, ...).
    var retained: [any Sendable] = []

    /// An observable whose writes of an equal value are not changes.
    @inlinable
    public convenience init(_ value: Value) where Value: Equatable {
        self.init(value, isEqual: { $0 == $1 })
    }

    /// An observable whose every write is a change.
    @inlinable
    public convenience init(_ value: Value) {
        self.init(value, isEqual: neverEqual)
    }

    /// An observable that uses `isEqual` to decide whether a write is a change.
    public init(_ value: Value, isEqual: @escaping @Sendable (Value, Value) -> Bool) {
        committed = value
        super.init(flags: [], isEqual: isEqual)
        ValueCell<Value>.prepare(in: self)
        ValueCell<Value>.address(in: self).initialize(to: value)
    }

    deinit {
        ValueCell<Value>.address(in: self).deinitialize(count: 1)
        ValueCell<Value>.release(in: self)
    }

    /// The current value, in the node's value cell.
    @inlinable
    final var storage: Value {
        @inline(__always) get { ValueCell<Value>.address(in: self).pointee }
        @inline(__always) set { ValueCell<Value>.address(in: self).pointee = newValue }
    }

    /// An `always` write since the last check: a change even if the value is equal (a flag).
    private var forcedChange: Bool {
        get { flags.contains(.forcedChange) }
        set { if newValue { flags.insert(.forcedChange) } else { flags.remove(.forcedChange) } }
    }

    /// The current value. Setting it is one transaction, unless inside `batch`.
    public override var value: Value {
        // Inlined into the caller, so that a read is specialised for the caller's type and costs
        // no call into the library on the way.
        @_specialize(where Value == Int)
        @_specialize(where Value == Double)
        @_specialize(where Value == Bool)
        @_specialize(where Value == String)
        @inlinable get {
            if readsInPlace() { return storage }
            return valueOutOfPlace()
        }
        set {
            withEngine { engine in
                engine.enter()
                if engine.mustDefer {
                    engine.deferWrite { self.apply(newValue) }
                } else {
                    apply(newValue)
                }
                engine.exit()
            }
        }
    }

    /// Reads and writes the value in one step, so that concurrent updates are never lost.
    ///
    /// Where writes are deferred (in a handler, in a computed's closure), the whole step is
    /// deferred: `body` runs when the write is applied, on the value the writes queued before it
    /// left, so that two increments queued in one handler make two.
    public func modify(_ body: @escaping @Sendable (inout Value) -> Void) {
        engine.enter()
        defer { engine.exit() }
        if engine.mustDefer {
            engine.deferWrite { self.apply(self.modified(by: body)) }
        } else {
            apply(modified(by: body))
        }
    }

    private func modified(by body: (inout Value) -> Void) -> Value {
        var value = storage
        body(&value)
        return value
    }

    @_specialize(where Value == Int)
    @_specialize(where Value == Double)
    @_specialize(where Value == Bool)
    @_specialize(where Value == String)
    override func read() throws -> Value { readForValue() }

    @_specialize(where Value == Int)
    @_specialize(where Value == Double)
    @_specialize(where Value == Bool)
    @_specialize(where Value == String)
    override func readForValue() -> Value {
        withEngine { readInside($0) }
    }

    /// `readForValue()`, for the inlined getter.
    @inlinable @inline(__always)
    final func readInside(_ engine: Engine) -> Value {
        if flags.contains(.dirty) { commit() }
        engine.recordRead(of: self)
        return storage
    }

    /// Whether a read of `.value` can take the value as it is: the calling thread is inside the
    /// engine, in an evaluation that read this observable at this point last time (or just now),
    /// and it was not written since its subscribers last looked. The read is then recorded.
    @inlinable @inline(__always)
    final func readsInPlace() -> Bool {
        withEngine { engine in
            engine.lock.isHeld(by: currentThreadID()) && !flags.contains(.dirty)
                && engine.recordExpectedRead(of: self)
        }
    }

    /// Every other read of `.value`: entering the engine, settling a write. A read from outside
    /// the engine of an observable with no write to settle only takes the lock: it changes nothing,
    /// so the transaction it makes has nothing to settle.
    @inlinable @inline(never)
    final func valueOutOfPlace() -> Value {
        withEngine { engine in
            let thread = currentThreadID()
            if engine.lock.isHeld(by: thread) {
                engine.depth += 1
            } else {
                engine.lock.lock(as: thread)
                if !flags.contains(.dirty) {
                    let value = storage
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

    /// A read of a dirty source settles it first, so that every subscriber of a dirty source is
    /// always marked: whoever reads its new value sees it as committed.
    @usableFromInline @inline(never)
    func commit() {
        if update(), let subs { engine.shallowPropagate(subs) }
    }

    /// Applies a write inside the current transaction; true if it was a change.
    @discardableResult
    @_specialize(where Value == Int)
    @_specialize(where Value == Double)
    @_specialize(where Value == Bool)
    @_specialize(where Value == String)
    func apply(_ newValue: Value, always: Bool = false) -> Bool {
        if !always, isEqual(storage, newValue) { return false }
        storage = newValue
        writeCount &+= 1
        if subs == nil {
            committed = newValue
            flags.remove(.dirty)
        } else {
            if always { forcedChange = true }
            withEngine { $0.propagate(from: self) }
        }
        return true
    }

    /// Called by the first subscriber that checks this source after writes: whether the value
    /// differs from the one subscribers last saw. A transaction that writes a value and then writes
    /// the old one back changes nothing downstream.
    @_specialize(where Value == Int)
    @_specialize(where Value == Double)
    @_specialize(where Value == Bool)
    @_specialize(where Value == String)
    override func update() -> Bool {
        flags.remove(.dirty)
        let changed = forcedChange || !isEqual(committed, storage)
        committed = storage
        forcedChange = false
        return changed
    }
}
