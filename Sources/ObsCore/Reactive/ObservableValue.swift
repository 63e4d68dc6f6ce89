/// A value that can be read, depended on and observed: the common base of `Observable`,
/// `Computed` and `WritableComputed`.
public class ObservableValue<Value: Sendable>: ReactiveNode, @unchecked Sendable {
    /// The equality that decides whether a new value is a change; nil: every write is a change.
    let isEqual: (@Sendable (Value, Value) -> Bool)?

    init(flags: NodeFlags, isEqual: (@Sendable (Value, Value) -> Bool)?) {
        self.isEqual = isEqual
        super.init(flags: flags)
    }

    /// The current value. Read inside a `Computed`'s closure, it becomes a dependency.
    public var value: Value {
        engine.enter()
        defer { engine.exit() }
        return unwrapForValue(readTracked())
    }

    /// The current value, read without becoming a dependency of the computed being evaluated.
    public final func peek() -> Value {
        engine.enter()
        defer { engine.exit() }
        let reader = engine.activeSub
        engine.activeSub = nil
        defer { engine.activeSub = reader }
        return unwrapForValue(readTracked())
    }

    /// The current value or error, brought up to date, recorded as a dependency of the running
    /// computed if any. Called inside the engine.
    func readTracked() -> Result<Value, any Error> {
        preconditionFailure("ObservableValue is abstract")
    }

    /// What `.value` returns for a read that failed. Called inside the engine.
    func unwrapForValue(_ result: Result<Value, any Error>) -> Value {
        switch result {
        case .success(let value): return value
        case .failure(let error): preconditionFailure("ObsCore: \(error)")
        }
    }
}

/// A change of an observed value, as given to observers.
public struct Change<Value> {
    /// The value before the change (for an initial call: the current value).
    public let oldValue: Value
    /// The value after the change.
    public let newValue: Value
    /// Whether this is the call `observe(initial: true)` makes at once.
    public let isInitial: Bool

    public init(oldValue: Value, newValue: Value, isInitial: Bool = false) {
        self.oldValue = oldValue
        self.newValue = newValue
        self.isInitial = isInitial
    }
}

extension Change: Sendable where Value: Sendable {}
extension Change: Equatable where Value: Equatable {}
