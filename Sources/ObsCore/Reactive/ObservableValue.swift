/// A value that can be read, depended on and observed: the common base of `Observable`,
/// `Computed` and `WritableComputed`.
///
/// The engine calls into these classes through their base (`update()`, `runWatcher()`), where Swift
/// runs the generic code unspecialised; so their hot paths avoid composite generic types
/// (`Optional<Value>`, `Result<Value, _>`), whose metadata the runtime would look up on every call.
public class ObservableValue<Value: Sendable>: ReactiveNode, @unchecked Sendable {
    /// Whether a new value equals the old one, so is no change (for types without `==`: never).
    @usableFromInline let isEqual: @Sendable (Value, Value) -> Bool

    init(flags: NodeFlags, isEqual: @escaping @Sendable (Value, Value) -> Bool) {
        self.isEqual = isEqual
        super.init(flags: flags)
    }

    /// The current value. Read inside a `Computed`'s closure, it becomes a dependency.
    public var value: Value {
        withEngine { engine in
            engine.enter()
            defer { engine.exit() }
            return readForValue()
        }
    }

    /// The current value, read without becoming a dependency of the computed being evaluated.
    public final func peek() -> Value {
        engine.enter()
        defer { engine.exit() }
        return engine.untracked { readForValue() }
    }

    /// The current value brought up to date, recorded as a dependency of the running computed if
    /// any; throws the error of a failed computed. Called inside the engine.
    func read() throws -> Value {
        preconditionFailure("ObservableValue is abstract")
    }

    /// Like `read()`, for `.value`, which cannot throw. Called inside the engine.
    @usableFromInline
    func readForValue() -> Value {
        preconditionFailure("ObservableValue is abstract")
    }
}

/// Never equal: the equality of values whose type has no `==`.
@usableFromInline
func neverEqual<Value>(_: Value, _: Value) -> Bool { false }

/// A change of an observed value, as given to observers.
public struct Change<Value> {
    /// The value before the change (for an initial call: the current value).
    public let oldValue: Value
    /// The value after the change.
    public let newValue: Value
    /// Whether this is the call `observe(initial: true)` makes at once.
    public let isInitial: Bool

    @inlinable
    public init(oldValue: Value, newValue: Value, isInitial: Bool = false) {
        self.oldValue = oldValue
        self.newValue = newValue
        self.isInitial = isInitial
    }
}

extension Change: Sendable where Value: Sendable {}
extension Change: Equatable where Value: Equatable {}
