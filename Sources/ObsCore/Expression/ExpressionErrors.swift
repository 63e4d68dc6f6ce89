/// A parse_error at scalar offset `pos`, with the offset in the message and in details.
func parseError(_ message: String, at pos: Int) -> ObsError {
    ObsError(.parseError, "\(message) at \(pos)", details: ["pos": .int(Int64(pos))])
}

/// An eval_error at scalar offset `pos`, with the offset in the message and in details.
func evalError(_ message: String, at pos: Int) -> ObsError {
    ObsError(.evalError, "\(message) at \(pos)", details: ["pos": .int(Int64(pos))])
}
