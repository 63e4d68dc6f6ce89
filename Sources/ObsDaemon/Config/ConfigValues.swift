import ObsClient
import ObsCore

// Parsers for the value syntaxes shared by the configuration file and the command line. Each
// returns nil for a bad value; the caller knows the setting and the line, so it writes the message.

enum ConfigValues {
    /// `250ms`, `5s`, `2m`, `1h`, or a bare number of seconds (fractions allowed: `0.5`), in seconds:
    /// the same grammar as obsctl's, from the same code.
    static func duration(_ text: String) -> Double? {
        DurationText.seconds(text)
    }

    /// A byte count: a whole number, optionally with `K`/`KiB`, `M`/`MiB` or `G`/`GiB` (powers of 1024).
    static func byteCount(_ text: String) -> Int? {
        let units: [(suffix: String, shift: Int)] = [
            ("KiB", 10), ("MiB", 20), ("GiB", 30), ("K", 10), ("M", 20), ("G", 30),
        ]
        for unit in units where text.hasSuffix(unit.suffix) {
            guard let count = count(text.dropLast(unit.suffix.count)) else { return nil }
            let (result, overflow) = count.multipliedReportingOverflow(by: 1 << unit.shift)
            return overflow ? nil : result
        }
        return count(Substring(text))
    }

    /// etcd endpoints: `http://` or `https://` URLs, comma-separated.
    static func endpoints(_ text: String) -> [String]? {
        let endpoints = text.split(separator: ",").map { String($0.filter { $0 != " " }) }
        guard !endpoints.isEmpty, endpoints.allSatisfy({ ($0.hasPrefix("http://") || $0.hasPrefix("https://")) && $0.count > 8 }) else {
            return nil
        }
        return endpoints
    }

    /// A whole number of at least 1.
    static func count(_ text: Substring) -> Int? {
        guard !text.isEmpty, text.allSatisfy({ $0.isASCII && $0.isNumber }), let value = Int(text), value > 0 else {
            return nil
        }
        return value
    }

    /// Permission bits in octal, `0660` or `660`, at most 0777.
    static func mode(_ text: String) -> UInt32? {
        guard !text.isEmpty, text.count <= 4, let value = UInt32(text, radix: 8), value <= 0o777 else { return nil }
        return value
    }

    /// `user:NAME:ACCESS, group:NAME:ACCESS, ...` with ACCESS `read` or `write`.
    static func allow(_ text: String) -> [AllowRule]? {
        var rules: [AllowRule] = []
        for item in text.split(separator: ",", omittingEmptySubsequences: false) {
            let parts = item.trimmingSpaces().split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count == 3, !parts[1].isEmpty, let access = Access(rawValue: String(parts[2])) else {
                return nil
            }
            switch parts[0] {
            case "user": rules.append(AllowRule(.user(String(parts[1])), access))
            case "group": rules.append(AllowRule(.group(String(parts[1])), access))
            default: return nil
            }
        }
        return rules
    }
}

extension StringProtocol {
    /// The text without leading and trailing spaces and tabs.
    func trimmingSpaces() -> Substring {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let start = firstIndex(where: { !isSpace($0) }) else { return Substring() }
        let end = lastIndex(where: { !isSpace($0) })!
        return Substring(self[start...end])
    }
}
