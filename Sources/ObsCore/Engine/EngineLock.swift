#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

/// A stable number for the calling thread, used to recognise re-entry by the lock's owner.
@inlinable
func currentThreadID() -> UInt {
    #if canImport(Darwin)
    return UInt(bitPattern: pthread_self())
    #else
    return UInt(pthread_self())
    #endif
}

/// The engine's lock: a mutex plus the owner's thread id, so that code already inside the engine
/// on this thread (a computed's closure reading another node, a batch body) re-enters without
/// locking again. The owner word is atomic because other threads read it to learn that they are
/// *not* the owner; only the owner ever writes its own id there.
///
/// The mutex is Synchronization's (a futex on Linux): taking and giving it back uncontended is one
/// compare-and-swap each, inlined, where `pthread_mutex_lock` and `_unlock` were two calls of
/// some 20 instructions each. Every read from outside a transaction takes it, so that counted.
@usableFromInline
final class EngineLock: @unchecked Sendable {
    @usableFromInline let mutex = Mutex(())
    @usableFromInline let owner = Atomic<UInt>(0)

    init() {}

    /// Whether the calling thread holds the lock.
    @inlinable
    var isHeldByCurrentThread: Bool { isHeld(by: currentThreadID()) }

    /// Whether the thread whose id is `thread` holds the lock.
    @inlinable
    func isHeld(by thread: UInt) -> Bool {
        owner.load(ordering: .relaxed) == thread
    }

    func lock() {
        lock(as: currentThreadID())
    }

    /// Takes the lock for the calling thread, whose id is `thread`. (Out of line: the engine's
    /// entry, inlined into every read, only calls it when the thread is not inside already.)
    @usableFromInline @inline(never)
    func lock(as thread: UInt) {
        mutex._unsafeLock()
        owner.store(thread, ordering: .relaxed)
    }

    @usableFromInline
    func unlock() {
        owner.store(0, ordering: .relaxed)
        mutex._unsafeUnlock()
    }
}
