import ObsCore

extension SplitMix64 {
    /// A random transaction at `rev` over a few names: puts and deletes of keys (with and without
    /// expiry, values of every JSON kind), definitions and bindings.
    public mutating func storedTransaction(rev: UInt64) -> StoredTransaction {
        var transaction = StoredTransaction(rev: rev)
        let names = ["a", "b.c", "k.1", "k.2", "long.name-with_all.kinds"]
        let values: [JSONValue] = [1, -7, 2.5, "text", "with \"quotes\" and \u{e9}", true, .null, [1, "x"], ["b": 1, "a": [2]]]
        for _ in 0..<(1 + below(4)) {
            let name = pick(names)
            switch below(7) {
            case 0: transaction.deletedKeys.append(name)
            case 1: transaction.putDefinitions.append(StoredDefinition(key: name, expr: "$a + \(below(9))", createdRev: rev))
            case 2: transaction.deletedDefinitions.append(name)
            case 3:
                transaction.putBindings.append(StoredBinding(from: pick(names), to: name, map: below(2) == 0 ? nil : "value",
                                                             twoWay: below(2) == 0, unmap: below(3) == 0 ? "value" : nil))
            case 4: transaction.deletedBindings.append(name)
            default:
                transaction.putKeys.append(StoredKey(key: name, value: pick(values), rev: rev, createdRev: UInt64(1 + below(Int(rev))),
                                                     version: UInt64(1 + below(9)),
                                                     expiresAt: below(3) == 0 ? 1_900_000_000.25 : nil))
            }
        }
        return transaction
    }
}
