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

extension Unmanaged {
    @inline(__always)
    func prefetch() { ObsCore.prefetch(UnsafeRawPointer(toOpaque())) }
}
