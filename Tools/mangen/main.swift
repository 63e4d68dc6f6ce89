// Writes a man page to stdout: `mangen obsd.8`, `mangen obsctl.1`, or
// `mangen obsd.conf.5 config/obsd.conf.example`. The Makefile runs it at install time.
import Foundation
import ObsctlCore
import ObsDaemon

let arguments = CommandLine.arguments.dropFirst()
do {
    switch arguments.first {
    case "obsctl.1":
        print(ManPage.obsctl, terminator: "")
    case "obsd.8":
        print(ManPages.obsd, terminator: "")
    case "obsd.conf.5" where arguments.count == 2:
        let example = try String(contentsOfFile: arguments[arguments.startIndex + 1], encoding: .utf8)
        print(try ManPages.obsdConf(example: example), terminator: "")
    default:
        FileHandle.standardError.write(Data("usage: mangen obsctl.1 | obsd.8 | obsd.conf.5 EXAMPLE\n".utf8))
        exit(64)
    }
} catch {
    FileHandle.standardError.write(Data("mangen: \(error)\n".utf8))
    exit(1)
}
