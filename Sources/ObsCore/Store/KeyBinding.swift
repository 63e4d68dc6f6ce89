/// A binding into a value key: `from -> to`, or `from <-> to` (two-way), each direction an effect
/// node of the engine, so a binding's write is part of the transaction that changed its source.
final class KeyBinding {
    let from: String
    let to: String
    let map: Expression?
    let unmap: Expression?
    let twoWay: Bool
    var forward: BindingEffect?
    var backward: BindingEffect?

    init(from: String, to: String, map: Expression?, unmap: Expression?, twoWay: Bool) {
        self.from = from
        self.to = to
        self.map = map
        self.unmap = unmap
        self.twoWay = twoWay
    }

    var stored: StoredBinding {
        StoredBinding(from: from, to: to, map: map?.source, twoWay: twoWay, unmap: unmap?.source)
    }

    /// The source of the key `target` in this binding.
    func source(of target: String) -> String { target == to ? from : to }
}

/// One direction of a binding: when its source changes, writes the (mapped) value into its target.
final class BindingEffect: ReactiveNode, @unchecked Sendable {
    unowned let store: Store
    let source: String
    let target: String
    let transform: Expression?
    /// The other direction of a two-way binding: a change it wrote is not echoed back.
    unowned(unsafe) var partner: BindingEffect?
    /// The target's `writeCount` after this effect's last write.
    var lastWrite: UInt64 = 0

    init(store: Store, source: String, target: String, transform: Expression?) {
        self.store = store
        self.source = source
        self.target = target
        self.transform = transform
        super.init(role: .effect)
    }

    /// Runs in the current transaction, counted: a cycle that only a dynamic branch closes (a
    /// binding feeding a computed that feeds the binding) is cut after `maxRunsPerTransaction`.
    private var runSerial: UInt64 = 0
    private var runs = 0
    static let maxRunsPerTransaction = 64

    override func runWatcher() {
        let serial = store.current?.serial ?? 0
        if serial != runSerial {
            runSerial = serial
            runs = 0
        }
        runs += 1
        let due = runs <= BindingEffect.maxRunsPerTransaction && inputsChanged
        guard let current = store.current, current.replicated else { return run(write: due) }
        // Applying a shared log's transaction: what the binding wrote is part of it already, unless
        // its proposer had not applied this binding (then it is run again, Store+SharedLog.swift).
        if due, current.bindingsUnseen { current.missedBindings.append(self) }
        run(write: false)
    }

    /// Whether what this effect read differs from the start of the transaction. A key read in the
    /// middle of a batch (by a `define`) can change and change back within it: the engine then
    /// sees two changes, but the binding's source did not change.
    private var inputsChanged: Bool {
        guard let current = store.current else { return true }
        var changed = false
        forEachDependency { dependency in
            guard !changed else { return }
            guard let key = dependency as? KeyNode else {
                changed = true
                return
            }
            changed = key.touchedBy == current.serial
                && (current.snapshot(of: key).content != key.content || current.isForced(key))
        }
        return changed
    }

    /// Reads the source (recording it and whatever the transform reads as dependencies) and, with
    /// `write`, writes the result into the target. A missing source reads as null, as a key read by
    /// an expression does (so `value ?? "offline"` maps a deleted source); a source in the error
    /// state and a failing transform write nothing, and the target keeps its value.
    func run(write: Bool) {
        let result = try? engine.track(self) { () throws(ObsError) -> JSONValue? in
            let node = store.node(source, create: true)!
            node.settle()
            engine.recordRead(of: node)
            let echo = partner.map { node.writeCount == $0.lastWrite && $0.lastWrite != 0 } ?? false
            guard !echo else { return nil }
            let value: JSONValue
            switch node.content {
            case .value(let current): value = current
            case .missing: value = .null
            case .error: return nil
            }
            guard let transform else { return value }
            let mapped = try transform.evaluate(in: StoreContext(store: store), value: value)
            return mapped.nests(deeperThan: store.configuration.maxJSONDepth - 1) ? nil : mapped
        }
        guard write, let result = result ?? nil else { return }
        let targetNode = store.node(target, create: true)!
        guard targetNode.kind != .computed else { return }
        store.writeValue(targetNode, result, always: false)
        lastWrite = targetNode.writeCount
    }

    func cancel() { dispose() }
}

extension Store {
    /// Records a binding's state before the open transaction first changes it.
    func recordBinding(_ target: String) {
        guard let current, current.bindingsBefore[target] == nil else { return }
        current.bindingsBefore[target] = .some(bindings[target])
        current.bindingOrder.append(target)
    }

    /// Makes `binding` live: its effects, and (with `initialWrite`) its first write. Inside the engine.
    func install(_ binding: KeyBinding, initialWrite: Bool) {
        recordBinding(binding.to)
        bindings[binding.to] = binding
        bindingCount += 1
        let forward = BindingEffect(store: self, source: binding.from, target: binding.to, transform: binding.map)
        binding.forward = forward
        if binding.twoWay {
            recordBinding(binding.from)
            bindings[binding.from] = binding
            let backward = BindingEffect(store: self, source: binding.to, target: binding.from, transform: binding.unmap)
            binding.backward = backward
            forward.partner = backward
            backward.partner = forward
            backward.run(write: false)
        }
        forward.run(write: initialWrite)
        // Cluster mode: the first write is this host's view of the source, which must still hold
        // when the binding is committed (else it is run again with the newer value).
        if initialWrite, let current, current.recordsDependencies {
            for name in valueKeys(readBy: forward) { current.depend(on: name) }
        }
    }

    func uninstall(_ binding: KeyBinding) {
        recordBinding(binding.to)
        bindings[binding.to] = nil
        if binding.twoWay {
            recordBinding(binding.from)
            bindings[binding.from] = nil
        }
        bindingCount -= 1
        binding.forward?.cancel()
        binding.backward?.cancel()
        binding.forward = nil
        binding.backward = nil
    }

    /// The keys that list, graph and describe show for `pattern`: the existing keys matching it and
    /// the keys of bindings matching it that do not exist (yet), sorted.
    func shownKeyNames(matching pattern: KeyPattern) -> [String] {
        var names = Set(keyNames(matching: pattern))
        for binding in bindings.values {
            for name in [binding.from, binding.to] where pattern.matches(name) && view(name) == nil { names.insert(name) }
        }
        return names.sorted(by: JSONValue.utf8Precedes)
    }

    /// The keys that `name`'s value is bound into (a two-way partner included).
    func boundTargets(of name: String) -> [String] {
        Set(bindings.values.filter { $0.from == name || ($0.twoWay && $0.to == name) }.map { $0.source(of: name) })
            .sorted(by: JSONValue.utf8Precedes)
    }

    /// The keys `name` takes its value from: a computed's last dependencies, a bound key's source.
    func inputs(of name: String, ignoringBindingsInto ignored: Set<String>) -> [String] {
        var result: [String] = []
        if let node = view(name)?.node, node.kind == .computed { result = node.dependencyNames }
        if !ignored.contains(name), let binding = bindings[name] { result.append(binding.source(of: name)) }
        return result
    }

    /// A path of inputs from `start` back to `goal` (`start`, ..., `goal`), if any: how a new edge
    /// "goal reads start" would close a cycle.
    func inputPath(from start: String, to goal: String, ignoringBindingsInto ignored: Set<String> = []) -> [String]? {
        var parent: [String: String] = [start: start]
        var stack = [start]
        while let name = stack.popLast() {
            if name == goal {
                var path = [goal]
                var step = goal
                while step != start {
                    step = parent[step]!
                    path.append(step)
                }
                return path.reversed()
            }
            for input in inputs(of: name, ignoringBindingsInto: ignored) where parent[input] == nil {
                parent[input] = name
                stack.append(input)
            }
        }
        return nil
    }
}
