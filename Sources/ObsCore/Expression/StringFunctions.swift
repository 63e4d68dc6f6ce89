// Strings are handled as sequences of Unicode scalars throughout (lengths, offsets, searching),
// matching how comparison orders them and how `pos` counts.
extension Builtin {
    static let strings: [Builtin] = [
        unary("len") { v, call throws(ObsError) in
            switch v {
            case .string(let s): return .int(Int64(s.unicodeScalars.count))
            case .array(let a): return .int(Int64(a.count))
            case .object(let o): return .int(Int64(o.count))
            default: throw call.error("argument must be a string, array or object, got \(v.typeName)")
            }
        },
        unary("upper") { v, call throws(ObsError) in .string(try call.string(v).uppercased()) },
        unary("lower") { v, call throws(ObsError) in .string(try call.string(v).lowercased()) },
        unary("trim") { v, call throws(ObsError) in .string(try call.string(v).trimmingWhitespace()) },
        binary("contains") { haystack, needle, call throws(ObsError) in
            switch haystack {
            case .string(let s):
                let n = try call.string(needle, "the second argument")
                return .bool(n.isEmpty || s.unicodeScalars.firstRange(of: n.unicodeScalars) != nil)
            case .array(let a): return .bool(a.contains(needle))
            case .object(let o): return .bool(o[try call.string(needle, "the second argument")] != nil)
            default: throw call.error("first argument must be a string, array or object, got \(haystack.typeName)")
            }
        },
        binary("starts_with") { s, p, call throws(ObsError) in
            .bool(try call.string(s).unicodeScalars.starts(with: try call.string(p).unicodeScalars))
        },
        binary("ends_with") { s, p, call throws(ObsError) in
            .bool(try call.string(s).unicodeScalars.reversed().starts(with: try call.string(p).unicodeScalars.reversed()))
        },
        variadic("replace", 3...3) { args, call throws(ObsError) in
            var scalars = try call.string(args[0]).unicodeScalars
            let from = try call.string(args[1], "from"), to = try call.string(args[2], "to")
            guard !from.isEmpty else { throw call.error("from must not be empty") }
            scalars.replace(from.unicodeScalars, with: to.unicodeScalars)
            return .string(String(scalars))
        },
        binary("split") { s, sep, call throws(ObsError) in
            let scalars = try call.string(s).unicodeScalars
            let separator = try call.string(sep, "separator")
            // An empty separator splits into single scalars, the only useful reading of it.
            if separator.isEmpty { return .array(scalars.map { .string(String($0)) }) }
            let parts = scalars.split(separator: separator.unicodeScalars, omittingEmptySubsequences: false)
            return .array(parts.map { .string(String($0)) })
        },
        binary("join") { array, sep, call throws(ObsError) in
            let items = try call.array(array)
            let separator = try call.string(sep, "separator")
            return .string(items.map(ValueConversions.string).joined(separator: separator))
        },
        variadic("slice", 2...3) { args, call throws(ObsError) in
            switch args[0] {
            case .string(let s):
                let scalars = Array(s.unicodeScalars)
                let range = try sliceRange(args, count: scalars.count, call)
                var view = String.UnicodeScalarView()
                view.append(contentsOf: scalars[range])
                return .string(String(view))
            case .array(let a):
                return .array(Array(a[try sliceRange(args, count: a.count, call)]))
            default:
                throw call.error("first argument must be a string or an array, got \(args[0].typeName)")
            }
        },
        variadic("pad_left", 2...3) { args, call throws(ObsError) in
            let s = ValueConversions.string(args[0])
            let width = try call.integer(args[1], "width")
            guard width <= ExpressionLimits.maxPadWidth else {
                throw call.error("width is over \(ExpressionLimits.maxPadWidth)")
            }
            var fill: Unicode.Scalar = " "
            if args.count == 3 {
                let f = try call.string(args[2], "fill")
                guard f.unicodeScalars.count == 1 else { throw call.error("fill must be exactly one character") }
                fill = f.unicodeScalars.first!
            }
            let missing = Int(width) - s.unicodeScalars.count
            guard missing > 0 else { return .string(s) }
            var view = String.UnicodeScalarView(repeatElement(fill, count: missing))
            view.append(contentsOf: s.unicodeScalars)
            return .string(String(view))
        },
        variadic("format", 1...Int.max) { args, call throws(ObsError) in
            .string(try FormatTemplate.render(try call.string(args[0], "format"), Array(args.dropFirst()), call))
        },
    ]

    /// Python-style slice bounds: negative counts from the end, out-of-range clamps.
    private static func sliceRange(_ args: [JSONValue], count: Int, _ call: BuiltinCall) throws(ObsError) -> Range<Int> {
        func resolve(_ v: JSONValue, _ what: String) throws(ObsError) -> Int {
            let i = try call.integer(v, what)
            let n = Int64(count)
            return Int(i < 0 ? Swift.max(0, n + i) : Swift.min(n, i))
        }
        let start = try resolve(args[1], "start")
        let end = args.count == 3 ? try resolve(args[2], "end") : count
        return start..<Swift.max(start, end)
    }
}
