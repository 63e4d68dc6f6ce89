// obsbench: ObsCore's benchmark program. Run it from a release build:
//   swift run -c release obsbench [SECTION...]
import Foundation
import ObsCore

print("obsbench: no sections yet")
