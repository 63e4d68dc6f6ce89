/// Which runs of the store a watch may resume from (`watch` with `since` and `run`).
///
/// Revisions alone cannot tell whether a state continues the one a client saw: a state restored
/// from a backup, or one a crash left behind a revision already sent, numbers new changes with
/// revisions the client saw for others, and once writes take it past the client's `since`, a
/// resume would replay only what came after and leave the client's view of the rest wrong with no
/// word. So every run of the store (each start) has an identity of its own, random, that `hello`
/// reports; the storage keeps the identity of the run that left the state at a clean stop (`StoredState.run`,
/// `StateStorage.beginRun`). A client that resumes names the run it saw `since` in, and:
/// - this run: the history decides, as always;
/// - the run that left the state loaded at start, with `since` that state's revision: the state
///   is the one the client saw, so it resumes (a clean restart);
/// - anything else (an older run, a `since` of that run past the state loaded, a run that did not
///   stop cleanly, a `--memory` run, an identity never given out): `compacted` and a snapshot.
///   Never a silent resume; at worst a snapshot more than needed.
/// A `since` without `run` (an older client, `obsctl watch --since` by hand) is taken on trust.
/// Cluster mode ignores `run`: etcd keeps the history, and its revisions are every host's.
struct RunLineage: Sendable, Equatable {
    /// This run's identity.
    var run: UInt64
    /// The run that left the state loaded at start (nil: unknown), and that state's revision.
    var previous: UInt64?
    var loadedRev: UInt64

    /// Whether a client that saw revision `since` in run `seen` may resume from it (the history
    /// then decides whether it still reaches back).
    func resumes(since: UInt64, seen: UInt64?) -> Bool {
        guard let seen else { return false }
        return seen == run || (seen == previous && since == loadedRev)
    }

    /// A run's identity as `hello` gives it: 16 lowercase hex digits.
    static func text(_ run: UInt64) -> String {
        let digits = String(run, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }

    /// The identity a client sent, or nil when it is not one `text` makes (so no run's).
    static func parse(_ text: String) -> UInt64? {
        guard text.utf8.count == 16, text.utf8.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) }) else { return nil }
        return UInt64(text, radix: 16)
    }
}
