/// The key-name grammar of model.md, checked at compile time so `${a b}` fails early.
enum KeyReferenceName {
    static let maxBytes = 256

    static func isValid(_ name: String) -> Bool {
        guard !name.isEmpty, name.utf8.count <= maxBytes else { return false }
        var segmentLength = 0
        for c in name.unicodeScalars {
            if c == "." {
                guard segmentLength > 0 else { return false }
                segmentLength = 0
            } else if isIdentifierPart(c) || c == "-" {
                segmentLength += 1
            } else {
                return false
            }
        }
        return segmentLength > 0
    }
}
