/// What an expression reads while it evaluates. The store implements it and records dependencies.
public protocol ExpressionContext {
    /// The value of key `name` (nil when missing); a dependency. Throws an ObsError (.evalError or .cycle) when the key is a computed in the error state.
    func value(ofKey name: String) throws(ObsError) -> JSONValue?
    /// Like value(ofKey:) but not a dependency (peek).
    func peek(key name: String) throws(ObsError) -> JSONValue?
    /// Whether key `name` exists; a dependency.
    func exists(key name: String) -> Bool
    /// Every key matching `pattern` (`*` one segment, `**` zero or more) with its value, sorted by key name; depends on the set of matching keys and their values. Throws .badKey for a malformed pattern (surfaced as eval_error).
    func match(pattern: String) throws(ObsError) -> [(key: String, value: JSONValue)]
    /// Seconds since the epoch: the injectable clock.
    var now: Double { get }
}
