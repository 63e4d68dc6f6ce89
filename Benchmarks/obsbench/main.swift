// obsbench: ObsCore's benchmark program. Run it from a release build:
//   swift build -c release --product obsbench && .build/release/obsbench [SECTION]
// With no SECTION every section runs.
import Foundation

let sections: [(name: String, run: () -> Void)] = [
    ("json", runJSONBenchmark),
]
let wanted = CommandLine.arguments.dropFirst().first
if let wanted, !sections.contains(where: { $0.name == wanted }) {
    let names = sections.map(\.name).joined(separator: ", ")
    FileHandle.standardError.write(Data("obsbench: no section '\(wanted)' (sections: \(names))\n".utf8))
    exit(64)
}
for section in sections where wanted == nil || section.name == wanted { section.run() }
