extension Array where Element: AnyObject {
    /// Calls `body` with each element, retaining none: for loops over a list that keeps its
    /// elements alive through the loop (a transaction's keys, which its list holds until it is
    /// reset; a pattern entry's watches). Each element is retained once, by the list, not once
    /// more per loop: a loop over the 50 keys of a chain cost 100 atomic reference-count
    /// operations, one over 1,000 watches stalled on each. `body` must not change the array (nor
    /// the variable or property it was read from) and must not free its elements.
    @inline(__always)
    func forEachGuaranteed(_ body: (Element) -> Void) {
        withUnsafeBufferPointer { buffer in
            guard let base = UnsafeRawPointer(buffer.baseAddress) else { return }
            for index in 0..<buffer.count {
                // Loaded as an address, not as a reference: a reference loaded is a reference retained.
                let address = base.load(fromByteOffset: index * MemoryLayout<Element>.stride, as: UnsafeRawPointer.self)
                Unmanaged<Element>.fromOpaque(address)._withUnsafeGuaranteedRef(body)
            }
        }
    }
}
