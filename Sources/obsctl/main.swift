// obsctl: everything is in ObsctlCore, so that tests can reach it.
import Foundation
import ObsctlCore

exit(Obsctl.main(Array(CommandLine.arguments.dropFirst()), environment: ProcessInfo.processInfo.environment))
