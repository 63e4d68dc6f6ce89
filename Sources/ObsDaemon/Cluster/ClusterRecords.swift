// How obsd's state is laid out under its etcd prefix, and how one record reads and writes. Every
// record is one etcd key whose value is a canonical JSON object, so that etcdctl shows it readably:
//
//   PREFIX k/NAME      a value key: {"value":V} with "expires_at" (wall-clock seconds) for a TTL and
//                      "owner" ("HOST/SESSION") for an ephemeral key, which is also put with the
//                      owning host's lease; "bindings_rev" when it was put on its own, without
//                      a transaction's compares: the mod revision of m/bindings its host had applied
//   PREFIX d/NAME      a computed key's definition: {"expr":"..."}
//   PREFIX b/TARGET    a binding, under its target: {"from":...,"to":...} with "map", "two_way", "unmap"
//   PREFIX m/bindings  bumped by every transaction that changes a binding (its mod revision is what
//                      writes compare, so none is decided without the bindings its host had)
//   PREFIX m/graph     put by every transaction that changes a definition or a binding, which
//                      compares its mod revision: such changes are made one at a time, so two
//                      raced from two hosts cannot close a cycle together
//   PREFIX m/reason    put in a transaction whose deletes no client asked for: "ttl" or "ephemeral"
//   PREFIX m/publish   a channel message: {"channel":...,"payload":...}
//
// A record obsd cannot read (written by something else under the prefix) is skipped and counted,
// never applied.
#if canImport(Glibc)
import Glibc
#endif
import EtcdClient
import ObsCore

struct ClusterRecords {
    let prefix: [UInt8]
    /// Names this host's incarnation in ephemeral keys' owners: a host that restarts is another
    /// host (its old keys go with its old lease).
    let host: String
    /// The keys of the meta records, made once: every write reads the first. `graphEpoch` is put by
    /// every transaction that changes a definition or a binding, and compared by each of them.
    let bindingsEpoch: [UInt8], graphEpoch: [UInt8], reasonKey: [UInt8], publishKey: [UInt8]

    init(prefix: [UInt8], host: String) {
        self.prefix = prefix
        self.host = host
        bindingsEpoch = Self.key(prefix, .meta, "bindings")
        graphEpoch = Self.key(prefix, .meta, "graph")
        reasonKey = Self.key(prefix, .meta, "reason")
        publishKey = Self.key(prefix, .meta, "publish")
    }

    enum Kind: UInt8 {
        case value = 0x6B  // "k"
        case definition = 0x64  // "d"
        case binding = 0x62  // "b"
        case meta = 0x6D  // "m"
    }

    /// The etcd key of a record.
    func key(_ kind: Kind, _ name: String) -> [UInt8] {
        Self.key(prefix, kind, name)
    }

    private static func key(_ prefix: [UInt8], _ kind: Kind, _ name: String) -> [UInt8] {
        var key: [UInt8] = []
        key.reserveCapacity(prefix.count + 2 + name.utf8.count)
        key.append(contentsOf: prefix)
        key.append(kind.rawValue)
        key.append(UInt8(ascii: "/"))
        key.append(contentsOf: name.utf8)
        return key
    }

    /// The kind and name of an etcd key under the prefix, if it is one of obsd's.
    func parse(_ key: [UInt8]) -> (Kind, String)? {
        guard key.count > prefix.count + 2, key.starts(with: prefix), key[prefix.count + 1] == UInt8(ascii: "/"),
              let kind = Kind(rawValue: key[prefix.count]),
              let name = String(validating: key[(prefix.count + 2)...], as: UTF8.self) else { return nil }
        return (kind, name)
    }

    // MARK: Encoding

    /// A value key's record; `bindingsRev` for one put without compares (EtcdLog.request(for:)).
    /// A value key's record: `{"bindings_rev":N,"expires_at":T,"owner":"HOST/SESSION","value":V}`,
    /// each field but `value` only when there is one. Written field by field, in the order the
    /// general encoder sorts an object's names (so the bytes are the same), without building the
    /// object: this runs for every write a host sends.
    func value(_ key: StoredKey, owner: String?, bindingsRev: Int64? = nil) -> [UInt8] {
        var record: [UInt8] = []
        record.reserveCapacity(32)
        record.append(UInt8(ascii: "{"))
        if let bindingsRev {
            record.append(#""bindings_rev":"#)
            JSONValue.int(bindingsRev).encode(into: &record)
            record.append(UInt8(ascii: ","))
        }
        if let expiresAt = key.expiresAt {
            record.append(#""expires_at":"#)
            JSONValue.double(expiresAt).encode(into: &record)
            record.append(UInt8(ascii: ","))
        }
        if let owner {
            record.append(#""owner":"#)
            JSONValue.string(owner).encode(into: &record)
            record.append(UInt8(ascii: ","))
        }
        record.append(#""value":"#)
        key.value.encode(into: &record)
        record.append(UInt8(ascii: "}"))
        return record
    }

    /// The owner of an ephemeral key set by `session` of this host, as its record says it.
    func owner(session: UInt64) -> String {
        "\(host)/\(session)"
    }

    func definition(_ definition: StoredDefinition) -> [UInt8] {
        Array(JSONValue.object(["expr": .string(definition.expr)]).encoded.utf8)
    }

    func binding(_ binding: StoredBinding) -> [UInt8] {
        var object: [String: JSONValue] = ["from": .string(binding.from), "to": .string(binding.to), "two_way": .bool(binding.twoWay)]
        if let map = binding.map { object["map"] = .string(map) }
        if let unmap = binding.unmap { object["unmap"] = .string(unmap) }
        return Array(JSONValue.object(object).encoded.utf8)
    }

    func publish(channel: String, payload: JSONValue) -> [UInt8] {
        Array(JSONValue.object(["channel": .string(channel), "payload": payload]).encoded.utf8)
    }

    // MARK: Decoding

    /// Why a record cannot be read.
    struct Unreadable: Error {
        var message: String
    }

    private func object(_ bytes: [UInt8]) throws(Unreadable) -> [String: JSONValue] {
        let parsed: JSONValue
        do {
            parsed = try JSONValue.parse(bytes)
        } catch {
            throw Unreadable(message: "not JSON (\(error))")
        }
        guard case .object(let object) = parsed else { throw Unreadable(message: "not a JSON object") }
        return object
    }

    /// Refuses a name that is not one a client could have written: a record put under the prefix
    /// by something else would otherwise give every host a key no request can name, and a dump
    /// that `restore` refuses.
    private func validName(_ name: String, _ what: String = "key") throws(Unreadable) {
        guard Store.isValidKeyName(name) else { throw Unreadable(message: "\(what) name \"\(name)\" is not a valid name") }
    }

    /// A value key as this host applies it: its revisions are etcd's; an ephemeral key set through
    /// this incarnation keeps its session as owner, another host's is `StoredKey.remoteOwner`.
    func storedKey(_ name: String, _ kv: KeyValue) throws(Unreadable) -> StoredKey {
        try writtenKey(name, kv).key
    }

    /// A value key, the bindings revision its writer had applied when it was put without
    /// compares, and the owner its record names as written (another host's ephemeral key's is
    /// written with it again by a write that keeps the owner: EtcdLog's `foreignOwners`).
    func writtenKey(_ name: String, _ kv: KeyValue) throws(Unreadable) -> (key: StoredKey, bindingsRev: Int64?, owner: String?) {
        try validName(name)
        if let (value, bindingsRev) = Self.plainRecord(kv.value) {
            return (StoredKey(key: name, value: value, rev: UInt64(kv.modRevision), createdRev: UInt64(kv.createRevision),
                              version: UInt64(kv.version)), bindingsRev, nil)
        }
        let object = try object(kv.value)
        guard let value = object["value"] else { throw Unreadable(message: "no \"value\"") }
        var key = StoredKey(key: name, value: value, rev: UInt64(kv.modRevision), createdRev: UInt64(kv.createRevision),
                            version: UInt64(kv.version), expiresAt: object["expires_at"]?.doubleValue)
        let owner = object["owner"]?.stringValue
        if let owner {
            let parts = owner.split(separator: "/")
            if parts.count == 2, parts[0] == host, let session = UInt64(parts[1]) {
                key.owner = session
            } else {
                key.owner = StoredKey.remoteOwner
            }
        }
        return (key, object["bindings_rev"]?.intValue, owner)
    }

    /// The record of a plain key as hosts write it, `{"value":V}` or `{"bindings_rev":N,"value":V}`
    /// (every write but those of TTL and ephemeral keys), read without building the object: its
    /// value and bindings revision. Nil for any other bytes, which the general reading takes (and
    /// reads the same, where these would be read: V one JSON value, N digits as JSON writes them).
    static func plainRecord(_ bytes: [UInt8]) -> (value: JSONValue, bindingsRev: Int64?)? {
        bytes.withUnsafeBytes { record -> (JSONValue, Int64?)? in
            var position = 0
            func skip(_ expected: StaticString) -> Bool {
                let count = expected.utf8CodeUnitCount
                guard record.count - position >= count,
                      memcmp(record.baseAddress! + position, expected.utf8Start, count) == 0 else { return false }
                position += count
                return true
            }
            var bindingsRev: Int64?
            if skip(#"{"bindings_rev":"#) {
                let start = position
                var number: Int64 = 0
                while position < record.count, position - start < 18, record[position] >= UInt8(ascii: "0"), record[position] <= UInt8(ascii: "9") {
                    number = number * 10 + Int64(record[position] - UInt8(ascii: "0"))
                    position += 1
                }
                guard position > start, record[start] != UInt8(ascii: "0") || position == start + 1, skip(#","value":"#) else { return nil }
                bindingsRev = number
            } else if !skip(#"{"value":"#) {
                return nil
            }
            guard position < record.count - 1, record[record.count - 1] == UInt8(ascii: "}"),
                  let value = try? JSONValue.parse(UnsafeRawBufferPointer(rebasing: record[position..<(record.count - 1)]),
                                                   maxDepth: JSONValue.defaultMaxDepth - 1) else { return nil }
            return (value, bindingsRev)
        }
    }

    func storedDefinition(_ name: String, _ kv: KeyValue) throws(Unreadable) -> StoredDefinition {
        try validName(name)
        guard let expr = try object(kv.value)["expr"]?.stringValue else { throw Unreadable(message: "no string \"expr\"") }
        try compiles(expr, "expr", allowValue: false)
        return StoredDefinition(key: name, expr: expr, createdRev: UInt64(kv.createRevision))
    }

    /// A binding's `map` or `unmap`, or a definition's `expr`, that this version cannot compile (a
    /// newer version's function, or garbage) makes the record unreadable: installed, a binding
    /// would copy its source unchanged, and a computed key would hold an error no `define` made.
    private func compiles(_ source: String, _ field: String, allowValue: Bool) throws(Unreadable) {
        do {
            _ = try Expression.compile(source, allowValue: allowValue)
        } catch {
            throw Unreadable(message: "its \"\(field)\" does not compile: \(error.message)")
        }
    }

    /// An optional expression member: absent or null is none; anything but a string that
    /// compiles makes the record unreadable.
    private func expression(_ object: [String: JSONValue], _ field: String) throws(Unreadable) -> String? {
        guard let value = object[field], value != .null else { return nil }
        guard let source = value.stringValue else { throw Unreadable(message: "its \"\(field)\" is not a string") }
        try compiles(source, field, allowValue: true)
        return source
    }

    func storedBinding(_ target: String, _ kv: KeyValue) throws(Unreadable) -> StoredBinding {
        let object = try object(kv.value)
        guard let from = object["from"]?.stringValue, let to = object["to"]?.stringValue, to == target else {
            throw Unreadable(message: "no string \"from\" and \"to\" naming its target")
        }
        try validName(from)
        try validName(to)
        guard from != to else { throw Unreadable(message: "it binds \(to) to itself") }
        let twoWay = object["two_way"] ?? .bool(false)
        guard let twoWay = twoWay.boolValue else { throw Unreadable(message: "its \"two_way\" is not true or false") }
        return StoredBinding(from: from, to: to, map: try expression(object, "map"), twoWay: twoWay, unmap: try expression(object, "unmap"))
    }

    func published(_ kv: KeyValue) throws(Unreadable) -> (channel: String, payload: JSONValue) {
        let object = try object(kv.value)
        guard let channel = object["channel"]?.stringValue else { throw Unreadable(message: "no string \"channel\"") }
        try validName(channel, "channel")
        return (channel, object["payload"] ?? .null)
    }
}

/// The mod revision of every record (etcd key) under the prefix, as a host applied them; with
/// how many are definitions. A key hashes as one run of bytes: an array of bytes hashes byte by
/// byte, which cost more than the rest of a lookup, and a host looks up several for every write.
struct RecordRevisions: Equatable {
    private struct Key: Hashable {
        let bytes: [UInt8]
        func hash(into hasher: inout Hasher) { bytes.withUnsafeBytes { hasher.combine(bytes: $0) } }
    }

    private var revisions: [Key: Int64] = [:]
    /// Where a key's kind is (`ClusterRecords.Kind`): after the prefix.
    private let kindOffset: Int
    /// How many of the records are definitions.
    private(set) var definitions = 0

    init(prefix: [UInt8]) { kindOffset = prefix.count }

    subscript(key: [UInt8]) -> Int64? {
        get { revisions[Key(bytes: key)] }
        set {
            let old = newValue.map { revisions.updateValue($0, forKey: Key(bytes: key)) } ?? revisions.removeValue(forKey: Key(bytes: key))
            if (old == nil) != (newValue == nil), key.count > kindOffset, key[kindOffset] == ClusterRecords.Kind.definition.rawValue {
                definitions += newValue == nil ? -1 : 1
            }
        }
    }

    /// The newest revision of any record.
    var newest: Int64? { revisions.values.max() }

    mutating func removeAll() {
        revisions.removeAll()
        definitions = 0
    }
}
