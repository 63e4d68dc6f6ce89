import Foundation

/// strftime-style rendering of a timestamp, in UTC unless the format starts with a zone:
/// `"TZ=Europe/Paris %H:%M"` (any IANA name, or `TZ=local` for the daemon's zone). The C locale's
/// names are used, so output does not depend on the environment.
enum TimeFormat {
    /// Year 1 to year 9999, the range every conversion can print.
    static let range: ClosedRange<Double> = -62_135_596_800 ... 253_402_300_799.999

    static func render(_ timestamp: Double, _ format: String, _ call: BuiltinCall) throws(ObsError) -> String {
        guard range.contains(timestamp) else { throw call.error("timestamp is outside years 1 to 9999") }
        var pattern = Substring(format)
        var offset = 0
        var zoneName = "UTC"
        if pattern.hasPrefix("TZ=") {
            let spec = pattern.dropFirst(3).prefix { $0 != " " }
            pattern = pattern.dropFirst(3 + spec.count)
            if pattern.first == " " { pattern = pattern.dropFirst() }
            let zone: TimeZone? = spec == "local" ? TimeZone.current : TimeZone(identifier: String(spec))
            guard let zone else { throw call.error("unknown time zone \(Printer.quote(String(spec)))") }
            let date = Date(timeIntervalSince1970: timestamp)
            offset = zone.secondsFromGMT(for: date)
            zoneName = zone.abbreviation(for: date) ?? zone.identifier
        }
        let whole = timestamp.rounded(.down)
        let time = BrokenDownTime(seconds: Int64(whole) + Int64(offset), fraction: timestamp - whole)
        return try expand(pattern, time, offset: offset, zoneName: zoneName, epoch: Int64(whole), call)
    }

    private static func expand(_ pattern: Substring, _ t: BrokenDownTime, offset: Int, zoneName: String,
                               epoch: Int64, _ call: BuiltinCall) throws(ObsError) -> String {
        var out = ""
        var iterator = pattern.makeIterator()
        while let c = iterator.next() {
            guard c == "%" else {
                out.append(c)
                continue
            }
            guard let conversion = iterator.next() else { throw call.error("format ends with a lone '%'") }
            switch conversion {
            case "a": out += String(weekdays[t.weekday].prefix(3))
            case "A": out += weekdays[t.weekday]
            case "b", "h": out += String(months[t.month - 1].prefix(3))
            case "B": out += months[t.month - 1]
            case "c": out += try expand("%a %b %e %H:%M:%S %Y", t, offset: offset, zoneName: zoneName, epoch: epoch, call)
            case "C": out += pad(t.year / 100, 2)
            case "d": out += pad(t.day, 2)
            case "D": out += try expand("%m/%d/%y", t, offset: offset, zoneName: zoneName, epoch: epoch, call)
            case "e": out += pad(t.day, 2, with: " ")
            case "f": out += pad(Int(t.fraction * 1_000_000), 6)
            case "F": out += pad(t.year, 4) + "-" + pad(t.month, 2) + "-" + pad(t.day, 2)
            case "H": out += pad(t.hour, 2)
            case "I": out += pad(t.hour12, 2)
            case "j": out += pad(t.yearDay, 3)
            case "k": out += pad(t.hour, 2, with: " ")
            case "l": out += pad(t.hour12, 2, with: " ")
            case "L": out += pad(Int(t.fraction * 1_000), 3)
            case "m": out += pad(t.month, 2)
            case "M": out += pad(t.minute, 2)
            case "n": out += "\n"
            case "p": out += t.hour < 12 ? "AM" : "PM"
            case "R": out += pad(t.hour, 2) + ":" + pad(t.minute, 2)
            case "s": out += String(epoch)
            case "S": out += pad(t.second, 2)
            case "t": out += "\t"
            case "T": out += pad(t.hour, 2) + ":" + pad(t.minute, 2) + ":" + pad(t.second, 2)
            case "u": out += String(t.weekday == 0 ? 7 : t.weekday)
            case "w": out += String(t.weekday)
            case "y": out += pad(t.year % 100, 2)
            case "Y": out += String(t.year)
            case "z":
                let minutes = abs(offset) / 60
                out += (offset < 0 ? "-" : "+") + pad(minutes / 60, 2) + pad(minutes % 60, 2)
            case "Z": out += zoneName
            case "%": out += "%"
            default: throw call.error("unknown conversion '%\(conversion)'")
            }
        }
        return out
    }

    private static func pad(_ n: Int, _ width: Int, with fill: Character = "0") -> String {
        let digits = String(n)
        return digits.count >= width ? digits : String(repeating: fill, count: width - digits.count) + digits
    }

    private static let weekdays = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]
    private static let months = ["January", "February", "March", "April", "May", "June", "July", "August",
                                 "September", "October", "November", "December"]
}

/// A civil date and time from seconds since the epoch (proleptic Gregorian calendar).
struct BrokenDownTime {
    let year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int
    let weekday: Int, yearDay: Int
    let fraction: Double

    init(seconds: Int64, fraction: Double) {
        let days = Int(seconds.floorDivided(by: 86_400))
        let secondOfDay = Int(seconds - Int64(days) * 86_400)
        (year, month, day) = BrokenDownTime.civil(fromDays: days)
        hour = secondOfDay / 3_600
        minute = secondOfDay % 3_600 / 60
        second = secondOfDay % 60
        // 1970-01-01 was a Thursday (4, counting Sunday as 0).
        weekday = ((days + 4) % 7 + 7) % 7
        yearDay = days - BrokenDownTime.days(fromCivil: year, 1, 1) + 1
        self.fraction = fraction
    }

    var hour12: Int { hour % 12 == 0 ? 12 : hour % 12 }

    /// Howard Hinnant's days_from_civil / civil_from_days.
    static func civil(fromDays z: Int) -> (Int, Int, Int) {
        let z = z + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (m <= 2 ? 1 : 0), m, d)
    }

    static func days(fromCivil year: Int, _ month: Int, _ day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }
}

extension Int64 {
    fileprivate func floorDivided(by d: Int64) -> Int64 {
        let q = self / d
        return (self % d != 0 && (self < 0) != (d < 0)) ? q - 1 : q
    }
}
