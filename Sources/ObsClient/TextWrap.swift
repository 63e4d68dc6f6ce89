/// Help text wrapped for a terminal, as obsctl's and obsd's `--help` print it.
public enum TextWrap {
    /// Wraps `text` at `width` columns; continuation lines start with `indent` spaces; the first
    /// line already has `first` columns before it.
    public static func wrap(_ text: String, width: Int = 100, indent: Int, first: Int) -> String {
        var lines: [String] = []
        var line = ""
        var used = first
        for word in text.split(separator: " ") {
            if !line.isEmpty, used + 1 + word.count > width {
                lines.append(line)
                line = ""
                used = indent
            }
            if !line.isEmpty {
                line += " "
                used += 1
            }
            line += word
            used += word.count
        }
        lines.append(line)
        return lines.joined(separator: "\n" + String(repeating: " ", count: indent))
    }
}
