/// Text for man pages (roff with the -man macros), which obsctl's and obsd's are generated in, from
/// the same tables as their `--help`.
public enum Roff {
    /// `text` as roff prose: backslashes and hyphens escaped, a line that would start with a
    /// control character (`.` or `'`) guarded.
    public static func escaped(_ text: String) -> String {
        let body = text.replacingOccurrences(of: "\\", with: "\\e").replacingOccurrences(of: "-", with: "\\-")
        return body.split(separator: "\n", omittingEmptySubsequences: false)
            .map { $0.hasPrefix(".") || $0.hasPrefix("'") ? "\\&" + $0 : String($0) }
            .joined(separator: "\n")
    }

    /// An option or command word in bold and its placeholder in italics: `--socket PATH`.
    public static func term(_ names: String, _ value: String? = nil) -> String {
        "\\fB\(escaped(names))\\fR" + (value.map { " \\fI\(escaped($0))\\fR" } ?? "")
    }

    /// The page header: `.TH NAME SECTION "" "obsd VERSION" "MANUAL"`, then ragged-right text
    /// without hyphenation (paths and options read better whole).
    public static func header(_ name: String, section: Int, version: String, manual: String) -> String {
        ".TH \(name.uppercased()) \(section) \"\" \"obsd \(version)\" \"\(manual)\"\n.nh\n.ad l\n"
    }

    /// A tagged paragraph: the tag on its line, the text indented under it.
    public static func tagged(_ tag: String, _ text: String) -> String {
        ".TP\n\(tag)\n\(escaped(text))\n"
    }

    /// A section heading and its paragraphs.
    public static func section(_ title: String, _ paragraphs: [String]) -> String {
        ".SH \(title)\n" + paragraphs.map { escaped($0) + "\n" }.joined(separator: ".PP\n")
    }
}
