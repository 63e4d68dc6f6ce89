// swift-tools-version: 6.0
import PackageDescription

let strict: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
]

let package = Package(
    name: "obsd",
    products: [
        .library(name: "ObsCore", targets: ["ObsCore"]),
        .executable(name: "obsd", targets: ["obsd"]),
        .executable(name: "obsctl", targets: ["obsctl"]),
        .executable(name: "obsbench", targets: ["obsbench"]),
    ],
    targets: [
        .target(name: "ObsCore", swiftSettings: strict),
        .executableTarget(name: "obsd", dependencies: ["ObsCore"], swiftSettings: strict),
        .executableTarget(name: "obsctl", dependencies: ["ObsCore"], swiftSettings: strict),
        .executableTarget(name: "obsbench", dependencies: ["ObsCore"], path: "Benchmarks/obsbench",
                          swiftSettings: strict),
        .testTarget(name: "ObsCoreTests", dependencies: ["ObsCore"], swiftSettings: strict),
    ]
)
