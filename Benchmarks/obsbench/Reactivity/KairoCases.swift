import Synchronization
import ObsCore

// The eight kairo cases of js-reactivity-benchmark (src/benches/kairo/*.ts), with their shapes,
// constants and asserts. Each suite `effect` is an observer with `initial: true`, so it runs once
// when created as the effect does; an effect reruns only when what it reads has changed, which is
// when ObsCore calls an observer. Every computed also bumps a counter, for the table's recompute
// counts; the suite has no such counters, and one increment is noise next to a computed's run.

/// One kairo case once built: the suite's `iter` closure and the counters it feeds.
struct KairoGraph {
    let iteration: () -> Void
    let computedRuns: Counter
    let effectRuns: Counter
    /// Keeps the observers alive as long as the case runs; releasing them cancels them.
    let tokens: [Any]
}

/// deepPropagation: a chain of 50 computeds under one signal, an effect on the last.
func deepPropagation() -> KairoGraph {
    let len = 50
    let computedRuns = Counter(), callCounter = Counter()
    let head = Observable(0)
    let nodes = NodeOwner()
    var current = Readable(head, keptBy: nodes)
    var chain: [Computed<Int>] = []
    for _ in 0..<len {
        let c = current
        let next = Computed { computedRuns.increment(); return c.value + 1 }
        chain.append(next)
        current = Readable(next, keptBy: nodes)
    }
    let end = chain[len - 1]
    let tokens: [Any] = [end.observe(initial: true) { _ in callCounter.increment() }, nodes]

    let iter = 50
    return KairoGraph(
        iteration: {
            batch { head.value = 1 }
            let atleast = iter
            callCounter.count = 0
            for i in 0..<iter {
                batch { head.value = i }
                check(end.value == len + i, "deepPropagation: \(end.value) != \(len + i)")
            }
            check(callCounter.count == atleast, "deepPropagation: effect ran \(callCounter.count) times, expected \(atleast)")
        },
        computedRuns: computedRuns, effectRuns: callCounter, tokens: tokens)
}

/// broadPropagation: 50 pairs of computeds side by side under one signal, an effect on each pair.
func broadPropagation() -> KairoGraph {
    let computedRuns = Counter(), callCounter = Counter()
    let head = Observable(0)
    var last = head as ObservableValue<Int>
    var tokens: [Any] = []
    for i in 0..<50 {
        let current = Computed { computedRuns.increment(); return head.value + i }
        let current2 = Computed { computedRuns.increment(); return current.value + 1 }
        tokens.append(current2.observe(initial: true) { _ in callCounter.increment() })
        last = current2
    }
    let end = last

    return KairoGraph(
        iteration: {
            batch { head.value = 1 }
            let atleast = 50 * 50
            callCounter.count = 0
            for i in 0..<50 {
                batch { head.value = i }
                check(end.value == i + 50, "broadPropagation: \(end.value) != \(i + 50)")
            }
            check(callCounter.count == atleast, "broadPropagation: effects ran \(callCounter.count) times, expected \(atleast)")
        },
        computedRuns: computedRuns, effectRuns: callCounter, tokens: tokens)
}

/// diamond: five computeds on one signal, summed by a sixth, an effect on the sum.
func diamond() -> KairoGraph {
    let width = 5
    let computedRuns = Counter(), callCounter = Counter()
    let head = Observable(0)
    let current = (0..<width).map { _ in
        Computed { computedRuns.increment(); return head.value + 1 }
    }
    // The suite maps to an array and reduces it; reducing directly reads the same nodes in the same
    // order without timing an array allocation on every run.
    let sum = Computed { computedRuns.increment(); return current.reduce(0) { $0 + $1.value } }
    let tokens: [Any] = [sum.observe(initial: true) { _ in callCounter.increment() }]

    return KairoGraph(
        iteration: {
            batch { head.value = 1 }
            check(sum.value == 2 * width, "diamond: \(sum.value) != \(2 * width)")
            let atleast = 500
            callCounter.count = 0
            for i in 0..<500 {
                batch { head.value = i }
                check(sum.value == (i + 1) * width, "diamond: \(sum.value) != \((i + 1) * width)")
            }
            check(callCounter.count == atleast, "diamond: effect ran \(callCounter.count) times, expected \(atleast)")
        },
        computedRuns: computedRuns, effectRuns: callCounter, tokens: tokens)
}

/// triangle: a chain of 10 under one signal, and a sum reading the signal and every link but the
/// last, an effect on the sum.
func triangle() -> KairoGraph {
    let width = 10
    let computedRuns = Counter(), callCounter = Counter()
    let head = Observable(0)
    let nodes = NodeOwner()
    var current = Readable(head, keptBy: nodes)
    var list: [Readable<Int>] = []
    for _ in 0..<width {
        let c = current
        list.append(current)
        current = Readable(Computed { computedRuns.increment(); return c.value + 1 }, keptBy: nodes)
    }
    let summed = list
    let sum = Computed { computedRuns.increment(); return summed.reduce(0) { $0 + $1.value } }
    let tokens: [Any] = [sum.observe(initial: true) { _ in callCounter.increment() }, nodes]

    return KairoGraph(
        iteration: {
            let constant = (1...width).reduce(0, +)
            batch { head.value = 1 }
            check(sum.value == constant, "triangle: \(sum.value) != \(constant)")
            let atleast = 100
            callCounter.count = 0
            for i in 0..<100 {
                batch { head.value = i }
                let expected = constant - width + i * width
                check(sum.value == expected, "triangle: \(sum.value) != \(expected)")
            }
            check(callCounter.count == atleast, "triangle: effect ran \(callCounter.count) times, expected \(atleast)")
        },
        computedRuns: computedRuns, effectRuns: callCounter, tokens: tokens)
}

/// mux: 100 signals gathered into one computed value, split again into 100 computeds, each
/// followed by one more computed and an effect.
func mux() -> KairoGraph {
    let computedRuns = Counter(), effectRuns = Counter()
    let heads = (0..<100).map { _ in Observable(0) }
    // The suite builds an object keyed by index (`Object.fromEntries`); an array is that map.
    let mux = Computed { computedRuns.increment(); return heads.map { $0.value } }
    let splited = heads.indices
        .map { index in Computed { computedRuns.increment(); return mux.value[index] } }
        .map { x in Computed { computedRuns.increment(); return x.value + 1 } }
    // The suite's effects here count nothing; the harness counts them for the table.
    let tokens: [Any] = splited.map { x in x.observe(initial: true) { _ in effectRuns.increment() } }

    return KairoGraph(
        iteration: {
            for i in 0..<10 {
                batch { heads[i].value = i }
                check(splited[i].value == i + 1, "mux: \(splited[i].value) != \(i + 1)")
            }
            for i in 0..<10 {
                batch { heads[i].value = i * 2 }
                check(splited[i].value == i * 2 + 1, "mux: \(splited[i].value) != \(i * 2 + 1)")
            }
        },
        computedRuns: computedRuns, effectRuns: effectRuns, tokens: tokens)
}

/// repeatedObservers: one computed reading the same signal 30 times, an effect on it.
func repeatedObservers() -> KairoGraph {
    let size = 30
    let computedRuns = Counter(), callCounter = Counter()
    let head = Observable(0)
    let current = Computed {
        computedRuns.increment()
        var result = 0
        for _ in 0..<size {
            result += head.value
        }
        return result
    }
    let tokens: [Any] = [current.observe(initial: true) { _ in callCounter.increment() }]

    return KairoGraph(
        iteration: {
            batch { head.value = 1 }
            check(current.value == size, "repeatedObservers: \(current.value) != \(size)")
            let atleast = 100
            callCounter.count = 0
            for i in 0..<100 {
                batch { head.value = i }
                check(current.value == i * size, "repeatedObservers: \(current.value) != \(i * size)")
            }
            check(callCounter.count == atleast, "repeatedObservers: effect ran \(callCounter.count) times, expected \(atleast)")
        },
        computedRuns: computedRuns, effectRuns: callCounter, tokens: tokens)
}

/// unstable: a computed whose dependencies switch between two computeds with the parity of the
/// signal, an effect on it.
func unstable() -> KairoGraph {
    let computedRuns = Counter(), callCounter = Counter()
    let head = Observable(0)
    let double = Computed { computedRuns.increment(); return head.value * 2 }
    let inverse = Computed { computedRuns.increment(); return -head.value }
    let current = Computed {
        computedRuns.increment()
        var result = 0
        for _ in 0..<20 {
            result += head.value % 2 != 0 ? double.value : inverse.value
        }
        return result
    }
    let tokens: [Any] = [current.observe(initial: true) { _ in callCounter.increment() }]

    return KairoGraph(
        iteration: {
            batch { head.value = 1 }
            check(current.value == 40, "unstable: \(current.value) != 40")
            let atleast = 100
            callCounter.count = 0
            for i in 0..<100 {
                batch { head.value = i }
            }
            check(callCounter.count == atleast, "unstable: effect ran \(callCounter.count) times, expected \(atleast)")
        },
        computedRuns: computedRuns, effectRuns: callCounter, tokens: tokens)
}

/// avoidablePropagation: a chain whose second link always yields 0, so an engine with equality
/// cut-off never reruns the heavy third link, the rest of the chain or the heavy effect.
func avoidablePropagation() -> KairoGraph {
    let computedRuns = Counter(), effectRuns = Counter()
    let head = Observable(0)
    let computed1 = Computed { computedRuns.increment(); return head.value }
    let computed2 = Computed { computedRuns.increment(); _ = computed1.value; return 0 }
    let computed3 = Computed { computedRuns.increment(); busy(); return computed2.value + 1 }
    let computed4 = Computed { computedRuns.increment(); return computed3.value + 2 }
    let computed5 = Computed { computedRuns.increment(); return computed4.value + 3 }
    let tokens: [Any] = [computed5.observe(initial: true) { _ in effectRuns.increment(); busy() }]

    return KairoGraph(
        iteration: {
            batch { head.value = 1 }
            check(computed5.value == 6, "avoidablePropagation: \(computed5.value) != 6")
            for i in 0..<1000 {
                batch { head.value = i }
                check(computed5.value == 6, "avoidablePropagation: \(computed5.value) != 6")
            }
        },
        computedRuns: computedRuns, effectRuns: effectRuns, tokens: tokens)
}

/// The suite's `busy()`: 100 increments standing for heavy work. The counter is atomic only
/// because the optimizer may not fold atomic loads and stores away, as it would a plain loop.
private func busy() {
    let a = Atomic<Int>(0)
    for _ in 0..<100 {
        a.store(a.load(ordering: .relaxed) + 1, ordering: .relaxed)
    }
}
