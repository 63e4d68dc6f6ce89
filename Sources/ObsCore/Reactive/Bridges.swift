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
    /// is `tracking()`, and it follows every change of what `tracking` reads, asynchronously, for as
    /// long as the observable exists. Updates are made by a task that evaluates `tracking` in its
    /// isolation: a closure isolated to the main actor needs the main actor free to run.
    public convenience init(tracking: @escaping @Sendable () -> Value) where Value: Equatable {
        self.init(tracking())
        let target = WeakReference(self)
        let task = Task {
            for await value in Observations(tracking) {
                guard let observable = target.object else { return }
                observable.value = value
            }
        }
        retained.append(TaskCanceller(task))
    }
}

/// Cancels its task when released.
private final class TaskCanceller: Sendable {
    let task: Task<Void, Never>
    init(_ task: Task<Void, Never>) { self.task = task }
    deinit { task.cancel() }
}
