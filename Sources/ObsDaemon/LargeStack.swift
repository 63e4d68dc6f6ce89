// The daemon runs on a thread with a large stack. Propagation never recurses, but the first
// evaluation of a computed whose dependencies were never evaluated does (restoring a long chain,
// say), and the engine refuses to nest deeper than the stack allows (an eval_error instead of a
// crash). A large stack makes that limit one that real graphs never meet; its pages are only
// committed as they are used.
import Glibc

enum LargeStack {
    /// 1 GiB of address space: about half a million nested evaluations.
    static let size = 1 << 30

    /// Runs `body` on a new thread with the large stack and waits for it. The signals the daemon
    /// takes through its signalfd are blocked here first, so that no thread, this one included,
    /// ever takes their default action.
    static func run(_ body: @escaping () -> Int32) -> Int32 {
        var signals = sigset_t()
        sigemptyset(&signals)
        for signal in [SIGTERM, SIGINT, SIGHUP] { sigaddset(&signals, signal) }
        pthread_sigmask(SIG_BLOCK, &signals, nil)

        let work = Work(body)
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        var thread = pthread_t()
        let context = Unmanaged.passRetained(work).toOpaque()
        guard pthread_attr_setstacksize(&attributes, size) == 0,
              pthread_create(&thread, &attributes, { context in
                  let work = Unmanaged<Work>.fromOpaque(context!).takeRetainedValue()
                  work.status = work.body()
                  return nil
              }, context) == 0
        else {
            // No thread with that stack (address space limits): run here, with the usual stack.
            let work = Unmanaged<Work>.fromOpaque(context).takeRetainedValue()
            return work.body()
        }
        pthread_join(thread, nil)
        return work.status
    }

    /// The work and its result, handed across the thread boundary; only one thread touches it at a
    /// time (the creator after the join).
    private final class Work: @unchecked Sendable {
        let body: () -> Int32
        var status: Int32 = 1
        init(_ body: @escaping () -> Int32) { self.body = body }
    }
}
