import Foundation
/// Aligned columns for the human-oriented commands: each column as wide as its widest cell,
/// two spaces apart, no trailing spaces.
enum TextTable {
    static func lines(_ rows: [[String]]) -> [String] {
        let columns = rows.map(\.count).max() ?? 0
        let widths = (0..<columns).map { column in rows.map { column < $0.count ? $0[column].count : 0 }.max() ?? 0 }
        return rows.map { row in
            row.enumerated().map { column, cell in
                column == row.count - 1 ? cell : cell.padding(toLength: widths[column] + 2, withPad: " ", startingAt: 0)
            }.joined()
        }
    }
}
