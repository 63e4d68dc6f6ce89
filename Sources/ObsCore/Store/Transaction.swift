/// A key's state before a transaction first touched it: what its events compare against and what
/// a rollback restores. A computed's expression is kept as its definition, unretained (a copy of
/// the compiled expression, taken for every computed of every transaction, cost several
/// references each, and a retained reference or a copy of its source one each): the node holds
/// it, and a definition replaced while the transaction is open is kept alive by the transaction
/// (`Transaction.replacedDefinitions`) until it is reset. A rollback that must restore another
/// definition compiles its source again.
struct KeySnapshot {
    var kind: KeyKind?
    var content: KeyContent = .missing
    var definition: Unmanaged<Definition>?
    /// The source of the expression it had, if it was a computed.
    var expressionSource: String? { definition?._withUnsafeGuaranteedRef { $0.expression.source } }
    var lastGood: JSONValue?
    var rev: UInt64 = 0
    var createdRev: UInt64 = 0
    var version: UInt64 = 0
    var expiresAt: Double?
    var owner: UInt64?

    /// Records `node`'s state, field by field (no whole snapshot is built and copied).
    static func record(_ node: KeyNode) {
        node.before.kind = node.kind
        node.before.content = node.content
        node.before.definition = node.definitionReference
        node.before.lastGood = node.lastGood
        node.before.rev = node.rev
        node.before.createdRev = node.createdRev
        node.before.version = node.version
        node.before.expiresAt = node.expiresAt
        node.before.owner = node.owner
    }

    /// Lets go of what the snapshot holds (its old values), at the end of its transaction. Its
    /// other fields are numbers, read only after the next `record` sets them again.
    mutating func forget() {
        content = .missing
        definition = nil
        lastGood = nil
    }
}

/// The record of one open transaction: the keys and bindings it touched, in order, with their
/// state before it.
///
/// The store reuses one record from transaction to transaction (`Store.spareTransaction`), so that
/// its lists keep their capacity.
final class Transaction {
    // Read for every key a transaction records and commits, by the store's one thread: no
    // dynamic exclusivity checks on any of its state.
    /// Distinguishes this transaction's marks on the nodes (`KeyNode.touchedBy`).
    @exclusivity(unchecked) private(set) var serial: UInt64
    /// The keys it touched, in order; each keeps its state before the transaction
    /// (`KeyNode.before`). The list keeps them alive until the record is reset.
    @exclusivity(unchecked) var touched = NodeList(retaining: true)
    /// Plain keys made nodes during the transaction (to be made records again at its end, if
    /// nothing else needs them as nodes).
    @exclusivity(unchecked) var promoted = NodeList(retaining: true)
    /// Keys written with `always: true`: a change event even when equal.
    @exclusivity(unchecked) var forced: Set<ObjectIdentifier> = []
    /// Keys whose definition or metadata (expression, TTL, owner) changed: a revision even without
    /// an event.
    @exclusivity(unchecked) var redefined: Set<ObjectIdentifier> = []
    /// Bindings by target, as they were before the transaction touched them.
    @exclusivity(unchecked) var bindingsBefore: [String: KeyBinding?] = [:]
    @exclusivity(unchecked) var bindingOrder: [String] = []
    /// The `reason` of the delete events (TTL expiry, ephemeral removal).
    @exclusivity(unchecked) private(set) var reason: String?
    /// Applying what a shared log decided (cluster mode): bindings write nothing (the log's
    /// transaction holds what they wrote where it was decided).
    @exclusivity(unchecked) private(set) var replicated: Bool
    /// Cluster mode: the keys whose state decided the outcome (`depends`) are recorded.
    @exclusivity(unchecked) private(set) var recordsDependencies: Bool
    /// Keys whose state decided what this transaction does, beyond what it writes blindly: an
    /// `if_rev` key, an incremented key, a key expired or removed as ephemeral. A shared log
    /// commits the transaction only if none of them changed since this store applied it.
    @exclusivity(unchecked) var depends: [String] = []
    /// Keys whose revisions the shared log gave (applied, not computed at commit).
    @exclusivity(unchecked) var replicatedMetadata: Set<ObjectIdentifier> = []
    /// Applying a transaction the shared log committed without comparing the bindings its
    /// proposer had applied, which changed since (`Store.apply(_:bindingsUnseen:)`): the binding
    /// effects it set off wrote nothing where it was proposed, and are noted here to run again.
    @exclusivity(unchecked) var bindingsUnseen = false
    @exclusivity(unchecked) var missedBindings: [BindingEffect] = []
    /// The definitions of keys it touched that it replaced: their snapshots name them, unretained
    /// (`KeySnapshot.definition`).
    @exclusivity(unchecked) var replacedDefinitions: [Definition] = []

    init(serial: UInt64, reason: String?, replicated: Bool = false, recordsDependencies: Bool = false) {
        self.serial = serial
        self.reason = reason
        self.replicated = replicated
        self.recordsDependencies = recordsDependencies
    }

    /// Makes this record a new transaction's, empty (the lists keep their capacity).
    func reset(serial: UInt64, reason: String?, replicated: Bool, recordsDependencies: Bool) {
        self.serial = serial
        self.reason = reason
        self.replicated = replicated
        self.recordsDependencies = recordsDependencies
        touched.removeAll()
        promoted.removeAll()
        if !forced.isEmpty { forced.removeAll() }
        if !redefined.isEmpty { redefined.removeAll() }
        if !bindingsBefore.isEmpty { bindingsBefore.removeAll() }
        bindingOrder.removeAll(keepingCapacity: true)
        depends.removeAll(keepingCapacity: true)
        bindingsUnseen = false
        if !missedBindings.isEmpty { missedBindings.removeAll() }
        if !replicatedMetadata.isEmpty { replicatedMetadata.removeAll() }
        if !replacedDefinitions.isEmpty { replacedDefinitions.removeAll() }
    }

    /// Whether `node` was written with `always` in this transaction.
    func isForced(_ node: KeyNode) -> Bool { !forced.isEmpty && forced.contains(ObjectIdentifier(node)) }

    /// Whether `node`'s definition or metadata changed in this transaction.
    func isRedefined(_ node: KeyNode) -> Bool { !redefined.isEmpty && redefined.contains(ObjectIdentifier(node)) }

    /// Notes that the outcome depends on `key`'s current state (cluster mode only).
    func depend(on key: String) {
        if recordsDependencies { depends.append(key) }
    }

    /// The state of a node this transaction touched, before it.
    func snapshot(of node: KeyNode) -> KeySnapshot { node.before }
}

/// The outcome of a committed (or empty) write.
struct CommitResult {
    /// The transaction's revision, or the current one when nothing changed.
    var rev: UInt64
    /// Whether persisted state changed: with strict durability the response waits for a sync.
    var persisted: Bool
}

/// How a transaction's changes are committed.
enum CommitMode {
    /// Decided here: the next revision, kept by the store's storage (one host).
    case local
    /// Decided by the shared log at this revision (cluster mode): nothing is written here.
    case replicated(UInt64)
    /// Cluster mode: changes of computeds alone (driven by the clock), which the log never sees;
    /// they carry the revision already applied.
    case unlogged

    var isReplicated: Bool {
        if case .replicated = self { return true }
        return false
    }
}
