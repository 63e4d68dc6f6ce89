// obsd is built by its own issue; until then this executable says so and exits non-zero.
import Foundation

FileHandle.standardError.write(Data("obsd: not implemented yet\n".utf8))
exit(1)
