// obsbench: ObsCore's benchmark program. Run it from a release build:
//   swift build -c release --product obsbench && .build/release/obsbench [SECTION]
// With no SECTION every section runs.
import Foundation

let sections: [(name: String, run: () -> Void)] = [
    ("json", runJSONBenchmark),
]
let wanted = CommandLine.arguments.dropFirst().first
guard wanted == nil || sections.contains(where: { $0.name == wanted }) else {
    FileHandle.standardError.write(Data("obsbench: no section '\(wanted!)'; sections: \(sections.map(\.name))\n".utf8))
    exit(64)
}
for section in sections where wanted == nil || section.name == wanted { section.run() }
