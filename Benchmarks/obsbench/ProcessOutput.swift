import Foundation

/// Runs `executable` with `arguments` and returns what it wrote to its standard output; throws when
/// it cannot be started or exits with a failure.
func processOutput(_ executable: String, _ arguments: [String]) throws(BenchError) -> String {
    let process = Process()
    let pipe = Pipe()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    process.standardOutput = pipe
    do {
        try process.run()
    } catch {
        throw BenchError("cannot run \(executable): \(error)")
    }
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else {
        throw BenchError("\(([executable] + arguments).joined(separator: " ")) exited with status \(process.terminationStatus)")
    }
    return String(decoding: data, as: UTF8.self)
}
