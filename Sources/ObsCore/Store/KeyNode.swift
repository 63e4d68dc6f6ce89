/// What a key holds at a moment: nothing, a value, or (computed keys) an evaluation error.
enum KeyContent: Equatable {
    case missing
    case value(JSONValue)
    case error(ObsError)

    var value: JSONValue? {
        if case .value(let value) = self { return value }
        return nil
    }

    var isValue: Bool {
        if case .value = self { return true }
        return false
    }

    /// Appends a `.value`'s value encoded (nothing for the other cases); the bytes appended.
    func encodeValue(into buffer: inout ByteBuffer) -> Int {
        guard case .value(let value) = self else { return 0 }
        let start = buffer.count
        value.encode(into: &buffer)
        return buffer.count - start
    }
}

/// The kind of an existing key, as written on the wire.
enum KeyKind: String, Sendable {
    case value
    case computed
}

/// One named key as a node of the engine. The node outlives the key: a missing key that something
/// reads keeps a node (a placeholder) so that creating it later reaches its readers, and a key that
/// changes kind (value to computed and back) keeps its subscribers.
///
/// As a value key it is a source (the pattern of `Observable`: `committed` is what subscribers last
/// saw, compared by the first checker). As a computed key it is recomputable: `update()` evaluates
/// its expression, recording each key read as a dependency.
final class KeyNode: ReactiveNode, @unchecked Sendable {
    // The store's state of the key. Read and written for every key of every transaction, only by
    // the store's one thread, never across a call that could reach the same field again: no
    // dynamic exclusivity checks (they cost more than the copies themselves).
    let name: String
    /// The store owns its nodes (its key table) and outlives every transaction that runs them:
    /// reaching it costs no reference counting. (An `Unmanaged`, used as it is: a strong reference
    /// taken from an `unowned(unsafe)` one is a retain and a release per evaluation.)
    private let store: Unmanaged<Store>
    @exclusivity(unchecked) var kind: KeyKind?
    @exclusivity(unchecked) var content: KeyContent = .missing
    /// Value keys: the content as of the last time a subscriber checked it.
    @exclusivity(unchecked) var committed: KeyContent = .missing
    /// An `always` write since the last check: a change even when equal.
    @exclusivity(unchecked) var forced = false
    /// A computed's expression, behind a reference: read for every evaluation and every
    /// transaction that records the key, where copying the expression itself would cost a
    /// reference count per part of it.
    @exclusivity(unchecked) private var definition: Definition?
    var expression: Expression? {
        get { definition?.expression }
        set { definition = newValue.map(Definition.init) }
    }
    /// Whether it has an expression (a computed whose stored definition compiles).
    var isComputed: Bool { definition != nil }
    /// The source of its expression, if it has one.
    var expressionSource: String? { definition?.expression.source }
    /// Its definition, unretained (for a transaction's snapshot of it).
    var definitionReference: Unmanaged<Definition>? { definition.map(Unmanaged.passUnretained) }
    /// Its definition (to be kept alive while a snapshot names it).
    var currentDefinition: Definition? { definition }
    /// The last successful value, for the `old` of a recovery from the error state.
    @exclusivity(unchecked) var lastGood: JSONValue?
    @exclusivity(unchecked) var rev: UInt64 = 0
    @exclusivity(unchecked) var createdRev: UInt64 = 0
    @exclusivity(unchecked) var version: UInt64 = 0
    /// Wall-clock expiry of a key set with `ttl_ms`.
    @exclusivity(unchecked) var expiresAt: Double?
    /// The session owning an ephemeral key.
    @exclusivity(unchecked) var owner: UInt64?
    /// Bumped on every applied write; a two-way binding recognises its partner's writes by it.
    @exclusivity(unchecked) var writeCount: UInt64 = 0
    /// The serial of the last transaction that recorded this node, and the node's state before it
    /// (kept on the node: recording a key costs no growing array of snapshots; cleared when the
    /// transaction ends, so that it keeps no old value alive).
    @exclusivity(unchecked) var touchedBy: UInt64 = 0
    @exclusivity(unchecked) var before = KeySnapshot()

    init(name: String, store: Store) {
        self.name = name
        self.store = .passUnretained(store)
        super.init(role: .source)
    }

    var exists: Bool { kind != nil }

    override func update() -> Bool {
        guard let definition = definition.map(Unmanaged.passUnretained) else {
            markChecked()
            let changed = forced || committed != content
            committed = content
            forced = false
            return changed
        }
        return store._withUnsafeGuaranteedRef { evaluate(definition, in: $0) }
    }

    /// A computed's `update()`: evaluates its expression; whether its content changed.
    @inline(__always)
    private func evaluate(_ definition: Unmanaged<Definition>, in store: Store) -> Bool {
        store.touch(self)
        let result: KeyContent
        do {
            // The node keeps its definition for the evaluation (an evaluation defines nothing):
            // read unretained.
            let value = try engine.track(self) {
                try definition._withUnsafeGuaranteedRef { try $0.expression.evaluate(in: StoreContext(store: store)) }
            }
            // Values no client could decode (and that chains could deepen without end) are refused:
            // a value travels inside a line's object, which takes one level of the limit.
            let depth = store.configuration.maxJSONDepth - 1
            if value.isContainer, value.nests(deeperThan: depth) {
                result = .error(ObsError(.evalError, "the result nests deeper than \(depth) levels"))
            } else {
                // A value compared with the value held, not the whole content (no copy of it).
                if case .value(let current) = content, current == value { return false }
                lastGood = value
                content = .value(value)
                return true
            }
        } catch {
            result = .error(ObsError(evaluationFailure: error))
        }
        if result == content { return false }
        content = result
        return true
    }

    /// Value keys: applies a write inside the current transaction.
    func write(_ newContent: KeyContent, always: Bool) {
        content = newContent
        writeCount &+= 1
        if let value = newContent.value { lastGood = value }
        if subs == nil {
            committed = newContent
            forced = false
            markChecked()
        } else {
            if always { forced = true }
            engine.propagate(from: self)
        }
    }

    /// A read that settles a dirty value key first, as `Observable` does, so that every subscriber
    /// of a dirty source is marked before anyone sees its new value.
    func settle() {
        settle(in: engine)
    }

    /// `settle()`, with the engine at hand.
    @inline(__always)
    func settle(in engine: Engine) {
        if !isComputed {
            engine.settleSource(self)
        } else {
            engine.refresh(self)
        }
    }

    /// The names of the keys this computed read on its last evaluation, in reading order.
    var dependencyNames: [String] {
        var names: [String] = []
        forEachDependency { if let key = $0 as? KeyNode { names.append(key.name) } }
        return names
    }

    /// The computed keys that read this key.
    var dependentNames: [String] {
        var names: [String] = []
        forEachSubscriber { if let key = $0 as? KeyNode { names.append(key.name) } }
        return names
    }
}

/// A computed key's compiled expression, shared by reference.
final class Definition {
    let expression: Expression

    init(_ expression: Expression) { self.expression = expression }
}

extension ObsError {
    /// The error a computed key (or a binding's map) is left in by a failed evaluation: a cycle
    /// stays `cycle`, everything else is `eval_error` with the failure's message.
    init(evaluationFailure error: any Error) {
        switch error {
        case let error as ObsError where error.code == .cycle:
            self = error
        case let error as ObsError:
            self.init(.evalError, error.message)
        case ReactiveError.cycle:
            self.init(.cycle, ReactiveError.cycle.description)
        default:
            self.init(.evalError, "\(error)")
        }
    }
}
