#if canImport(CLinux)
import CLinux
#endif
#if canImport(Glibc)
import Glibc
#endif

/// Whether the current thread's stack has room for more evaluations.
///
/// Callers ask every 16th nesting level only (the check costs far more than an evaluation of a
/// small closure; measured: the dynamic-graph benchmarks ran twice as long when every nested
/// evaluation asked). The reserve covers the levels between two checks with room to spare.
///
/// Propagation never recurses, but the first evaluation of a computed that reads computeds never
/// evaluated yet does: its closure reads them, and they evaluate inside the read. A long chain of
/// such computeds (restored from disk, say) would overflow the stack; with this guard the
/// evaluation that would go too deep fails with an error instead, and the process lives.
struct StackGuard {
    /// Kept free below any evaluation: one expression at the parser's nesting limit needs about
    /// 1.3 MiB of stack in a debug build (far less in a release build), and 16 nested evaluations
    /// of ordinary closures some tens of KiB. A thread whose stack is smaller than twice this keeps
    /// half of it: with the whole reserve, a thread of 3 MiB or less (one a program made with a
    /// smaller stack) could not nest 16 evaluations at all.
    static let reserve: UInt = 3 << 20

    private var thread: UInt = 0
    /// The lowest address an evaluation may begin at on `thread` (0: unknown, no limit).
    private var limit: UInt = 0

    /// True while more than the reserve is left. Cheap after the first call on a thread (the
    /// bounds are read once per thread).
    mutating func hasRoom() -> Bool {
        let current = currentThreadID()
        if current != thread {
            thread = current
            limit = StackGuard.limit()
        }
        guard limit != 0 else { return true }
        var marker: UInt8 = 0
        let here = withUnsafeMutablePointer(to: &marker) { UInt(bitPattern: $0) }
        return here > limit
    }

    /// The lowest address of the current thread's stack (it grows down) plus its reserve, or 0 if
    /// unknown.
    private static func limit() -> UInt {
        let (lowest, size) = stackBounds()
        guard lowest != 0 else { return 0 }
        return lowest + min(reserve, size / 2)
    }

    /// The lowest address and the size of the current thread's stack, or 0s if unknown.
    private static func stackBounds() -> (lowest: UInt, size: UInt) {
        #if canImport(CLinux)
        var attributes = pthread_attr_t()
        guard pthread_getattr_np(pthread_self(), &attributes) == 0 else { return (0, 0) }
        defer { pthread_attr_destroy(&attributes) }
        var base: UnsafeMutableRawPointer?
        var size = 0
        guard pthread_attr_getstack(&attributes, &base, &size) == 0, let base else { return (0, 0) }
        return (UInt(bitPattern: base), UInt(size))
        #else
        return (0, 0)
        #endif
    }
}
