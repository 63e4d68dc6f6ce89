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
        .library(name: "ObsClient", targets: ["ObsClient"]),
        .executable(name: "obsd", targets: ["obsd"]),
        .executable(name: "obsctl", targets: ["obsctl"]),
        .executable(name: "obsbench", targets: ["obsbench"]),
    ],
    targets: [
        // SQLite from Debian's libsqlite3-dev, for SQLiteStorage.
        .systemLibrary(name: "CSQLite", providers: [.apt(["libsqlite3-dev"])]),
        .target(name: "ObsCore", dependencies: [
            "CSQLite",
            .target(name: "CLinux", condition: .when(platforms: [.linux])),
        ], swiftSettings: strict),
        // The daemon's logic (configuration, event loop, sockets, signals, systemd), a library so
        // that tests can import it; Sources/obsd/main.swift only starts it.
        // Linux headers that Swift's Glibc module leaves out (epoll, signalfd, eventfd).
        .systemLibrary(name: "CLinux"),
        // The client library obsctl is built on: connections, requests, watches that resume, and the
        // definitions-file format obsd applies too.
        .target(name: "ObsClient", dependencies: ["ObsCore"], swiftSettings: strict),
        // obsctl's commands, output, help and completion, a library so that tests can import it.
        .target(name: "ObsctlCore", dependencies: ["ObsClient", "ObsCore"], swiftSettings: strict),
        .target(name: "ObsDaemon", dependencies: ["ObsCore", "ObsClient", "CLinux"], swiftSettings: strict),
        .executableTarget(name: "obsd", dependencies: ["ObsDaemon"], swiftSettings: strict),
        .executableTarget(name: "obsctl", dependencies: ["ObsctlCore"], swiftSettings: strict),
        .executableTarget(name: "obsbench", dependencies: ["ObsCore", "CLinux"], path: "Benchmarks/obsbench",
                          swiftSettings: strict),
        .testTarget(name: "ObsCoreTests", dependencies: ["ObsCore", "TestSupport"], swiftSettings: strict),
        .testTarget(name: "ObsDaemonTests", dependencies: ["ObsDaemon", "ObsCore", "TestSupport"], swiftSettings: strict),
        .testTarget(name: "ObsctlTests", dependencies: ["ObsctlCore", "ObsClient", "ObsCore", "TestSupport"], swiftSettings: strict),
        .target(name: "TestSupport", path: "Tests/TestSupport", swiftSettings: strict),
    ]
)
