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
    /// of ordinary closures some tens of KiB.
    static let reserve: UInt = 3 << 20

    private var thread: UInt = 0
    private var lowest: UInt = 0

    /// True while more than `reserve` bytes of stack are left. Cheap after the first call on a
    /// thread (the bounds are read once per thread).
    mutating func hasRoom() -> Bool {
        let current = currentThreadID()
        if current != thread {
            thread = current
            lowest = StackGuard.lowestAddress()
        }
        guard lowest != 0 else { return true }
        var marker: UInt8 = 0
        let here = withUnsafeMutablePointer(to: &marker) { UInt(bitPattern: $0) }
        return here > lowest + StackGuard.reserve
    }

    /// The lowest address of the current thread's stack (it grows down), or 0 if unknown.
    private static func lowestAddress() -> UInt {
        #if canImport(CLinux)
        var attributes = pthread_attr_t()
        guard pthread_getattr_np(pthread_self(), &attributes) == 0 else { return 0 }
        defer { pthread_attr_destroy(&attributes) }
        var base: UnsafeMutableRawPointer?
        var size = 0
        guard pthread_attr_getstack(&attributes, &base, &size) == 0, let base else { return 0 }
        return UInt(bitPattern: base)
        #else
        return 0
        #endif
    }
}
