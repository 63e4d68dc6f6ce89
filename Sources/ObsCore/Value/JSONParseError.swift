/// Why a JSON document was rejected, and the 0-based byte offset where that was detected.
public struct JSONParseError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What went wrong, e.g. "trailing comma in array".
    public var message: String
    /// The 0-based byte offset of the offending byte, token or sequence (the input length when the
    /// input ended too early).
    public var offset: Int

    /// Creates an error with a message and the byte offset it refers to.
    public init(_ message: String, offset: Int) {
        self.message = message
        self.offset = offset
    }

    /// "<message> at byte <offset>".
    public var description: String { "\(message) at byte \(offset)" }

    /// The wire error this becomes: `bad_json` with the description as its message.
    public var obsError: ObsError { ObsError(.badJSON, description) }
}
