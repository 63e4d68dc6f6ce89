/// Durations as docs/cli.md writes them: `250ms`, `5s`, `2m`, `1h`, or a bare number of seconds.
public enum DurationText {
    /// Seconds, or nil when `text` is not a duration (negative and non-finite ones included, and
    /// those whose milliseconds do not fit the protocol's 64-bit `*_ms` fields).
    public static func seconds(_ text: String) -> Double? {
        let units: [(suffix: String, seconds: Double)] = [("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600)]
        var number = Substring(text)
        var scale = 1.0
        for unit in units where text.hasSuffix(unit.suffix) {
            number = text.dropLast(unit.suffix.count)
            scale = unit.seconds
            break
        }
        // Double() alone would accept "inf", "nan", "0x1p3" and "-1"; a dot needs digits on both sides.
        guard !number.isEmpty, number.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }),
              number.filter({ $0 == "." }).count <= 1, number.first != ".", number.last != ".",
              let value = Double(number), value * scale * 1000 < Double(Int64.max) else { return nil }
        return value * scale
    }
}
