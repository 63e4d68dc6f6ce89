// swift-tools-version: 6.0
import PackageDescription
#if canImport(Glibc)
import Glibc
#endif

let strict: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
]

/// How release obsd and obsctl are linked on Linux: by the toolchain's lld, with the functions they
/// run when they start and serve laid out first (scripts/link-order writes the lists), so that
/// their code is resident in a few hundred KiB instead of pages scattered over all of it; and with
/// their relocations packed (`DT_RELR`) where the C library this builds against can read them
/// (glibc 2.36), which spares reading 1.8 MB of them at every start. docs/performance.md,
/// "The empty daemon".
/// A toolchain without lld (swift.org's have it beside `swift`) links as before.
func orderedLinking(_ target: String) -> [LinkerSetting] {
    #if canImport(Glibc)
    let path = getenv("PATH").map { String(cString: $0) } ?? ""
    guard path.split(separator: ":").contains(where: { access("\($0)/ld.lld", X_OK) == 0 }) else { return [] }
    #endif
    let directory = String(#filePath.dropLast("/Package.swift".count))
    var flags = ["-use-ld=lld",
                 "-Xlinker", "--symbol-ordering-file=\(directory)/Sources/\(target)/link-order.txt",
                 "-Xlinker", "--no-warn-symbol-ordering"]
    #if canImport(Glibc)
    // "glibc 2.36", from the C library the manifest itself runs on, which is the one obsd links.
    var buffer = [UInt8](repeating: 0, count: 64)
    let length = buffer.withUnsafeMutableBufferPointer { bytes in
        bytes.withMemoryRebound(to: CChar.self) { confstr(Int32(_CS_GNU_LIBC_VERSION), $0.baseAddress, $0.count) }
    }
    let text = String(decoding: buffer.prefix(max(0, min(length, buffer.count) - 1)), as: UTF8.self)
    let version = text.split(separator: " ").last?.split(separator: ".").compactMap { Int($0) } ?? []
    if version.lexicographicallyPrecedes([2, 36]) == false {
        flags += ["-Xlinker", "-z", "-Xlinker", "pack-relative-relocs"]
    }
    #endif
    return [.unsafeFlags(flags, .when(platforms: [.linux], configuration: .release))]
}

let package = Package(
    name: "obsd",
    products: [
        .library(name: "ObsCore", targets: ["ObsCore"]),
        .library(name: "ObsClient", targets: ["ObsClient"]),
        .library(name: "EtcdClient", targets: ["EtcdClient"]),
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
        .target(name: "ObsClient", dependencies: [
            "ObsCore",
            .target(name: "CLinux", condition: .when(platforms: [.linux])),
        ], swiftSettings: strict),
        // obsctl's commands, output, help and completion, a library so that tests can import it.
        .target(name: "ObsctlCore", dependencies: [
            "ObsClient", "ObsCore", "ObsWeb",
            .target(name: "CLinux", condition: .when(platforms: [.linux])),
        ], swiftSettings: strict),
        // libmicrohttpd from Debian's libmicrohttpd-dev, for `obsctl web` (never linked by obsd).
        .systemLibrary(name: "CMicroHTTPD", providers: [.apt(["libmicrohttpd-dev"])]),
        // `obsctl web`: the HTTP server, the page's event streams and API, and the page itself,
        // compiled in so that it needs nothing but the obsctl binary.
        .target(name: "ObsWeb", dependencies: [
            "ObsClient", "ObsCore", "CMicroHTTPD",
            .target(name: "CLinux", condition: .when(platforms: [.linux])),
        ],
                resources: [.embedInCode("Assets/index.html"), .embedInCode("Assets/app.css"),
                            .embedInCode("Assets/app.js"), .embedInCode("Assets/graph.js")],
                swiftSettings: strict),
        .target(name: "ObsDaemon", dependencies: ["ObsCore", "ObsClient", "CLinux", "EtcdClient"], swiftSettings: strict),
        .executableTarget(name: "obsd", dependencies: ["ObsDaemon"], exclude: ["link-order.txt"], swiftSettings: strict,
                         linkerSettings: orderedLinking("obsd")),
        .executableTarget(name: "obsctl", dependencies: ["ObsctlCore"], exclude: ["link-order.txt"], swiftSettings: strict,
                         linkerSettings: orderedLinking("obsctl")),
        // libcurl for EtcdClient's HTTP and TLS: the headers of Debian's libcurl4-openssl-dev, the
        // library loaded (dlopen) when the first etcd client is made, so that single-host obsd
        // never maps it (Sources/CCurl/include/CCurl.h).
        .target(name: "CCurl"),
        // An asynchronous etcd v3 client for cluster mode: etcd's gRPC API over libcurl's HTTP/2
        // (the default), or its JSON gateway; driven from the caller's event loop.
        .target(name: "EtcdClient", dependencies: ["CCurl", "CLinux", "ObsCore"], swiftSettings: strict),
        // A 3-member etcd cluster on loopback, started by the tests and by obsbench (no XCTest).
        .target(name: "EtcdTestCluster", path: "Tests/EtcdTestCluster", swiftSettings: strict),
        .executableTarget(name: "obsbench", dependencies: ["ObsCore", "CLinux", "EtcdClient", "EtcdTestCluster"],
                          path: "Benchmarks/obsbench", swiftSettings: strict),
        // Writes the man pages from the tables --help reads; `make install` runs it.
        .executableTarget(name: "mangen", dependencies: ["ObsctlCore", "ObsDaemon"], path: "Tools/mangen",
                          swiftSettings: strict),
        .testTarget(name: "ObsCoreTests", dependencies: ["ObsCore", "TestSupport"], swiftSettings: strict),
        .testTarget(name: "ObsDaemonTests", dependencies: ["ObsDaemon", "ObsCore", "TestSupport"], swiftSettings: strict),
        .testTarget(name: "ObsctlTests", dependencies: ["ObsctlCore", "ObsClient", "ObsCore", "ObsWeb", "TestSupport"], swiftSettings: strict),
        .testTarget(name: "EtcdClientTests", dependencies: ["EtcdClient", "TestSupport"], swiftSettings: strict),
        .target(name: "TestSupport", dependencies: ["EtcdTestCluster", "ObsCore"], path: "Tests/TestSupport", swiftSettings: strict),
    ]
)
