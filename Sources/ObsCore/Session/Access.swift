/// What a peer may do: `read` allows the read operations (and watches), `write` everything.
public enum Access: String, Sendable {
    case read
    case write
}
