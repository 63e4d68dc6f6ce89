/// A key's state before a transaction first touched it: what its events compare against and what
/// a rollback restores.
struct KeySnapshot {
    var kind: KeyKind?
    var content: KeyContent
    var expression: Expression?
    var lastGood: JSONValue?
    var rev: UInt64
    var createdRev: UInt64
    var version: UInt64
    var expiresAt: Double?
    var owner: UInt64?

    init(_ node: KeyNode) {
        kind = node.kind
        content = node.content
        expression = node.expression
        lastGood = node.lastGood
        rev = node.rev
        createdRev = node.createdRev
        version = node.version
        expiresAt = node.expiresAt
        owner = node.owner
    }
}

/// The record of one open transaction: the keys and bindings it touched, in order, with their
/// state before it.
final class Transaction {
    /// Distinguishes this transaction's marks on the nodes (`KeyNode.touchedBy`).
    let serial: UInt64
    var touched: [KeyNode] = []
    /// `before[i]` is the state of `touched[i]` before this transaction.
    var before: [KeySnapshot] = []
    /// Keys written with `always: true`: a change event even when equal.
    var forced: Set<ObjectIdentifier> = []
    /// Keys whose definition or metadata (expression, TTL, owner) changed: a revision even without
    /// an event.
    var redefined: Set<ObjectIdentifier> = []
    /// Bindings by target, as they were before the transaction touched them.
    var bindingsBefore: [String: KeyBinding?] = [:]
    var bindingOrder: [String] = []
    /// The `reason` of the delete events (TTL expiry, ephemeral removal).
    let reason: String?
    /// Applying what a shared log decided (cluster mode): bindings write nothing (the log's
    /// transaction holds what they wrote where it was decided).
    let replicated: Bool
    /// Cluster mode: the keys whose state decided the outcome (`depends`) are recorded.
    let recordsDependencies: Bool
    /// Keys whose state decided what this transaction does, beyond what it writes blindly: an
    /// `if_rev` key, an incremented key, a key expired or removed as ephemeral. A shared log
    /// commits the transaction only if none of them changed since this store applied it.
    var depends: [String] = []
    /// Keys whose revisions the shared log gave (applied, not computed at commit).
    var replicatedMetadata: Set<ObjectIdentifier> = []
    /// Applying a transaction the shared log committed without comparing the bindings its
    /// proposer had applied, which changed since (`Store.apply(_:bindingsUnseen:)`): the binding
    /// effects it set off wrote nothing where it was proposed, and are noted here to run again.
    var bindingsUnseen = false
    var missedBindings: [BindingEffect] = []

    init(serial: UInt64, reason: String?, replicated: Bool = false, recordsDependencies: Bool = false) {
        self.serial = serial
        self.reason = reason
        self.replicated = replicated
        self.recordsDependencies = recordsDependencies
    }

    /// Notes that the outcome depends on `key`'s current state (cluster mode only).
    func depend(on key: String) {
        if recordsDependencies { depends.append(key) }
    }

    func snapshot(of node: KeyNode) -> KeySnapshot { before[node.touchedIndex] }
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
