import XCTest
import TestSupport
@testable import ObsCore

/// Cluster mode's guarantees, with a shared log in memory (SimulatedCluster) behind three stores:
/// every write is decided by the log and applied by every host at the log's revision.
final class SharedLogTests: XCTestCase {
    private func clients(_ cluster: SimulatedCluster) -> [Client] {
        cluster.stores.map { Client(store: $0, access: .write) }
    }

    func test_aSetOnOneHost_isSeenByWatchersOnTheOthers_withTheSameRevision() {
        let cluster = SimulatedCluster(hosts: 3)
        let (a, b, c) = (Client(store: cluster.stores[0], access: .write), Client(store: cluster.stores[1], access: .read),
                         Client(store: cluster.stores[2], access: .read))
        b.request(#"{"op":"watch","keys":["k"],"initial":false}"#)
        c.request(#"{"op":"watch","keys":["k"],"initial":false}"#)
        let answer = a.request(#"{"id":1,"op":"set","key":"k","value":42}"#)
        XCTAssertEqual(answer["rev"], 1)
        XCTAssertEqual(answer["changed"], true)
        for watcher in [b, c] {
            XCTAssertEqual(watcher.events().map { $0["new"] }, [42])
        }
        for store in cluster.stores { XCTAssertEqual(store.rev, 1) }
        XCTAssertEqual(b.request(#"{"op":"get","key":"k"}"#)["rev"], 1)
    }

    /// A write's answer comes once the log decided it: its id is still echoed exactly as sent,
    /// whatever number it is.
    func test_anAnswerThatComesLater_echoesTheIdAsSent() {
        let cluster = SimulatedCluster(hosts: 2)
        let client = Client(store: cluster.stores[0], access: .write)
        for id in ["1.50", "1e2", "-0", "123456789012345678901234567890", "7"] {
            XCTAssertEqual(client.send(#"{"id":\#(id),"op":"set","key":"k","value":\#(id)}"#).first?
                .hasPrefix(#"{"id":\#(id),"ok":true"#), true, id)
            XCTAssertEqual(client.send(#"{"id":\#(id),"op":"set","key":"k","value":1,"if_rev":999}"#).first?
                .hasPrefix(#"{"id":\#(id),"ok":false"#), true, id)
        }
    }

    ///   a (written on host 0) ─┐
    ///                          ├─ sum (computed on host 2): glitch-free, one change per batch
    ///   b (written on host 1) ─┘
    func test_aComputedOverKeysWrittenOnOtherHosts_followsThem() {
        let cluster = SimulatedCluster(hosts: 3)
        let hosts = clients(cluster)
        hosts[2].request(#"{"op":"define","key":"sum","expr":"($a ?? 0) + ($b ?? 0)"}"#)
        hosts[2].request(#"{"op":"watch","keys":["sum"],"initial":false}"#)
        hosts[0].request(#"{"op":"set","key":"a","value":1}"#)
        hosts[1].request(#"{"op":"set","key":"b","value":2}"#)
        hosts[0].request(#"{"op":"batch","ops":[{"op":"set","key":"a","value":10},{"op":"set","key":"b","value":20}]}"#)
        XCTAssertEqual(hosts[2].events().compactMap { $0["new"] }, [1, 3, 30], "never 12 or 21")
        XCTAssertEqual(hosts[1].request(#"{"op":"get","key":"sum"}"#)["value"], 30, "defined everywhere")
    }

    /// Two hosts race a compare-and-set on one key: exactly one wins, the other gets `conflict`.
    func test_compareAndSetRacedFromTwoHosts_exactlyOneWins() {
        let cluster = SimulatedCluster(hosts: 2)
        let hosts = clients(cluster)
        hosts[0].request(#"{"op":"set","key":"lock","value":"free"}"#)
        cluster.decidesAtOnce = false
        XCTAssertEqual(hosts[0].send(#"{"id":"a","op":"set","key":"lock","value":"A","if_rev":1}"#), [], "pending until decided")
        XCTAssertEqual(hosts[1].send(#"{"id":"b","op":"set","key":"lock","value":"B","if_rev":1}"#), [])
        XCTAssertTrue(hosts[0].session.isWaiting)
        cluster.decide()
        let answers = hosts.flatMap { $0.output.take() }.compactMap { try? JSONValue.parse($0) }
        XCTAssertEqual(answers.count, 2)
        XCTAssertEqual(answers.filter { $0["ok"] == true }.count, 1)
        XCTAssertEqual(answers.compactMap { $0["error"]?["code"] }, ["conflict"])
        XCTAssertEqual(cluster.stores[0].value(forKey: "lock"), cluster.stores[1].value(forKey: "lock"))
    }

    func test_concurrentIncrements_onTwoHosts_bothCount() {
        let cluster = SimulatedCluster(hosts: 2)
        let hosts = clients(cluster)
        cluster.decidesAtOnce = false
        for _ in 0..<5 {
            hosts[0].send(#"{"op":"incr","key":"n"}"#)
            hosts[1].send(#"{"op":"incr","key":"n"}"#)
            cluster.decide()
        }
        XCTAssertEqual(cluster.stores[0].value(forKey: "n"), 10)
        XCTAssertEqual(cluster.stores[1].value(forKey: "n"), 10)
    }

    func test_aBatchIsOneRevisionEverywhere() {
        let cluster = SimulatedCluster(hosts: 3)
        let hosts = clients(cluster)
        hosts[1].request(#"{"op":"watch","keys":["**"],"initial":false}"#)
        let answer = hosts[0].request(#"{"op":"batch","ops":[{"op":"set","key":"x","value":1},{"op":"set","key":"y","value":2}]}"#)
        XCTAssertEqual(answer["rev"], 1)
        XCTAssertEqual(Set(hosts[1].events().compactMap { $0["rev"] }), [1])
        XCTAssertEqual(cluster.log.count, 1)
    }

    /// The binding's write is part of the transaction that changed its source, decided once: the
    /// other hosts apply it and write nothing themselves.
    func test_aBindingFiresOnce_thoughEveryHostSeesTheChange() {
        let cluster = SimulatedCluster(hosts: 3)
        let hosts = clients(cluster)
        hosts[0].request(#"{"op":"bind","from":"src","to":"dst","map":"value * 2"}"#)
        let before = cluster.log.count
        hosts[1].request(#"{"op":"set","key":"src","value":21}"#)
        XCTAssertEqual(cluster.log.count, before + 1, "one transaction: the source and the binding's write")
        XCTAssertEqual(cluster.log.last?.putKeys.map(\.key).sorted(), ["dst", "src"])
        for store in cluster.stores { XCTAssertEqual(store.value(forKey: "dst"), 42) }
        XCTAssertEqual(hosts[2].request(#"{"op":"get","key":"dst"}"#)["version"], 1, "written once")
    }

    /// A set is a plain write, committed without comparing the bindings its host had applied. One
    /// proposed from a view without the binding (made on another host, not yet applied here) is
    /// committed as it was; every host finds, applying it, that the binding wrote nothing, and runs
    /// it again: the first host's run is committed, the others find the target written.
    ///
    ///   host 0: bind src -> dst (value * 2)     rev 1
    ///   host 1: set src 7, without the binding  rev 2: src only
    ///   the first host's repair                 rev 3: dst 14, once
    func test_aPlainWriteProposedBeforeABindingWasApplied_getsTheBindingsWriteOnce() {
        let cluster = SimulatedCluster(hosts: 3)
        let hosts = clients(cluster)
        hosts[2].request(#"{"op":"watch","keys":["dst"],"initial":false}"#)
        cluster.decidesAtOnce = false
        hosts[0].send(#"{"op":"bind","from":"src","to":"dst","map":"value * 2"}"#)
        hosts[1].send(#"{"op":"set","key":"src","value":7}"#)
        cluster.decide()
        for store in cluster.stores { XCTAssertEqual(store.value(forKey: "dst"), 14) }
        XCTAssertEqual(cluster.log.map { $0.putKeys.map(\.key) }, [[], ["src"], ["dst"]])
        XCTAssertEqual(hosts[2].events().compactMap { $0["new"] }, [14])
        let reader = Client(store: cluster.stores[0], access: .read)
        XCTAssertEqual(reader.request(#"{"op":"get","key":"dst"}"#)["version"], 1, "written once")
    }

    /// A binding's first write reads its source on the host that makes it: when the source
    /// changed first on another host, the binding is run again with the new value.
    func test_aBindingMadeWhileItsSourceChanges_writesTheNewValue() {
        let cluster = SimulatedCluster(hosts: 2)
        let hosts = clients(cluster)
        cluster.decidesAtOnce = false
        hosts[1].send(#"{"op":"set","key":"src","value":7}"#)
        hosts[0].send(#"{"op":"bind","from":"src","to":"dst","map":"(value ?? 0) * 2"}"#)
        cluster.decide()
        for store in cluster.stores { XCTAssertEqual(store.value(forKey: "dst"), 14) }
        XCTAssertEqual(cluster.log.map { $0.putKeys.map(\.key) }, [["src"], ["dst"]])
    }

    /// Three hosts whose proposals are decided when the test says: host 0 binds src -> dst
    /// (value * 2), and host 1 sets src 7 from a view without the binding.
    private func aBindingAndAPlainWriteThatMissesIt() -> (SimulatedCluster, [Client]) {
        let cluster = SimulatedCluster(hosts: 3)
        let hosts = clients(cluster)
        cluster.decidesAtOnce = false
        hosts[0].send(#"{"op":"bind","from":"src","to":"dst","map":"value * 2"}"#)
        hosts[1].send(#"{"op":"set","key":"src","value":7}"#)
        return (cluster, hosts)
    }

    /// The target written after the plain write and before any repair: the binding's write would
    /// have come first and been overwritten, so no host writes it now.
    func test_aRepairDoesNotOverwriteALaterWriteOfTheTarget() {
        let (cluster, hosts) = aBindingAndAPlainWriteThatMissesIt()
        hosts[2].send(#"{"op":"set","key":"dst","value":99}"#)
        cluster.decide()
        for store in cluster.stores { XCTAssertEqual(store.value(forKey: "dst"), 99) }
        XCTAssertEqual(cluster.log.map { $0.putKeys.map(\.key) }, [[], ["src"], ["dst"]])
    }

    /// The source changed again (by a host that had the binding) before any repair: that change
    /// carries the binding's write, and the repairs of the older one write nothing.
    func test_aRepairIsDroppedWhenTheSourceChangedAgain() {
        let (cluster, hosts) = aBindingAndAPlainWriteThatMissesIt()
        cluster.decideNext()
        hosts[0].send(#"{"op":"set","key":"src","value":8}"#)
        cluster.decide()
        for store in cluster.stores { XCTAssertEqual(store.value(forKey: "dst"), 16) }
        XCTAssertEqual(cluster.log.map { $0.putKeys.map(\.key).sorted() }, [[], ["src"], ["dst", "src"]])
    }

    /// The log cannot be reached when the hosts repair a binding's write: they try again until it
    /// can, and the first to reach it writes the target, once.
    func test_aRepairTheLogCouldNotTake_isMadeOnceTheLogIsBack() {
        let (cluster, _) = aBindingAndAPlainWriteThatMissesIt()
        cluster.decideNext()
        cluster.decideNext()
        cluster.available = false
        cluster.decide()
        for store in cluster.stores { XCTAssertNil(store.value(forKey: "dst")) }
        cluster.available = true
        cluster.clock.advance(1.5)
        for store in cluster.stores { store.tick() }
        cluster.decide()
        for store in cluster.stores { XCTAssertEqual(store.value(forKey: "dst"), 14) }
        XCTAssertEqual(cluster.log.map { $0.putKeys.map(\.key) }, [[], ["src"], ["dst"]])
    }

    /// Writes that are not plain (a batch, compare-and-set) still compare the bindings: one
    /// proposed without the binding is run again with it, and commits the binding's write itself.
    func test_aBatchProposedBeforeABindingWasApplied_isRunAgainWithIt() {
        let cluster = SimulatedCluster(hosts: 2)
        let hosts = clients(cluster)
        cluster.decidesAtOnce = false
        hosts[0].send(#"{"op":"bind","from":"src","to":"dst"}"#)
        hosts[1].send(#"{"op":"batch","ops":[{"op":"set","key":"src","value":7},{"op":"set","key":"other","value":1}]}"#)
        cluster.decide()
        for store in cluster.stores { XCTAssertEqual(store.value(forKey: "dst"), 7) }
        // The binding's first write (src is missing: null), then the batch with the binding's write.
        XCTAssertEqual(cluster.log.map { $0.putKeys.map(\.key).sorted() }, [["dst"], ["dst", "other", "src"]])
    }

    func test_sinceTakenOnOneHost_resumesOnAnother() {
        let cluster = SimulatedCluster(hosts: 2)
        let hosts = clients(cluster)
        hosts[0].request(#"{"op":"set","key":"k","value":1}"#)
        let seen = hosts[0].request(#"{"op":"ping"}"#)["rev"]!.intValue!
        hosts[0].request(#"{"op":"set","key":"k","value":2}"#)
        hosts[0].request(#"{"op":"set","key":"k","value":3}"#)
        hosts[1].request(#"{"op":"watch","keys":["k"],"since":\#(seen)}"#)
        XCTAssertEqual(hosts[1].pendingEvents.compactMap { try? JSONValue.parse($0) }.compactMap { $0["new"] }, [2, 3])
    }

    func test_anEphemeralKey_vanishesEverywhereWhenItsConnectionCloses() {
        let cluster = SimulatedCluster(hosts: 2)
        let hosts = clients(cluster)
        let owner = Client(store: cluster.stores[0], access: .write)
        owner.request(#"{"op":"set","key":"presence.me","value":true,"ephemeral":true}"#)
        hosts[1].request(#"{"op":"watch","keys":["presence.*"],"initial":false}"#)
        XCTAssertEqual(hosts[1].request(#"{"op":"describe","key":"presence.me"}"#)["ephemeral"], true)
        owner.session.close()
        XCTAssertEqual(hosts[1].events().map { $0["reason"] }, ["ephemeral"])
        for store in cluster.stores { XCTAssertNil(store.value(forKey: "presence.me")) }
    }

    /// A write that lost a race runs again once its host applied the winner's revision. Its
    /// client may be gone by then (the daemon drops a connection that hung up, and with it the
    /// session): the write still runs, as the session's, and nothing it ran with was freed.
    func test_aWriteThatLostARace_runsAgain_afterItsClientIsGone() {
        for closes in [true, false] {
            let cluster = SimulatedCluster(hosts: 2)
            let other = Client(store: cluster.stores[1], access: .write)
            cluster.decidesAtOnce = false
            other.send(#"{"op":"incr","key":"n"}"#)
            var gone: Client? = Client(store: cluster.stores[0], access: .write)
            weak let session = gone!.session
            gone!.send(#"{"op":"batch","ops":[{"op":"incr","key":"n"},{"op":"set","key":"m","value":1}]}"#)
            if closes { gone!.session.close() }
            gone = nil
            cluster.decide()
            for store in cluster.stores {
                XCTAssertEqual(store.value(forKey: "n"), 2, "closed first: \(closes)")
                XCTAssertEqual(store.value(forKey: "m"), 1, "closed first: \(closes)")
            }
            XCTAssertNil(session, "the session is let go once its write is decided")
        }
    }

    /// An ephemeral key whose write was under way when its connection closed: the close found
    /// nothing to remove, so the key goes once a host applies it, on every host; so does one its
    /// write set again after losing a race, and one whose write was answered with a failure (no
    /// answer within the timeout) though it was committed.
    func test_anEphemeralKeySetWhileItsConnectionCloses_vanishesOnceTheWriteIsApplied() {
        for (loses, answer) in [(false, nil), (true, nil), (false, ObsError(.unavailable, "not applied within the timeout"))] {
            let cluster = SimulatedCluster(hosts: 2)
            let watcher = Client(store: cluster.stores[1], access: .write)
            watcher.request(#"{"op":"watch","keys":["presence.*"],"initial":false}"#)
            cluster.decidesAtOnce = false
            cluster.answersCommittedWith = answer
            // The batch depends on `n`: an increment on the other host first makes it lose.
            if loses { watcher.send(#"{"op":"incr","key":"n"}"#) }
            let owner = Client(store: cluster.stores[0], access: .write)
            owner.send(#"{"op":"batch","ops":[{"op":"incr","key":"n"},{"op":"set","key":"presence.me","value":true,"ephemeral":true}]}"#)
            owner.session.close()
            cluster.decide()
            let variant = "lost a race: \(loses), answered: \(answer?.message ?? "committed")"
            for store in cluster.stores {
                XCTAssertNil(store.value(forKey: "presence.me"), variant)
                XCTAssertEqual(store.value(forKey: "n"), loses ? 2 : 1, variant)
            }
            XCTAssertEqual(watcher.events().map { $0["reason"] }, [nil, "ephemeral"], variant)
        }
    }

    /// Two writes that each refuse a cycle on one host, raced from two hosts, would close one
    /// together: bindings x -> y and y -> x, or computeds a = $b and b = $a. The second the log
    /// decides runs again, finds the first, and is refused as it would be on one host.
    func test_twoWritesThatCloseACycleTogether_racedFromTwoHosts_oneIsRefused() {
        let pairs = [(#"{"id":1,"op":"bind","from":"x","to":"y"}"#, #"{"id":2,"op":"bind","from":"y","to":"x"}"#),
                     (#"{"id":1,"op":"define","key":"a","expr":"$b"}"#, #"{"id":2,"op":"define","key":"b","expr":"$a"}"#),
                     (#"{"id":1,"op":"define","key":"a","expr":"$b + 1"}"#, #"{"id":2,"op":"bind","from":"a","to":"b"}"#)]
        for (first, second) in pairs {
            let cluster = SimulatedCluster(hosts: 2)
            let hosts = clients(cluster)
            cluster.decidesAtOnce = false
            hosts[0].send(first)
            hosts[1].send(second)
            cluster.decide()
            let answers = hosts.flatMap { $0.output.take() }.compactMap { try? JSONValue.parse($0) }
            XCTAssertEqual(answers.filter { $0["ok"] == true }.count, 1, "\(first) \(second): \(answers)")
            XCTAssertEqual(answers.compactMap { $0["error"]?["code"] }, ["cycle"], "\(first) \(second)")
            let dumps = cluster.stores.map { JSONValue.object(Dictionary(uniqueKeysWithValues: $0.dump())).encoded }
            XCTAssertEqual(dumps[0], dumps[1], "one state on both hosts")
        }
    }

    /// Every host's timer proposes the expiry; the first wins, the others find the key gone.
    func test_aTTLKeyExpiresOnce() {
        let cluster = SimulatedCluster(hosts: 3)
        let hosts = clients(cluster)
        hosts[0].request(#"{"op":"set","key":"t","value":1,"ttl_ms":500}"#)
        hosts[2].request(#"{"op":"watch","keys":["t"],"initial":false}"#)
        let before = cluster.log.count
        cluster.clock.advance(1)
        for store in cluster.stores { store.tick() }
        XCTAssertEqual(cluster.log.count, before + 1)
        XCTAssertEqual(hosts[2].events().map { $0["reason"] }, ["ttl"])
    }

    /// A write no client waits for (a TTL key's expiry, a closed connection's ephemeral keys) is
    /// tried again a second later after any failure of the log that may pass, not `unavailable`
    /// only: given up, the key would stay. One refused as too large would fail again: not retried.
    func test_writesNoClientWaitsFor_areTriedAgainAfterAFailureThatMayPass() {
        for (refusal, retried) in [(ObsError(.unavailable, "no quorum"), true), (ObsError(.internal, "etcdserver: something new"), true),
                                   (ObsError(.tooLarge, "etcd refused the transaction as too large"), false)] {
            let cluster = SimulatedCluster(hosts: 1)
            let store = cluster.stores[0]
            let client = clients(cluster)[0]
            client.request(#"{"op":"set","key":"t","value":1,"ttl_ms":500}"#)
            let owner = Client(store: store, access: .write)
            owner.request(#"{"op":"set","key":"e","value":1,"ephemeral":true}"#)
            cluster.refusal = refusal
            owner.session.close()
            cluster.clock.advance(1)
            store.tick()
            XCTAssertEqual(store.value(forKey: "t"), 1, "\(refusal.code)")
            XCTAssertEqual(store.value(forKey: "e"), 1, "\(refusal.code)")
            cluster.refusal = nil
            // The ephemeral key's removal failed twice: after `internal`, the second pause is 2 s.
            cluster.clock.advance(2.5)
            store.tick()
            XCTAssertEqual(store.value(forKey: "t") == nil, retried, "\(refusal.code): the expiry")
            XCTAssertEqual(store.value(forKey: "e") == nil, retried, "\(refusal.code): the ephemeral key")
        }
    }

    /// A write no client waits for, refused `internal` again and again (an answer the host cannot
    /// take, which may come every time), is tried again ever less often, up to once a minute,
    /// and never given up; after `unavailable` (etcd out of reach) it goes on every second.
    func test_aWriteNoClientWaitsFor_backsOffAfterInternalFailures_butNotWhileEtcdIsOutOfReach() {
        for (refusal, expected) in [(ObsError(.internal, "etcdserver: something new"), 9), (ObsError(.unavailable, "no quorum"), 200)] {
            let cluster = SimulatedCluster(hosts: 1)
            let store = cluster.stores[0]
            clients(cluster)[0].request(#"{"op":"set","key":"t","value":1,"ttl_ms":500}"#)
            cluster.refusal = refusal
            let before = cluster.proposalsDecided
            // 200 seconds: tried at 1 s, then after pauses of 1, 2, 4, 8, 16, 32, 64, 64 s.
            for _ in 0..<200 {
                cluster.clock.advance(1)
                store.tick()
            }
            XCTAssertEqual(cluster.proposalsDecided - before, expected, "\(refusal.code)")
            XCTAssertEqual(store.value(forKey: "t"), 1, "\(refusal.code)")
            cluster.refusal = nil
            for _ in 0..<64 {
                cluster.clock.advance(1)
                store.tick()
            }
            XCTAssertNil(store.value(forKey: "t"), "\(refusal.code): the expiry, given up")
        }
    }

    /// Random binds, unbinds and restores of two bindings, on either of two hosts: after each,
    /// both hosts hold the same bindings, and so does a store loaded from the binding records the
    /// log's transactions leave (what a host that reads the prefix installs).
    func test_bindingsMadeOnEitherHost_areTheSameOnBoth_andInTheRecordsTheLogLeaves() throws {
        var random = SplitMix64(seed: 1204)
        for trial in 0..<20 {
            let cluster = SimulatedCluster(hosts: 2)
            let hosts = clients(cluster)
            var steps: [String] = []
            for _ in 0..<10 {
                let request = randomBindingRequest(over: ["p", "q", "r", "s"], using: &random)
                let host = Int.random(in: 0..<2, using: &random)
                hosts[host].request(request)
                steps.append("\(host): \(request)")
                let records = MemoryStorage()
                for transaction in cluster.log { try records.commit(transaction) }
                let read = Harness(storage: records).connect()
                XCTAssertEqual(dumpedBindings(hosts[1]), dumpedBindings(hosts[0]), "trial \(trial): \(steps)")
                XCTAssertEqual(dumpedBindings(read), dumpedBindings(hosts[0]), "trial \(trial): \(steps)")
            }
        }
    }

    /// The back-off after `internal` is not started again by an `unavailable` in between: three
    /// `internal`s, two `unavailable`s, then `internal` again. Tried at 1 s, then after pauses of
    /// 1, 2 (twice internal), 4, 4, 4 (the third internal and the two unavailable keep the count),
    /// 8, 16, 32 s: at 1, 2, 4, 8, 12, 16, 24, 40 and 72 s, nine times in 100 s. (Started again,
    /// it would be tried twelve times.)
    func test_theBackOffAfterInternalFailures_isKeptAcrossUnavailable() {
        let cluster = SimulatedCluster(hosts: 1)
        let store = cluster.stores[0]
        clients(cluster)[0].request(#"{"op":"set","key":"t","value":1,"ttl_ms":500}"#)
        let before = cluster.proposalsDecided
        for _ in 0..<100 {
            switch cluster.proposalsDecided - before {
            case 0..<3: cluster.refusal = ObsError(.internal, "etcdserver: something new")
            case 3..<5: cluster.refusal = ObsError(.unavailable, "no quorum")
            default: cluster.refusal = ObsError(.internal, "etcdserver: something new")
            }
            cluster.clock.advance(1)
            store.tick()
        }
        XCTAssertEqual(cluster.proposalsDecided - before, 9)
        XCTAssertEqual(store.value(forKey: "t"), 1)
    }

    /// A proposal the log could not take for a reason that has passed (`.retry`: this host's
    /// lease renewed) runs again; when that took the write's whole time, the client is told why,
    /// not that it lost races it did not run.
    func test_aWriteTheLogAsksToRunAgain_runsAgain_orFailsSayingWhyOnceItsTimeIsOut() {
        let cluster = SimulatedCluster(hosts: 1)
        let client = clients(cluster)[0]
        cluster.retryAnswers = [("the lease was renewed", 1)]
        XCTAssertEqual(client.request(#"{"op":"set","key":"k","value":1,"ephemeral":true}"#)["ok"], true)
        XCTAssertEqual(cluster.stores[0].value(forKey: "k"), 1)
        XCTAssertEqual(cluster.proposalsDecided, 2)

        cluster.retryAnswers = [("the lease was renewed", 6)]
        let answer = client.request(#"{"op":"set","key":"k","value":2,"ephemeral":true}"#)
        XCTAssertEqual(errorCode(answer), "unavailable")
        let message = answer["error"]?["message"]?.stringValue ?? ""
        XCTAssertTrue(message.hasPrefix("the lease was renewed, but the write's time ran out"), message)
        XCTAssertFalse(message.contains("race"), message)
        XCTAssertEqual(cluster.stores[0].value(forKey: "k"), 1)
    }

    func test_whenTheLogIsUnavailable_writesFailWithUnavailable_andReadsGoOn() {
        let cluster = SimulatedCluster(hosts: 2)
        let hosts = clients(cluster)
        hosts[0].request(#"{"op":"set","key":"k","value":1}"#)
        cluster.available = false
        XCTAssertEqual(errorCode(hosts[0].request(#"{"op":"set","key":"k","value":2}"#)), "unavailable")
        XCTAssertEqual(hosts[1].request(#"{"op":"get","key":"k"}"#)["value"], 1)
        cluster.available = true
        XCTAssertEqual(hosts[0].request(#"{"op":"set","key":"k","value":2}"#)["ok"], true)
    }

    /// While an answer is pending, later requests of the connection wait, and are answered in
    /// order once it is given (a read after a write sees the write).
    func test_requestsAfterAPendingWrite_waitAndKeepTheirOrder() {
        let cluster = SimulatedCluster(hosts: 1)
        let client = Client(store: cluster.stores[0], access: .write)
        cluster.decidesAtOnce = false
        XCTAssertEqual(client.send("{\"id\":1,\"op\":\"set\",\"key\":\"k\",\"value\":5}\n{\"id\":2,\"op\":\"get\",\"key\":\"k\"}\n{\"id\":3,\"op\":\"ping\"}"), [])
        cluster.decide()
        let answers = client.output.take().compactMap { try? JSONValue.parse($0) }
        XCTAssertEqual(answers.map { $0["id"] }, [1, 2, 3])
        XCTAssertEqual(answers[1]["value"], 5)
    }

    func test_publish_reachesWatchersOnEveryHost() {
        let cluster = SimulatedCluster(hosts: 2)
        let hosts = clients(cluster)
        hosts[1].request(#"{"op":"watch","keys":["news"],"initial":false}"#)
        XCTAssertEqual(hosts[0].request(#"{"op":"publish","channel":"news","payload":"hi"}"#)["delivered"], 0, "counted on the host that answers")
        XCTAssertEqual(hosts[1].events().map { $0["payload"] }, ["hi"])
    }

    /// A revision that puts one plain key is applied as a local plain write is when nothing reads
    /// the key (it stays a record), and the general way when it is a node (a computed reads it) or
    /// a new key a `match()` sees. Both ways give the same events, revisions and versions: the
    /// same writes made in a cluster whose computeds read `k` and `m.*` and in one whose computeds
    /// read nothing. The same value put again (two hosts racing) is a revision with no event.
    func test_aPlainPutApplied_toARecordOrToANode_givesTheSameEventsAndRevisions() {
        func run(_ definitions: [String]) -> (cluster: SimulatedCluster, events: [[[String: JSONValue]]], described: [[String: JSONValue]]) {
            let cluster = SimulatedCluster(hosts: 2)
            let hosts = clients(cluster)
            for definition in definitions { XCTAssertEqual(hosts[1].request(definition)["ok"], true) }
            for host in hosts { host.request(#"{"op":"watch","keys":["k","j","m.1"],"initial":false}"#) }
            let serials = cluster.stores.map(\.transactionSerial)
            for line in [#"{"op":"set","key":"k","value":1}"#, #"{"op":"set","key":"k","value":{"a":[1,2.5,"x"]}}"#,
                         #"{"op":"set","key":"j","value":"new"}"#, #"{"op":"set","key":"m.1","value":true}"#,
                         #"{"op":"set","key":"k","value":3}"#] {
                hosts[0].session.receive(line)
            }
            transactions = zip(cluster.stores, serials).map { $0.transactionSerial - $1 }
            cluster.decidesAtOnce = false
            hosts[0].session.receive(#"{"op":"set","key":"k","value":5}"#)
            hosts[1].session.receive(#"{"op":"set","key":"k","value":5}"#)
            cluster.decide()
            XCTAssertEqual(cluster.stores.map(\.rev), [9, 9], "the same value again is a revision")
            let lines = hosts.map { $0.output.take().compactMap { (try? JSONValue.parse($0))?.objectValue } }
            XCTAssertEqual(lines[0].filter { $0["ok"] != nil }.map { $0["ok"] }, Array(repeating: true, count: 6))
            let events = lines.map { $0.filter { $0["event"] != nil } }
            let described = ["k", "j", "m.1"].flatMap { key in hosts.map { $0.request(#"{"op":"describe","key":"\#(key)"}"#) } }
            return (cluster, events, described)
        }
        var transactions: [UInt64] = []
        let read = run([#"{"op":"define","key":"double","expr":"($k ?? 0) * 2"}"#,
                        #"{"op":"define","key":"ms","expr":"len(keys(match(\"m.*\")))"}"#])
        XCTAssertEqual(transactions, [8, 4], "k (three writes) and the new m.1 the general way: proposed and applied on host 0, applied on host 1; j the short way")
        let unread = run([#"{"op":"define","key":"one","expr":"1"}"#, #"{"op":"define","key":"two","expr":"2"}"#])
        XCTAssertEqual(transactions, [1, 0], "only k's value that the scanner does not take (an object) runs a transaction")
        for store in read.cluster.stores {
            guard case .node = store.view("k") else { return XCTFail("k is read by a computed: a node") }
            XCTAssertEqual(Client(store: store, access: .read).request(#"{"op":"get","key":"ms"}"#)["value"], 1, "m.1 seen by match()")
        }
        for store in unread.cluster.stores {
            guard case .record = store.view("k"), case .record = store.view("m.1") else { return XCTFail("nothing reads k or m.1: records") }
        }
        XCTAssertEqual(unread.events[0].map { $0["rev"] }, [3, 4, 5, 6, 7, 8], "one event per changed revision, none for the same value")
        XCTAssertEqual(unread.events[0].map { $0["created"] }, [true, false, true, true, false, false].map { JSONValue.bool($0) })
        XCTAssertEqual(unread.events[0].map { $0["new"] }, [1, ["a": [1, 2.5, "x"]], "new", true, 3, 5])
        for events in unread.events + read.events { XCTAssertEqual(events, unread.events[0]) }
        XCTAssertEqual(unread.described.map { [$0["rev"], $0["created_rev"], $0["version"]] },
                       [[9, 3, 5], [9, 3, 5], [5, 5, 1], [5, 5, 1], [6, 6, 1], [6, 6, 1]])
        for (record, node) in zip(unread.described, read.described) {
            for field in ["value", "rev", "created_rev", "version"] { XCTAssertEqual(record[field], node[field], field) }
        }
    }

    /// A `set` of a plain key to a new value is proposed without running a transaction (the hot
    /// path): the same one key put the general path proposes, the same answer once the log decides
    /// it, the same events on every host. A `set` the hot path does not take (a fraction, a key a
    /// computed reads, the same value) runs the general way, and a refused one answers as before.
    func test_aPlainSet_isProposedWithoutATransaction_andAnsweredAsTheGeneralPathAnswers() {
        let cluster = SimulatedCluster(hosts: 2)
        let hosts = clients(cluster)
        hosts[1].request(#"{"op":"watch","keys":["k","n","read"],"initial":false}"#)
        hosts[0].request(#"{"op":"define","key":"c","expr":"$read ?? 0"}"#)
        let store = cluster.stores[0]
        func set(_ line: String, transactions: UInt64) -> String? {
            let before = store.transactionSerial
            let answer = hosts[0].send(line).first
            XCTAssertEqual(store.transactionSerial - before, transactions, line)
            return answer
        }
        XCTAssertEqual(set(#"{"id":"a","op":"set","key":"k","value":"x"}"#, transactions: 0), #"{"id":"a","ok":true,"rev":2,"changed":true}"#)
        XCTAssertEqual(set(#"{"id":7,"op":"set","key":"k","value":12}"#, transactions: 0), #"{"id":7,"ok":true,"rev":3,"changed":true}"#)
        XCTAssertEqual(set(#"{"op":"set","key":"n","value":null}"#, transactions: 0), #"{"id":null,"ok":true,"rev":4,"changed":true}"#)
        XCTAssertEqual(cluster.log.last?.putKeys.map(\.key), ["n"])
        XCTAssertEqual(cluster.log.last.map { $0.deletedKeys.isEmpty && $0.putDefinitions.isEmpty && $0.reason == nil }, true)
        // Each of these takes the general path: a transaction (and one more where the log's revision
        // is applied to a key a computed reads).
        XCTAssertEqual(set(#"{"id":8,"op":"set","key":"k","value":1.5}"#, transactions: 1), #"{"id":8,"ok":true,"rev":5,"changed":true}"#)
        XCTAssertEqual(set(#"{"id":9,"op":"set","key":"read","value":1}"#, transactions: 2), #"{"id":9,"ok":true,"rev":6,"changed":true}"#)
        XCTAssertEqual(set(#"{"id":10,"op":"set","key":"n","value":null}"#, transactions: 1), #"{"id":10,"ok":true,"rev":6,"changed":false}"#)
        XCTAssertEqual(set(#"{"id":11,"op":"set","key":"c","value":1}"#, transactions: 1)?.contains(#""code":"read_only""#), true)
        XCTAssertEqual(hosts[1].events().map { [$0["key"], $0["rev"], $0["new"]] },
                       [["k", 2, "x"], ["k", 3, 12], ["n", 4, .null], ["k", 5, .double(1.5)], ["read", 6, 1]])
        XCTAssertEqual(hosts[1].request(#"{"op":"get","key":"k"}"#)["version"], 3)
        // An answer given at once to an id that re-encodes otherwise leaves nothing for the next.
        for (get, set_) in [(#"{"id":1.50,"op":"get","key":"n"}"#, #"{"id":14,"op":"set","key":"k","value":"y"}"#),
                            (#"{"id":-0,"op":"get","key":"n"}"#, #"{"id":12,"op":"set","key":"k","value":2}"#)] {
            XCTAssertEqual(hosts[0].send(get).first?.hasPrefix(#"{"id":\#(get.dropFirst(6).prefix { $0 != "," }),"ok":true"#), true, get)
            cluster.available = set_.contains("12") ? false : true
            let answer = set(set_, transactions: 0)
            XCTAssertEqual(answer?.hasPrefix(#"{"id":\#(set_.dropFirst(6).prefix { $0 != "," }),"ok":\#(cluster.available)"#), true, answer ?? "")
        }
        XCTAssertEqual(set(#"{"id":15,"op":"set","key":"k","value":2}"#, transactions: 0)?.contains(#""code":"unavailable""#), true)
        cluster.available = true
        hosts[0].session.access = .read
        XCTAssertEqual(set(#"{"id":13,"op":"set","key":"k","value":2}"#, transactions: 0)?.contains(#""code":"permission_denied""#), true)
    }

    /// A snapshot (the whole state read again after a compaction) is applied at the read's
    /// revision, and each key keeps its own: one plain key that changed in it is applied the
    /// general way.
    func test_aSnapshotOfOnePlainKey_keepsTheKeysOwnRevision() {
        let cluster = SimulatedCluster(hosts: 1)
        let store = cluster.stores[0]
        var first = StoredTransaction(rev: 10)
        first.putKeys = [StoredKey(key: "a", value: 1, rev: 10, createdRev: 10, version: 1)]
        store.apply(first)
        store.applySnapshot(StoredState(rev: 12, keys: [StoredKey(key: "a", value: 2, rev: 11, createdRev: 10, version: 2)]))
        let a = Client(store: store, access: .read).request(#"{"op":"describe","key":"a"}"#)
        XCTAssertEqual([a["value"], a["rev"], a["created_rev"], a["version"]], [2, 11, 10, 2])
        XCTAssertEqual(store.rev, 12)
    }

    /// Values that are equal though their bytes differ (strings compare by Unicode canonical
    /// equivalence: "é" composed or not, the Kelvin sign and "K") are the same value on every
    /// host, whether the key is a record there or a node: a `set` to such a value changes
    /// nothing, and a revision that puts one (two hosts racing) gives no event.
    func test_equalValuesWithOtherBytes_areTheSameValueOnEveryHost() {
        func run(_ definition: String) -> (answers: [String?], events: [[String: JSONValue]], value: [String: JSONValue]) {
            let cluster = SimulatedCluster(hosts: 2)
            let hosts = clients(cluster)
            hosts[1].request(definition)
            hosts[1].request(#"{"op":"watch","keys":["t","u"],"initial":false}"#)
            var answers = [hosts[0].send(#"{"id":1,"op":"set","key":"t","value":"\u212A"}"#).first,
                           hosts[0].send(#"{"id":2,"op":"set","key":"t","value":"K"}"#).first]
            cluster.decidesAtOnce = false
            hosts[0].session.receive(#"{"id":3,"op":"set","key":"u","value":"\u00e9"}"#)
            hosts[1].session.receive(#"{"id":4,"op":"set","key":"u","value":"e\u0301"}"#)
            cluster.decide()
            let lines = hosts.map { $0.output.take() }
            answers += lines.map { $0.first { $0.hasPrefix(#"{"id":"#) } }
            let events = lines[1].compactMap { (try? JSONValue.parse($0))?.objectValue }.filter { $0["event"] != nil }
            return (answers, events, hosts[0].request(#"{"op":"describe","key":"u"}"#))
        }
        let read = run(#"{"op":"define","key":"c","expr":"[$t, $u]"}"#)
        let unread = run(#"{"op":"define","key":"c","expr":"1"}"#)
        XCTAssertEqual(unread.answers, [#"{"id":1,"ok":true,"rev":2,"changed":true}"#, #"{"id":2,"ok":true,"rev":2,"changed":false}"#,
                                        #"{"id":3,"ok":true,"rev":3,"changed":true}"#, #"{"id":4,"ok":true,"rev":4,"changed":true}"#])
        XCTAssertEqual(unread.events.map { [$0["key"], $0["rev"]] }, [["t", 2], ["u", 3]], "no event for the same value")
        XCTAssertEqual(unread.value["value"], .string("\u{e9}"))
        XCTAssertEqual([unread.value["rev"], unread.value["version"]], [4, 2])
        XCTAssertEqual(read.answers, unread.answers)
        XCTAssertEqual(read.events.filter { $0["key"] != "c" }, unread.events)
        for field in ["value", "rev", "created_rev", "version"] { XCTAssertEqual(read.value[field], unread.value[field], field) }
    }
}
