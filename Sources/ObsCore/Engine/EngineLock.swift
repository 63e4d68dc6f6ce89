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

/// The engine's lock: a plain mutex plus the owner's thread id, so that code already inside the
/// engine on this thread (a computed's closure reading another node, a batch body) re-enters
/// without locking again. The owner word is atomic because other threads read it to learn that
/// they are *not* the owner; only the owner ever writes its own id there.
@usableFromInline
final class EngineLock: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    @usableFromInline let owner = Atomic<UInt>(0)

    init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Whether the calling thread holds the lock.
    @inlinable
    var isHeldByCurrentThread: Bool {
        owner.load(ordering: .relaxed) == currentThreadID()
    }

    @usableFromInline
    func lock() {
        pthread_mutex_lock(mutex)
        owner.store(currentThreadID(), ordering: .relaxed)
    }

    @inline(__always)
    func unlock() {
        owner.store(0, ordering: .relaxed)
        pthread_mutex_unlock(mutex)
    }
}
