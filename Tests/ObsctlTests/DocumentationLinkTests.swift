import Foundation
import XCTest

/// Every link in README.md, CHANGELOG.md and docs/ resolves: the file exists in the repository,
/// and a `#fragment` names a heading of it (GitHub's anchors). The docs stand on their own, so
/// none of them points outside the repository's own files.
final class DocumentationLinkTests: XCTestCase {
    static var repository: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
    }

    static var documents: [String] {
        let docs = (try? FileManager.default.contentsOfDirectory(atPath: repository + "/docs")) ?? []
        return ["README.md", "CHANGELOG.md"] + docs.filter { $0.hasSuffix(".md") }.sorted().map { "docs/" + $0 }
    }

    /// The text outside fenced code blocks and inline code, where a link is a link.
    static func prose(_ text: String) -> String {
        var lines: [String] = []
        var fenced = false
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("```") {
                fenced.toggle()
                continue
            }
            if !fenced { lines.append(String(line)) }
        }
        let joined = lines.joined(separator: "\n")
        return joined.replacingOccurrences(of: "`[^`\n]*`", with: "", options: .regularExpression)
    }

    /// GitHub's anchor for a heading: lowercased, punctuation other than `-` and `_` dropped,
    /// spaces made hyphens.
    static func anchors(_ text: String) -> Set<String> {
        var result = Set<String>()
        var fenced = false
        for line in text.split(separator: "\n") {
            if line.hasPrefix("```") { fenced.toggle() }
            guard !fenced, line.hasPrefix("#") else { continue }
            let title = line.drop { $0 == "#" }.drop { $0 == " " }.lowercased()
            let kept = title.filter { $0.isLetter || $0.isNumber || $0 == " " || $0 == "-" || $0 == "_" }
            result.insert(kept.replacingOccurrences(of: " ", with: "-"))
        }
        return result
    }

    func test_everyLinkInTheDocs_resolves() throws {
        let link = try NSRegularExpression(pattern: #"\]\(([^)\s]+)\)"#)
        var checked = 0
        for document in Self.documents {
            let path = Self.repository + "/" + document
            let text = try String(contentsOfFile: path, encoding: .utf8)
            let prose = Self.prose(text)
            let directory = URL(fileURLWithPath: path).deletingLastPathComponent()
            for match in link.matches(in: prose, range: NSRange(prose.startIndex..., in: prose)) {
                let target = String(prose[Range(match.range(at: 1), in: prose)!])
                if target.hasPrefix("http://") || target.hasPrefix("https://") || target.hasPrefix("mailto:") { continue }
                checked += 1
                let parts = target.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
                let file = parts[0].isEmpty ? path : directory.appendingPathComponent(parts[0]).standardized.path
                XCTAssertTrue(file.hasPrefix(Self.repository + "/"), "\(document): \(target) leaves the repository")
                XCTAssertTrue(FileManager.default.fileExists(atPath: file), "\(document): \(target) does not exist")
                if parts.count == 2, file.hasSuffix(".md"), let linked = try? String(contentsOfFile: file, encoding: .utf8) {
                    XCTAssertTrue(Self.anchors(linked).contains(parts[1]), "\(document): \(target) names no heading")
                }
            }
        }
        XCTAssertGreaterThan(checked, 10, "the links were found")
    }

    func test_docsNeverPointOutsideTheRepository() throws {
        for document in Self.documents {
            let text = try String(contentsOfFile: Self.repository + "/" + document, encoding: .utf8)
            for outside in ["../shared", "shared/spec", "model.md", "cluster.md"] {
                XCTAssertFalse(text.contains(outside), "\(document) mentions \(outside)")
            }
        }
    }

    func test_anchors_followGitHub() {
        XCTAssertEqual(Self.anchors("# Finding the daemon\n## A status-bar module fed by `watch --format`\n### Metrics for Prometheus"),
                       ["finding-the-daemon", "a-status-bar-module-fed-by-watch---format", "metrics-for-prometheus"])
    }
}
