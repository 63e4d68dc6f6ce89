import Foundation
/// The dependency graph as text (`graph`) and as Graphviz DOT (`graph --dot`).
enum GraphText {
    typealias Node = (key: String, kind: String)
    typealias Edge = (from: String, to: String, type: String)

    /// Each node with its kind, then its inbound edges: `total  computed  <- price, qty`.
    static func text(nodes: [Node], edges: [Edge]) -> [String] {
        let rows = nodes.map { node -> [String] in
            let inbound = edges.filter { $0.to == node.key }
                .map { $0.type == "bind" ? "\($0.from) (bind)" : $0.from }
            return inbound.isEmpty ? [node.key, node.kind] : [node.key, node.kind, "<- " + inbound.joined(separator: ", ")]
        }
        return TextTable.lines(rows)
    }

    /// Computed keys are ellipses, value keys boxes, a binding's key that does not exist yet a
    /// dashed box; bindings are dashed edges.
    static func dot(nodes: [Node], edges: [Edge]) -> [String] {
        var lines = ["digraph obsd {", "  rankdir=LR;"]
        for node in nodes {
            let shape = node.kind == "computed" ? "ellipse" : node.kind == "missing" ? "box, style=dashed" : "box"
            lines.append("  \(quoted(node.key)) [shape=\(shape)];")
        }
        for edge in edges {
            lines.append("  \(quoted(edge.from)) -> \(quoted(edge.to))\(edge.type == "bind" ? " [style=dashed]" : "");")
        }
        lines.append("}")
        return lines
    }

    private static func quoted(_ name: String) -> String {
        "\"" + name.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
    }
}
