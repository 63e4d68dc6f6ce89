import ObsClient
import ObsCore
import XCTest

final class DefinitionsFileTests: XCTestCase {
    func test_shellWords_quoting() throws {
        XCTAssertEqual(try ShellWords.split(#"define a '$b * 2'"#), ["define", "a", "$b * 2"])
        XCTAssertEqual(try ShellWords.split(#"set s "say \"hi\" \$x \n""#), ["set", "s", #"say "hi" $x \n"#])
        XCTAssertEqual(try ShellWords.split(#"set a\ b c'd'"e" '' # comment"#), ["set", "a b", "cde", ""])
        XCTAssertEqual(try ShellWords.split("set a#b 1"), ["set", "a#b", "1"])
        XCTAssertEqual(try ShellWords.split("   # only a comment"), [])
        XCTAssertThrowsError(try ShellWords.split("set a 'open"))
        XCTAssertThrowsError(try ShellWords.split(#"set a "open"#))
        XCTAssertThrowsError(try ShellWords.split(#"set a \"#))
    }

    func test_parse_requestsWithLineNumbers() throws {
        let file = try DefinitionsFile(parsing: """
            # status bar
            set volume 0.4

            define volume.label 'format("{}%", round($volume * 100))'
            bind net.wifi.ssid bar.wifi --map 'value ?? "offline"'
            del a b
            unbind x
            set --string n 42
            set --ttl 5s t true
            define --replace volume 1
            """)
        XCTAssertEqual(file.entries.map(\.line), [2, 4, 5, 6, 6, 7, 8, 9, 10])
        XCTAssertEqual(file.entries.map(\.op), ["set", "define", "bind", "delete", "delete", "unbind", "set", "set", "define"])
        XCTAssertEqual(file.entries[0].fields, ["key": "volume", "value": 0.4])
        XCTAssertEqual(file.entries[1].fields, ["key": "volume.label", "expr": #"format("{}%", round($volume * 100))"#])
        XCTAssertEqual(file.entries[2].fields, ["from": "net.wifi.ssid", "to": "bar.wifi", "map": #"value ?? "offline""#])
        XCTAssertEqual(file.entries[6].fields, ["key": "n", "value": "42"])
        XCTAssertEqual(file.entries[7].fields, ["key": "t", "value": true, "ttl_ms": 5000])
        XCTAssertEqual(file.entries[8].fields, ["key": "volume", "expr": "1", "replace": true])
    }

    func test_parse_errorsNameTheLine() {
        for (text, line, message) in [("set a 1\nget a", 2, "unknown command 'get' (a definitions file holds set, define, bind, unbind and del)"),
                                      ("\n\nset a", 3, "'set' needs VALUE"),
                                      ("set a 'x", 1, "unterminated single quote"),
                                      ("set a -", 1, "set KEY - reads stdin, which only obsctl itself can do"),
                                      ("set --ephemeral a 1", 1, "--ephemeral has no meaning in a definitions file"),
                                      ("set --json a {x", 1, "--json: '{x' is not valid JSON"),
                                      ("set --ttl soon a 1", 1, "invalid duration 'soon' for --ttl (expected e.g. 250ms, 5s, 2m, 1h or 10)"),
                                      ("define a", 1, "'define' needs EXPR")] {
            XCTAssertThrowsError(try DefinitionsFile(parsing: text), text) { error in
                let failure = error as! DefinitionsFile.Failure
                XCTAssertEqual(failure.line, line, text)
                XCTAssertEqual(failure.usage?.message, message, text)
            }
        }
    }
}
