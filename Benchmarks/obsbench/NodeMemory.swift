#if canImport(CLinux)
import CLinux
#endif
#if canImport(Glibc)
import Glibc
#endif
import ObsCore

/// The `memory` section: heap bytes per node of the engine, measured with glibc's `mallinfo2`
/// (bytes in use, chunk headers and rounding included) around the building of many nodes:
///
/// - a computed reading one shared source, evaluated once: its object, value storage, closure
///   context (`{ source.value + index }` captures two values) and its link to the source;
/// - an observer of one of those computeds: everything `observe` adds (its object or record, its
///   link, its token, the handler's context).
///
///   obsbench memory
func runNodeMemoryBenchmark() {
    #if canImport(CLinux)
    let count = 100_000
    let source = Observable(0)
    let before = heapInUse()
    var computeds: [Computed<Int>] = []
    computeds.reserveCapacity(count)
    let arrayBytes = heapInUse() - before
    for index in 0..<count {
        let computed = Computed { source.value + index }
        _ = computed.value
        computeds.append(computed)
    }
    let afterComputeds = heapInUse()
    var tokens: [ObservationToken] = []
    tokens.reserveCapacity(count)
    let tokensArray = heapInUse() - afterComputeds
    for computed in computeds {
        tokens.append(computed.observe { _ in })
    }
    let afterObservers = heapInUse()
    source.value = 1
    check(computeds[count - 1].value == count, "memory: the computeds did not follow their source")
    let perComputed = Double(afterComputeds - before - arrayBytes) / Double(count)
    let perObserver = Double(afterObservers - afterComputeds - tokensArray) / Double(count)
    print("memory: heap bytes per node (mallinfo2 around building \(count) of each; chunk overhead included)")
    print("")
    print("node | bytes")
    print("---- | -----")
    print(String(format: "computed reading one source (object, value, closure context, link) | %.0f", perComputed))
    print(String(format: "observer of a computed (everything observe adds, token included) | %.0f", perObserver))
    print("")
    withExtendedLifetime((computeds, tokens)) {}
    #else
    print("memory: needs glibc's mallinfo2")
    #endif
}

#if canImport(CLinux)
private func heapInUse() -> Int {
    let info = mallinfo2()
    return Int(info.uordblks) + Int(info.hblkhd)
}
#endif
