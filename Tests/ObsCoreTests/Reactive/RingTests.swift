import TestSupport
import XCTest
@testable import ObsCore

/// The ring behind `changes` and obsctl's event queue agrees with an array doing the same, across
/// growth and wrap-around, and keeps nothing it no longer lists.
final class RingTests: XCTestCase {
    func test_randomOperations_agreeWithAnArray() {
        var random = SplitMix64(seed: 11)
        var ring = Ring<Int>()
        var model: [Int] = []
        for step in 0..<20_000 {
            // Appends win a little more often at first, takes later, so the ring grows and empties.
            let appendOdds = step < 10_000 ? 6 : 4
            switch random.below(10) {
            case 0..<appendOdds:
                ring.append(step)
                model.append(step)
            case appendOdds..<8:
                XCTAssertEqual(ring.popFirst(), model.isEmpty ? nil : model.removeFirst(), "step \(step)")
            case 8:
                XCTAssertEqual(ring.popLast(), model.popLast(), "step \(step)")
            default:
                guard !model.isEmpty else { continue }
                let offset = random.below(model.count)
                XCTAssertEqual(ring[offset], model[offset], "step \(step)")
                ring[offset] = -step
                model[offset] = -step
            }
            XCTAssertEqual(ring.count, model.count)
        }
        while let expected = model.first {
            model.removeFirst()
            XCTAssertEqual(ring.popFirst(), expected)
        }
        XCTAssertTrue(ring.isEmpty)
        XCTAssertNil(ring.popFirst())
    }

    func test_takenElements_areReleased() {
        final class Witness {}
        weak var first: Witness?, last: Witness?
        var ring = Ring<Witness>()
        do {
            let (a, b, c) = (Witness(), Witness(), Witness())
            [a, b, c].forEach { ring.append($0) }
            (first, last) = (a, c)
        }
        _ = ring.popFirst()
        XCTAssertNil(first)
        _ = ring.popLast()
        XCTAssertNil(last)
        XCTAssertEqual(ring.count, 1)
    }
}
