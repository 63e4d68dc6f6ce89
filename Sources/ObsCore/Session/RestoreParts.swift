/// The parts of a `restore` a connection has sent with `more: true`: a state larger than a request
/// line may be restored, still as one transaction, by sending it in parts. They are kept as the
/// session received them, counted by their request lines' bytes against one limit for every
/// connection together (`max_restore_bytes`: many connections cannot multiply it), and dropped
/// with their connection, or when a part would pass the limit.
struct RestoreParts {
    private(set) var keys: [JSONValue] = []
    private(set) var bindings: [JSONValue] = []
    private(set) var count = 0
    /// The bytes these parts count for in `held`.
    private var bytes = 0

    /// Keys and bindings received so far.
    var items: Int { keys.count + bindings.count }

    /// Adds a part of `size` bytes (its request line) to these parts and to `held`, the bytes of
    /// every connection's parts. Past `limit`, drops these parts instead and throws `too_large`.
    mutating func add(keys: [JSONValue], bindings: [JSONValue], size: Int, held: inout Int, limit: Int) throws(ObsError) {
        guard held + size <= limit else {
            drop(from: &held)
            throw ObsError(.tooLarge, "restore: the parts sent add up to more than \(limit) bytes (max_restore_bytes, every connection's together); this connection's were dropped and nothing was restored",
                           details: ["limit": "max_restore_bytes"])
        }
        held += size
        bytes += size
        count += 1
        self.keys += keys
        self.bindings += bindings
    }

    /// Empties these parts, taking their bytes out of `held`.
    mutating func drop(from held: inout Int) {
        held -= bytes
        self = RestoreParts()
    }
}
