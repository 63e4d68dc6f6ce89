#if canImport(CLinux)
import CLinux
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

/// A stable number for the calling thread, used to recognise re-entry by the lock's owner. (On
/// Linux its thread pointer, read inline: every read of a value asks.)
@inlinable
func currentThreadID() -> UInt {
    #if canImport(CLinux)
    return UInt(obs_thread_pointer())
    #elseif canImport(Darwin)
    return UInt(bitPattern: pthread_self())
    #else
    return UInt(pthread_self())
    #endif
}

/// The engine's lock: a lock word plus the owner's thread id, so that code already inside the
/// engine on this thread (a computed's closure reading another node, a batch body) re-enters without
/// locking again. The owner word is atomic because other threads read it to learn that they are
/// *not* the owner; only the owner ever writes its own id there.
///
/// Taking and giving back the lock uncontended is one atomic operation each on the lock word,
/// inlined (`pthread_mutex_lock` and `_unlock` were two calls of some 20 instructions each, and every
/// read from outside a transaction takes the lock). The word is 0 (free), 1 (held) or 2 (held, and
/// a thread may be waiting). A thread that finds it held sets it to 2 and sleeps on a condition
/// variable until the holder, giving back a word of 2, wakes it (the classic three-state mutex,
/// with a condition variable where a futex would do). Every hand-over goes through the word with
/// acquiring and releasing atomics, which ThreadSanitizer sees (it did not see Synchronization's
/// `Mutex`, whose contended path hands the lock over inside the kernel).
@usableFromInline
final class EngineLock: @unchecked Sendable {
    @usableFromInline let word = Atomic<Int>(0)
    @usableFromInline let owner = Atomic<UInt>(0)
    /// Where waiters sleep: held only around the word's slow path.
    private let waiters: UnsafeMutablePointer<pthread_mutex_t>
    private let wakeUp: UnsafeMutablePointer<pthread_cond_t>

    init() {
        waiters = .allocate(capacity: 1)
        waiters.initialize(to: pthread_mutex_t())
        pthread_mutex_init(waiters, nil)
        wakeUp = .allocate(capacity: 1)
        wakeUp.initialize(to: pthread_cond_t())
        pthread_cond_init(wakeUp, nil)
    }

    deinit {
        pthread_cond_destroy(wakeUp)
        wakeUp.deallocate()
        pthread_mutex_destroy(waiters)
        waiters.deallocate()
    }

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
        if !word.compareExchange(expected: 0, desired: 1, ordering: .acquiring).exchanged {
            waitForLock()
        }
        owner.store(thread, ordering: .relaxed)
    }

    @usableFromInline
    func unlock() {
        owner.store(0, ordering: .relaxed)
        if word.exchange(0, ordering: .releasing) == 2 { wakeWaiter() }
    }

    private func waitForLock() {
        pthread_mutex_lock(waiters)
        while word.exchange(2, ordering: .acquiring) != 0 {
            pthread_cond_wait(wakeUp, waiters)
        }
        pthread_mutex_unlock(waiters)
    }

    private func wakeWaiter() {
        pthread_mutex_lock(waiters)
        pthread_cond_signal(wakeUp)
        pthread_mutex_unlock(waiters)
    }
}
