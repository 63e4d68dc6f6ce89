// obsd: the reactive-state daemon. Everything lives in ObsDaemon, so that tests can reach it.
import Glibc
import ObsDaemon

exit(Obsd.main(Array(CommandLine.arguments.dropFirst()), environment: .current))
