/// The parts of a `restore` a connection has sent with `more: true`: a state larger than a request
/// line may be restored, still as one transaction, by sending it in parts. They are kept as the
/// session received them, counted in encoded bytes against a limit (`max_restore_bytes`), and
/// dropped with the connection, or at the limit.
struct RestoreParts {
    private(set) var keys: [JSONValue] = []
    private(set) var bindings: [JSONValue] = []
    private(set) var count = 0
    private var bytes = 0

    /// Keys and bindings received so far.
    var items: Int { keys.count + bindings.count }

    /// Adds a part of `size` bytes (its request line); past `limit` bytes in all, drops every part
    /// and throws `too_large`.
    mutating func add(keys: [JSONValue], bindings: [JSONValue], size: Int, limit: Int) throws(ObsError) {
        guard bytes + size <= limit else {
            self = RestoreParts()
            throw ObsError(.tooLarge, "restore: the parts sent add up to more than \(limit) bytes (max_restore_bytes); they were dropped and nothing was restored")
        }
        bytes += size
        count += 1
        self.keys += keys
        self.bindings += bindings
    }
}
