/// A value that can be set, read and observed.
///
/// Setting a value equal to the current one (for `Equatable` values) is not a change: nothing is
/// recomputed and no observer is called.
public final class Observable<Value: Sendable>: ObservableValue<Value>, @unchecked Sendable {
    private var storage: Value
    /// Bumped on every applied write; bindings use it to recognise their own writes.
    private(set) var writeCount: UInt64 = 0
    /// Objects this observable keeps alive (the subscription feeding a throttled copy, ...).
    var retained: [any Sendable] = []

    /// An observable whose writes of an equal value are not changes.
    public init(_ value: Value) where Value: Equatable {
        storage = value
        super.init(flags: [], isEqual: { $0 == $1 })
    }

    /// An observable whose every write is a change.
    public init(_ value: Value) {
        storage = value
        super.init(flags: [], isEqual: nil)
    }

    /// An observable that uses `isEqual` to decide whether a write is a change.
    public init(_ value: Value, isEqual: @escaping @Sendable (Value, Value) -> Bool) {
        storage = value
        super.init(flags: [], isEqual: isEqual)
    }

    /// The current value. Setting it is one transaction, unless inside `batch`.
    public override var value: Value {
        get {
            engine.enter()
            if let reader = engine.activeSub { engine.link(self, reader) }
            let value = storage
            engine.exit()
            return value
        }
        set {
            engine.enter()
            if engine.mustDefer {
                engine.deferWrite { self.apply(newValue) }
            } else {
                apply(newValue)
            }
            engine.exit()
        }
    }

    /// Reads and writes the value in one step, so that concurrent updates are never lost.
    public func modify(_ body: (inout Value) -> Void) {
        engine.enter()
        defer { engine.exit() }
        var value = storage
        body(&value)
        if engine.mustDefer {
            engine.deferWrite { self.apply(value) }
        } else {
            apply(value)
        }
    }

    override func readTracked() -> Result<Value, any Error> {
        if let reader = engine.activeSub { engine.link(self, reader) }
        return .success(storage)
    }

    /// The value without tracking. Called inside the engine.
    var current: Value { storage }

    /// Applies a write inside the current transaction; true if it was a change.
    @discardableResult
    func apply(_ newValue: Value, always: Bool = false) -> Bool {
        if !always, let isEqual, isEqual(storage, newValue) { return false }
        storage = newValue
        writeCount &+= 1
        if subs != nil { engine.propagate(from: self) }
        return true
    }
}
