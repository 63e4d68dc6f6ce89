import Foundation
import Observation

extension NotificationCenter {
    /// An event fired with every notification named `name` (from `object`, if given), for as long as
    /// the event exists.
    public func observable(for name: Notification.Name, object: AnyObject? = nil) -> Event<Notification> {
        let event = Event<Notification>()
        let weakEvent = WeakReference(event)
        let registration = addObserver(forName: name, object: object, queue: nil) { notification in
            weakEvent.object?.fire(notification)
        }
        let center = UncheckedBox(self)
        let token = UncheckedBox(registration)
        event.onDeinit = { center.value.removeObserver(token.value) }
        return event
    }
}

/// A value moved across threads under the caller's responsibility.
private struct UncheckedBox<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}

extension Observable {
    /// An observable view of properties of `@Observable` (Observation framework) objects: its value
    /// is `tracking()`, and it follows every change of what `tracking` reads, for as long as the
    /// observable exists.
    ///
    /// Observation reports a change before it is made (`willSet`); the new value is read by a job on
    /// the main actor, which runs once the job that made the change has finished. So the models must
    /// be changed on the main actor, as views' models are; a change made on another thread could be
    /// read too early and missed, which is why there is no nonisolated form.
    @MainActor
    public convenience init(tracking: @escaping @MainActor @Sendable () -> Value) where Value: Equatable {
        self.init(tracking())
        follow(tracking)
    }

    /// Reads `tracking` and subscribes to the next change of what it read.
    @MainActor
    private func follow(_ tracking: @escaping @MainActor @Sendable () -> Value) {
        let target = WeakReference(self)
        let current = withObservationTracking {
            tracking()
        } onChange: {
            Task { @MainActor in target.object?.follow(tracking) }
        }
        value = current
    }
}
