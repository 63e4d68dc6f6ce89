#if canImport(CLinux)
import CLinux
#endif

/// Asks the CPU to start loading the cache line at `address` (and the next: nodes span two).
@inline(__always)
func prefetch(_ address: UnsafeRawPointer) {
    #if canImport(CLinux)
    obs_prefetch(address)
    obs_prefetch(address + 64)
    #endif
}

/// Asks the CPU to start loading the one cache line at `address`.
@inline(__always)
func prefetchLine(_ address: UnsafeRawPointer) {
    #if canImport(CLinux)
    obs_prefetch(address)
    #endif
}

extension Unmanaged {
    @inline(__always)
    func prefetch() { ObsCore.prefetch(UnsafeRawPointer(toOpaque())) }
}

/// Where a node's `flags` and `subs` are: right after the object header, two words (ReactiveNode).
var nodeHeadOffset: Int { 2 * MemoryLayout<UnsafeRawPointer>.size }

extension Unmanaged where Instance == ReactiveNode {
    /// Prefetches the line holding the node's flags and subscriber list: all the marking walk
    /// reads of it.
    @inline(__always)
    func prefetchHead() { prefetchLine(UnsafeRawPointer(toOpaque()) + nodeHeadOffset) }
}
