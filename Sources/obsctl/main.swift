// obsctl: everything is in ObsctlCore, so that tests can reach it.
import Foundation
import ObsctlCore

guard let arguments = Obsctl.arguments(CommandLine.argc, CommandLine.unsafeArgv) else { exit(64) }
exit(Obsctl.main(arguments, environment: ProcessInfo.processInfo.environment))
