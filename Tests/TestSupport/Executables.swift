// What the end-to-end test targets share: finding the built executables and waiting for a
// condition. (A library of its own, linked only by test targets.)
import Foundation
import XCTest

/// An executable built next to the test bundle (swift build puts every product in one folder).
/// In CI a missing binary is a broken build and fails the test; elsewhere the test is skipped.
public func builtExecutable(_ name: String) throws -> String {
    // On Linux the bundle URL is the build folder itself; elsewhere it is the .xctest inside it.
    let bundle = Bundle(for: BundleMarker.self).bundleURL
    let candidates = [bundle, bundle.deletingLastPathComponent()].map { $0.appendingPathComponent(name).path }
    guard let path = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
        if ProcessInfo.processInfo.environment["CI"] != nil { XCTFail("\(name) is not built at \(candidates[0])") }
        throw XCTSkip("\(name) is not built at \(candidates[0]); run swift build first")
    }
    return path
}

private final class BundleMarker {}

/// Polls `condition` until it holds or `timeout` seconds pass; a timeout fails the test.
@discardableResult
public func waitFor(_ what: String, timeout: Double = 30, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if condition() { return true }
        usleep(10_000)
    }
    XCTFail("timed out waiting for \(what)")
    return false
}
