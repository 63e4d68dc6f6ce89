import XCTest
@testable import ObsCore
import TestSupport

/// Random syntax trees covering every node kind, operator and function, from a seed so every
/// failure reproduces.
struct TreeGenerator {
    private var random: SplitMix64

    init(seed: UInt64) { random = SplitMix64(seed: seed) }

    private static let keyNames = ["a", "b", "a.b", "sensor.kitchen.temp", "x-1", "net.wifi-5g.ssid", "_", "9", "n"]
    private static let memberNames = ["x", "temp", "true", "null", "value", "a b", "", "é", "_1", "\"q\""]
    private static let identifiers = ["x", "temp", "true", "null", "value", "len", "_1", "A"]
    private static let strings = ["", "a", "it's", "say \"hi\"", "back\\slash", "tab\there", "new\nline", "\u{01}", "é😀", "{}"]
    private static let doubles: [Double] = [0.5, -2.5, 1e3, 1e-7, 1e300, -0.0, 0.1, 123456.789, .leastNonzeroMagnitude, 9007199254740992, .greatestFiniteMagnitude]
    private static let ints: [Int64] = [0, 1, -1, 42, -7, .max, .min, 1 << 53]

    mutating func below(_ bound: Int) -> Int { Int(random.next() % UInt64(bound)) }

    mutating func pick<T>(_ items: [T]) -> T { items[below(items.count)] }

    mutating func tree(depth: Int) -> Syntax {
        let choice = depth <= 0 ? below(7) : below(16)
        let node: SyntaxNode
        switch choice {
        case 0: node = pick([.null, .bool(true), .bool(false)])
        case 1: node = .int(pick(TreeGenerator.ints))
        case 2: node = .double(pick(TreeGenerator.doubles))
        case 3: node = .string(pick(TreeGenerator.strings))
        case 4, 5: node = .key(pick(TreeGenerator.keyNames))
        case 6: node = .value
        case 7: node = .array((0..<below(4)).map { _ in tree(depth: depth - 1) })
        case 8:
            var names = TreeGenerator.memberNames
            node = .object((0..<below(4)).map { _ in
                SyntaxNode.Member(name: names.remove(at: below(names.count)), value: tree(depth: depth - 1))
            })
        case 9: node = .member(tree(depth: depth - 1), pick(TreeGenerator.identifiers))
        case 10: node = .index(tree(depth: depth - 1), tree(depth: depth - 1))
        case 11: node = .unary(pick([.not, .negate]), tree(depth: depth - 1))
        case 12, 13: node = .binary(pick(BinaryOperator.allCases), tree(depth: depth - 1), tree(depth: depth - 1))
        case 14: node = .conditional(tree(depth: depth - 1), tree(depth: depth - 1), tree(depth: depth - 1))
        default:
            let builtin = pick(Builtin.all)
            let count = builtin.arity.lowerBound + below(min(builtin.arity.upperBound, 3) - builtin.arity.lowerBound + 1)
            node = .call(builtin, (0..<count).map { _ in tree(depth: depth - 1) })
        }
        return Syntax(node, pos: 0)
    }
}

final class ExpressionRoundTripTests: XCTestCase {
    func test_description_parsesBackToTheSameTree() throws {
        for seed in UInt64(1)...2_000 {
            var generator = TreeGenerator(seed: seed)
            let original = generator.tree(depth: 6)
            let printed = ObsCore.Expression(source: "", syntax: original).description
            // Foundation also declares an `Expression`, so the module name disambiguates.
            let parsed: ObsCore.Expression
            do throws(ObsError) {
                parsed = try Expression.compile(printed, allowValue: true)
            } catch {
                XCTFail("seed \(seed): \(printed) does not parse: \(error)")
                continue
            }
            XCTAssertEqual(parsed.tree, original, "seed \(seed): \(printed) parsed as \(parsed)")
            XCTAssertEqual(parsed.description, printed, "seed \(seed)")
        }
    }

    func test_description_ofTheSpecExamplesIsCanonical() throws {
        let rows: [(String, String)] = [
            ("$price*$qty", "$price * $qty"),
            ("$battery.percent < 20 ? 'low' : \"ok\"", "$battery.percent < 20 ? \"low\" : \"ok\""),
            ("${weather}.temp ?? \"n/a\"", "${weather}.temp ?? \"n/a\""),
            ("${weather}[\"temp\"]", "$weather[\"temp\"]"),
            ("(1 + 2) * 3 - (4 - 5)", "(1 + 2) * 3 - (4 - 5)"),
            ("1 - (2 - 3)", "1 - (2 - 3)"), ("(1 - 2) - 3", "1 - 2 - 3"),
            ("($a ? 1 : 2) ? 3 : 4", "($a ? 1 : 2) ? 3 : 4"), ("$a ? 1 : ($b ? 2 : 3)", "$a ? 1 : $b ? 2 : 3"),
            ("$a ?? ($b ? 1 : 2)", "$a ?? ($b ? 1 : 2)"), ("${a}.b", "${a}.b"), ("$a.b", "$a.b"),
            ("-(1)", "-(1)"), ("-1", "-1"), ("- -1", "- -1"), ("-(-$x)", "- -$x"), ("-(1).x", "-(1.x)"), ("!(!$x)", "!!$x"),
            ("{'a b': 1, c: 2}", "{\"a b\": 1, c: 2}"), ("${x-1}", "${x-1}"), ("1.50", "1.5"), ("1e3", "1000.0"),
        ]
        for (source, canonical) in rows {
            XCTAssertEqual(try Expression.compile(source).description, canonical, source)
        }
    }
}
