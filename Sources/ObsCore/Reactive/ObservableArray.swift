import Foundation

/// How an array changed: indexes removed (in the old array), inserted (in the new array), and
/// elements that moved (from an old index to a new one; not also listed as removed or inserted).
public struct ArrayDiff: Sendable, Equatable {
    /// One element that moved.
    public struct Move: Sendable, Equatable, Hashable {
        public let from: Int
        public let to: Int
        public init(from: Int, to: Int) { self.from = from; self.to = to }
    }

    public var removed: IndexSet
    public var inserted: IndexSet
    public var moved: [Move]

    public init(removed: IndexSet = [], inserted: IndexSet = [], moved: [Move] = []) {
        self.removed = removed
        self.inserted = inserted
        self.moved = moved
    }

    /// The smallest diff that turns `old` into `new`, an element removed and inserted again with an
    /// equal value counted as moved.
    public init<Element: Equatable>(from old: [Element], to new: [Element]) {
        var removals: [(offset: Int, element: Element)] = []
        var insertions: [(offset: Int, element: Element)] = []
        for change in new.difference(from: old) {
            switch change {
            case let .remove(offset, element, _): removals.append((offset, element))
            case let .insert(offset, element, _): insertions.append((offset, element))
            }
        }
        var moved: [Move] = []
        var unmatchedInsertions = insertions
        var unmatchedRemovals: [Int] = []
        for removal in removals {
            if let match = unmatchedInsertions.firstIndex(where: { $0.element == removal.element }) {
                moved.append(Move(from: removal.offset, to: unmatchedInsertions[match].offset))
                unmatchedInsertions.remove(at: match)
            } else {
                unmatchedRemovals.append(removal.offset)
            }
        }
        self.init(removed: IndexSet(unmatchedRemovals), inserted: IndexSet(unmatchedInsertions.map(\.offset)),
                  moved: moved.sorted { $0.to < $1.to })
    }

    /// Whether nothing changed.
    public var isEmpty: Bool { removed.isEmpty && inserted.isEmpty && moved.isEmpty }
}

/// An observable array whose observers can receive what changed (`observeDiff`), not only the new
/// array. Changes made in one `batch` arrive as one diff.
public final class ObservableArray<Element: Sendable & Equatable>: @unchecked Sendable {
    /// The array as an observable value: read it in computeds, bind it, observe it whole.
    public let observable: Observable<[Element]>

    public init(_ elements: [Element] = []) {
        observable = Observable(elements)
    }

    /// The elements. Read inside a computed, the array becomes a dependency.
    public var value: [Element] {
        get { observable.value }
        set { observable.value = newValue }
    }

    public var count: Int { value.count }

    public subscript(index: Int) -> Element {
        get { value[index] }
        set { observable.modify { $0[index] = newValue } }
    }

    public func append(_ element: Element) { observable.modify { $0.append(element) } }
    public func append(contentsOf elements: some Sequence<Element> & Sendable) { observable.modify { $0.append(contentsOf: elements) } }
    public func insert(_ element: Element, at index: Int) { observable.modify { $0.insert(element, at: index) } }
    public func remove(at index: Int) { observable.modify { _ = $0.remove(at: index) } }
    public func removeAll() { observable.modify { $0.removeAll() } }

    /// Moves the element at `from` so that it ends at index `to`.
    public func move(from: Int, to: Int) {
        observable.modify { array in
            let element = array.remove(at: from)
            array.insert(element, at: to)
        }
    }

    /// Calls `handler` with every change of the array, as a diff, in order.
    public func observeDiff(on scheduler: some EventScheduler = ImmediateScheduler(),
                            _ handler: @escaping @Sendable (ArrayDiff) -> Void) -> ObservationToken {
        observable.observe(on: scheduler) { change in
            handler(ArrayDiff(from: change.oldValue, to: change.newValue))
        }
    }

    /// Calls `handler` with every change of the array as a whole.
    public func observe(initial: Bool = false, on scheduler: some EventScheduler = ImmediateScheduler(),
                        _ handler: @escaping @Sendable (Change<[Element]>) -> Void) -> ObservationToken {
        observable.observe(initial: initial, on: scheduler, handler)
    }
}
