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

    var isPersistedValue: Bool { kind == .value && owner == nil }
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

    init(serial: UInt64, reason: String?) {
        self.serial = serial
        self.reason = reason
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
