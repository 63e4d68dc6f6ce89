/// The `reactivity` section: a Swift port of js-reactivity-benchmark (milomg), the suite that
/// compares JavaScript signal libraries, so that ObsCore can be set beside alien-signals, the
/// fastest of them. Graphs are built outside the timed part, every write is its own batch (the
/// suite's `withBatch`), and the suite's asserts stay on as checks.
func runReactivityBenchmarks() {
    print("""
        reactivity: js-reactivity-benchmark shapes; times are medians of 5 runs after warm-up.
          kairo: one run = 1000 calls of the case's iter; counts are per run.
          cellx: one run = the timed part of 10 fresh graphs; counts are per graph.
          dynamic: one run = the suite's runGraph; counts are per run (the suite's expected count).
          ns/node: median time / computed runs the shape asks for; alien-signals: reference figure.

        """)
    #if DEBUG
    print("warning: a debug build; run `swift build -c release --product obsbench` for real figures\n")
    #endif
    let table = ResultTable()
    table.printHeader()
    Kairo.run(table)
    Cellx.run(table)
    DynamicGraphBench.run(table)
    print()
}
