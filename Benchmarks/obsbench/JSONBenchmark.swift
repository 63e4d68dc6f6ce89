// The "json" section: JSONValue's decoder and encoder against Foundation's JSONSerialization on the
// same lines, in MB/s of JSON text (input bytes when decoding, output bytes when encoding).
//
// The lines imitate protocol.md traffic and are generated from a fixed seed, so every run and every
// machine measures the same bytes: requests (set, get, incr, batch, define, watch, publish, hello)
// with some client-style spacing, events (change, initial, delete, publish, error, synced) with
// nested values, and a string-heavy set with escapes and non-ASCII text.
// Each measurement runs several times and reports the median. Foundation encodes with
// .sortedKeys, because obsd's canonical encoding sorts members too.
import Foundation
import ObsCore

func runJSONBenchmark() {
    let runs = 7
    var generator = BenchmarkRandom(seed: 0x0B5D_BE7C)
    let sets: [(name: String, lines: [String])] = [
        ("requests", (0..<16_000).map { _ in generator.requestLine() }),
        ("events", (0..<10_000).map { _ in generator.eventLine() }),
        ("string-heavy", (0..<5_000).map { _ in generator.stringHeavyLine() }),
    ]

    print("## obsbench json: \(runs) runs each, median, MB/s = 10^6 bytes of JSON text per second")
    print()
    print("| case | obsd MB/s | Foundation MB/s | ratio |")
    print("|---|---:|---:|---:|")
    var sink = 0
    for set in sets {
        let lines = set.lines.map { Array($0.utf8) }
        let data = lines.map { Data($0) }
        let inputBytes = lines.reduce(0) { $0 + $1.count }

        let ours = lines.map { line in
            guard let value = try? JSONValue.parse(line) else { fatalError("obsd rejects \(line)") }
            return value
        }
        let theirs = data.map { line in
            guard let object = try? JSONSerialization.jsonObject(with: line) else {
                fatalError("Foundation rejects \(String(decoding: line, as: UTF8.self))")
            }
            return object
        }

        let obsdDecode = measure(runs: runs) {
            var parsed = 0
            for line in lines where (try? JSONValue.parse(line)) != nil { parsed += 1 }
            return parsed
        }
        let foundationDecode = measure(runs: runs) {
            var parsed = 0
            for line in data where (try? JSONSerialization.jsonObject(with: line)) != nil { parsed += 1 }
            return parsed
        }
        row("decode \(set.name)", inputBytes, obsdDecode, inputBytes, foundationDecode)

        var ourOutputBytes = 0
        var buffer: [UInt8] = []
        for value in ours {
            buffer.removeAll(keepingCapacity: true)
            value.encode(into: &buffer)
            ourOutputBytes += buffer.count
        }
        let theirOutputBytes = theirs.reduce(0) { total, object in
            total + ((try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]))?.count ?? 0)
        }
        let obsdEncode = measure(runs: runs) {
            var written = 0
            for value in ours {
                buffer.removeAll(keepingCapacity: true)
                value.encode(into: &buffer)
                written += buffer.count
            }
            return written
        }
        let foundationEncode = measure(runs: runs) {
            var written = 0
            for object in theirs {
                written += (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]))?.count ?? 0
            }
            return written
        }
        row("encode \(set.name)", ourOutputBytes, obsdEncode, theirOutputBytes, foundationEncode)
        sink &+= obsdDecode.result &+ foundationDecode.result &+ obsdEncode.result &+ foundationEncode.result
    }
    let total = sets.reduce(0) { $0 + $1.lines.reduce(0) { $0 + $1.utf8.count } }
    print()
    print("input: \(sets.map { "\($0.lines.count) \($0.name) lines" }.joined(separator: ", ")), "
          + "\(String(format: "%.1f", Double(total) / 1e6)) MB in all (checksum \(sink))")
}

private func measure(runs: Int, _ body: () -> Int) -> (seconds: Double, result: Int) {
    var times: [Double] = []
    var result = 0
    for _ in 0..<runs {
        let start = ContinuousClock.now
        result = body()
        let elapsed = (ContinuousClock.now - start).components
        times.append(Double(elapsed.seconds) + Double(elapsed.attoseconds) * 1e-18)
    }
    return (times.sorted()[runs / 2], result)
}

private func row(
    _ name: String, _ ourBytes: Int, _ ours: (seconds: Double, result: Int),
    _ theirBytes: Int, _ theirs: (seconds: Double, result: Int)
) {
    let obsd = Double(ourBytes) / ours.seconds / 1e6
    let foundation = Double(theirBytes) / theirs.seconds / 1e6
    print("| \(name) | \(String(format: "%.0f", obsd)) | \(String(format: "%.0f", foundation)) | "
          + "\(String(format: "%.1f", obsd / foundation))x |")
}

/// SplitMix64 plus the vocabulary of generated protocol lines.
private struct BenchmarkRandom {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }
    mutating func pick(_ choices: [String]) -> String { choices[below(choices.count)] }

    static let keys = [
        "sensor.kitchen.temp", "sensor.kitchen.humidity", "sensor.living_room.temp", "volume",
        "net.wifi-5g.ssid", "net.eth0.rx_bytes", "app.window.title", "user.42.name", "price", "qty",
        "total", "media.player.state", "battery.level", "door.front.locked",
    ]
    static let strings = [
        "on", "off", "playing", "Living room", "home-net", "/var/lib/obsd/state.db",
        #"Caf\u00e9 \"Z\u00fcrich\""#, "温度 21.5°C", #"line one\nline two"#, "Grüße aus Köln",
        #"tab\tseparated"#, "🎵 now playing", #"C:\\temp"#,
    ]

    mutating func number() -> String {
        switch below(4) {
        case 0: return String(below(1000))
        case 1: return String(Double(below(4000)) / 8 - 100)
        case 2: return String(Int64(bitPattern: next()) >> 20)
        default: return String(Double(below(1_000_000)) / 1000)
        }
    }

    mutating func scalar() -> String {
        switch below(6) {
        case 0, 1: return number()
        case 2: return below(2) == 0 ? "true" : "false"
        case 3: return "null"
        default: return "\"\(pick(Self.strings))\""
        }
    }

    /// A value as clients store them: mostly scalars, sometimes a small array or nested object.
    mutating func value() -> String {
        switch below(10) {
        case 0:
            return "[" + (0..<below(6)).map { _ in scalar() }.joined(separator: ",") + "]"
        case 1:
            return #"{"lat":47.37,"lon":8.54,"tags":["outdoor","roof"],"meta":{"source":"mqtt","qos":1,"#
                + #""retain":false,"seen":\#(below(100_000))}}"#
        case 2:
            return #"{"artist":"\#(pick(Self.strings))","track":\#(below(20)),"position_ms":\#(below(300_000)),"#
                + #""queue":[\#((0..<below(4)).map { _ in "\"\(pick(Self.strings))\"" }.joined(separator: ","))]}"#
        default:
            return scalar()
        }
    }

    mutating func requestLine() -> String {
        let id = below(100_000)
        let key = pick(Self.keys)
        switch below(20) {
        case 0..<9: return #"{"id":\#(id),"op":"set","key":"\#(key)","value":\#(value())}"#
        case 9: return #"{"id": \#(id), "op": "set", "key": "\#(key)", "value": \#(value()), "if_rev": \#(below(500))}"#
        case 10..<13: return #"{"id":\#(id),"op":"get","key":"\#(key)"}"#
        case 13:
            let ops = (0..<(3 + below(6))).map { _ in
                #"{"op":"set","key":"\#(pick(Self.keys))","value":\#(value())}"#
            }
            return #"{"id":\#(id),"op":"batch","ops":[\#(ops.joined(separator: ","))]}"#
        case 14: return #"{"id":\#(id),"op":"incr","key":"\#(key)","by":\#(number())}"#
        case 15: return #"{"id":\#(id),"op":"define","key":"total","expr":"$price * $qty + $\#(key)"}"#
        case 16:
            return #"{"id":\#(id),"op":"watch","keys":["sensor.**","\#(key)"],"initial":true,"mode":"latest","throttle_ms":250}"#
        case 17: return #"{"id":\#(id),"op":"publish","channel":"alerts","payload":\#(value())}"#
        case 18: return #"{"id":\#(id),"op":"hello","client":"obsctl","protocol":1}"#
        default: return #"{"id":\#(id),"op":"ping"}"#
        }
    }

    mutating func eventLine() -> String {
        let watch = 1 + below(8)
        let rev = below(10_000_000)
        let key = pick(Self.keys)
        switch below(20) {
        case 0..<12:
            return #"{"event":"change","watch":\#(watch),"key":"\#(key)","old":\#(value()),"new":\#(value()),"rev":\#(rev),"created":false}"#
        case 12..<15:
            return #"{"event":"initial","watch":\#(watch),"key":"\#(key)","kind":"value","value":\#(value()),"rev":\#(rev)}"#
        case 15: return #"{"event":"synced","watch":\#(watch),"rev":\#(rev)}"#
        case 16: return #"{"event":"delete","watch":\#(watch),"key":"\#(key)","old":\#(value()),"rev":\#(rev),"reason":"ttl"}"#
        case 17: return #"{"event":"publish","watch":\#(watch),"channel":"alerts","payload":\#(value())}"#
        case 18:
            return #"{"event":"error","watch":\#(watch),"key":"total","error":{"code":"eval_error","message":"division by zero in \"$price / $qty\""},"rev":\#(rev)}"#
        default: return #"{"event":"progress","watch":\#(watch),"rev":\#(rev)}"#
        }
    }

    /// A set of a long text value: chat messages, log lines, song titles.
    mutating func stringHeavyLine() -> String {
        let text = (0..<(8 + below(16))).map { _ in pick(Self.strings) }.joined(separator: " ")
        return #"{"id":\#(below(100_000)),"op":"set","key":"log.last_message","value":"\#(text)"}"#
    }
}
