/// A small in-process API, for the daemon's own keys, tools and benchmarks: the same transactions
/// as the requests of the same names.
extension Store {
    /// Sets a value key as one transaction; the store's revision after it.
    @discardableResult
    public func setValue(_ value: JSONValue, forKey key: String) throws(ObsError) -> UInt64 {
        if sharedLog == nil, current == nil {
            scratch.removeAll(keepingCapacityUpTo: 1 << 16)
            value.encode(into: &scratch)
            var name = key
            // A plain key is written as `set` requests write it (Store+PlainKeys.swift).
            let plain = name.withUTF8 { name -> Result<UInt64, ObsError>? in
                guard let write = prepareSet(UnsafeRawBufferPointer(name), scratch.bytes, asciiOnly: false) else { return nil }
                return Result { () throws(ObsError) in try commit(write) }
            }
            if let plain { return try plain.get() }
        }
        return try transact { () throws(ObsError) in try set(key, value) }.1.rev
    }

    /// Defines (or redefines) a computed key as one transaction; the store's revision after it.
    @discardableResult
    public func defineComputed(_ key: String, expression: String) throws(ObsError) -> UInt64 {
        try transact { () throws(ObsError) in try define(key, expression, replace: true) }.1.rev
    }

    /// The current value of a key (nil when missing or in the error state).
    public func value(forKey key: String) -> JSONValue? {
        guard let found = view(key) else { return nil }
        engine.enter()
        found.settle()
        engine.exit()
        return found.content.value
    }

    /// How many keys exist.
    public var count: Int { keyCount }
}

extension Store {
    /// `eval`: evaluates an expression once against the current state; nothing is stored and
    /// nothing depends on what it read.
    func evaluateOnce(_ source: String) throws(ObsError) -> JSONValue {
        let expression = try compile(source)
        engine.enter()
        defer { engine.exit() }
        do {
            return try engine.untracked { () throws(ObsError) in try expression.evaluate(in: StoreContext(store: self)) }
        } catch {
            throw error.code == .cycle ? error : ObsError(.evalError, error.message)
        }
    }
}
