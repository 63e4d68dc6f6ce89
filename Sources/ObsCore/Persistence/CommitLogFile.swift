/// The commit log as files of frames (obsd's `normal` and `strict` modes keep it beside the database:
/// docs/architecture.md, "The commit log"). A file is an 8-byte magic, then frames; a frame is one
/// group of commits (CommitLog records) as one write:
///
///     u64 rev            the revision of the group's last transaction
///     u32 length         of the records
///     u32 header check   the low 32 bits of a checksum of rev and length
///     u64 check          a checksum of rev and the records (RowChecksum.logRow)
///     records
///
/// Numbers are little endian. Reading tells damage from a torn tail:
/// 1. A frame is appended by one write at the end of the newest file, and acknowledged only once
///    that write has returned (`normal`: the bytes are in the kernel, which a crash of the process
///    cannot take back) or once they are fdatasynced too (`strict`: a crash of the machine cannot
///    either). So a crash can cut short only the newest file's last frame, and only one that was
///    never acknowledged: the file then ends inside it (its header short, or its records short of
///    the length that its verified header gives).
/// 2. A torn tail changes no byte that is there: it only ends early. A flipped byte changes one
///    that is there: in a header, the header check fails; in records, the frame's check does, and a
///    length turned larger by a flip is caught by the header check before it is believed. So a
///    frame that is all there and fails a check is damage, wherever it is, and so is a short frame
///    anywhere but at the end of the newest file (an older file was complete before a newer one was
///    made); damage is reported, never dropped or served.
/// 3. Only the torn tail is dropped: what it held was never acknowledged, so nobody was told it
///    happened.
public enum CommitLogFile {
    /// The first bytes of every log file.
    public static let magic: [UInt8] = Array("obsdlog1".utf8)
    /// A frame's header, before its records.
    public static let headerSize = 24

    /// Where a log file does not read as frames.
    public struct Damage: Error {
        public var offset: Int
        public var reason: String
    }

    /// A log file read: its frames, and the bytes of a torn last frame (0 when it ends whole).
    public struct Contents {
        public var frames: [(rev: UInt64, records: Range<Int>)] = []
        public var torn = 0
        public var end = 0
    }

    /// The header of a frame holding `records`, the last transaction of which is at `rev`.
    public static func header(rev: UInt64, records: UnsafeRawBufferPointer) -> (UInt64, UInt64, UInt64) {
        let length = UInt64(records.count)
        let check = UInt64(bitPattern: RowChecksum.logRow(rev, records))
        return (rev.littleEndian, (length | UInt64(headerCheck(rev: rev, length: length)) << 32).littleEndian, check.littleEndian)
    }

    private static func headerCheck(rev: UInt64, length: UInt64) -> UInt32 {
        var sum = RowChecksum()
        sum.add(rev)
        sum.add(length)
        return UInt32(truncatingIfNeeded: sum.value)
    }

    /// Reads a whole file's bytes as frames. `newest`: whether it is the newest file, the only one
    /// that may end in a torn frame (see above).
    public static func read(_ bytes: UnsafeRawBufferPointer, newest: Bool) throws(Damage) -> Contents {
        var contents = Contents()
        guard bytes.count >= magic.count else {
            // A file made by a crash before its magic was all written.
            guard newest, bytes.elementsEqual(magic.prefix(bytes.count)) else {
                throw Damage(offset: 0, reason: "it is not a commit log file")
            }
            contents.torn = bytes.count
            return contents
        }
        guard bytes.prefix(magic.count).elementsEqual(magic) else { throw Damage(offset: 0, reason: "it is not a commit log file") }
        var offset = magic.count
        var lastRev: UInt64 = 0
        while offset < bytes.count {
            let remaining = bytes.count - offset
            guard remaining >= headerSize else {
                guard newest else { throw Damage(offset: offset, reason: "the file ends inside a frame's header") }
                contents.torn = remaining
                break
            }
            let rev = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
            let word = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset + 8, as: UInt64.self))
            let check = Int64(bitPattern: UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset + 16, as: UInt64.self)))
            let length = word & 0xFFFF_FFFF
            guard UInt32(word >> 32) == headerCheck(rev: rev, length: length) else {
                throw Damage(offset: offset, reason: "a frame's header is damaged (its check does not match)")
            }
            guard UInt64(remaining - headerSize) >= length else {
                guard newest else { throw Damage(offset: offset, reason: "the file ends inside a frame") }
                contents.torn = remaining
                break
            }
            let records = offset + headerSize..<offset + headerSize + Int(length)
            guard RowChecksum.logRow(rev, UnsafeRawBufferPointer(rebasing: bytes[records])) == check else {
                throw Damage(offset: offset, reason: "frame at revision \(rev) is damaged (its checksum does not match)")
            }
            guard rev > lastRev else { throw Damage(offset: offset, reason: "frame at revision \(rev) follows revision \(lastRev)") }
            lastRev = rev
            contents.frames.append((rev, records))
            offset = records.upperBound
        }
        contents.end = offset
        return contents
    }
}
