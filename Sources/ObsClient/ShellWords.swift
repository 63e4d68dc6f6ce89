/// Splits a line into words the way a POSIX shell quotes (no expansion): 'single quotes' keep
/// everything, "double quotes" honour \" \\ \$ \` , and a backslash outside quotes escapes the next
/// character. An unquoted # at the start of a word begins a comment.
public enum ShellWords {
    public static func split(_ line: String) throws(UsageError) -> [String] {
        var words: [String] = []
        var word = ""
        var inWord = false
        var iterator = Array(line).makeIterator()
        while let c = iterator.next() {
            switch c {
            case " ", "\t", "\r":
                if inWord { words.append(word) }
                word = ""
                inWord = false
            case "#" where !inWord:
                return words
            case "'":
                inWord = true
                while true {
                    guard let next = iterator.next() else { throw UsageError("unterminated single quote") }
                    if next == "'" { break }
                    word.append(next)
                }
            case "\"":
                inWord = true
                while true {
                    guard let next = iterator.next() else { throw UsageError("unterminated double quote") }
                    if next == "\"" { break }
                    if next == "\\" {
                        guard let escaped = iterator.next() else { throw UsageError("unterminated double quote") }
                        if !"\"\\$`".contains(escaped) { word.append("\\") }
                        word.append(escaped)
                    } else {
                        word.append(next)
                    }
                }
            case "\\":
                inWord = true
                guard let escaped = iterator.next() else { throw UsageError("a backslash ends the line") }
                word.append(escaped)
            default:
                inWord = true
                word.append(c)
            }
        }
        if inWord { words.append(word) }
        return words
    }
}
