extension Array where Element: AnyObject {
    /// Calls `body` with each element, retaining none: for the store's loops over a transaction's
    /// keys, which the transaction's list keeps alive until it is reset (each element retained
    /// once there, not once more per loop: a loop over 50 keys of a chain cost 100 atomic
    /// reference-count operations per loop). `body` must not change this array.
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
