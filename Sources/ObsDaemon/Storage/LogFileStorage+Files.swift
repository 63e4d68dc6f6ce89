// Reading the commit log's files (LogFileStorage.swift): listing them in order, mapping one and
// checking its frames (CommitLogFile.read), replaying its records over the rows at start-up and
// in `obsd --check`, and folding a closed one into the database (the checkpoint thread's work).
import Glibc
import ObsCore

extension LogFileStorage {
    /// `obsd --check`: the rows with every log file replayed over them, as start-up does it, but
    /// changing nothing; and what the files hold.
    static func check(_ database: SQLiteStorage, directory: String) throws(ObsError) -> (state: StoredState, files: Int, frames: Int, torn: Int) {
        let state = try database.load()
        var replay = CommitLog.Replay(state)
        var problems: [String] = []
        var frames = 0, torn = 0
        let files = try Self.files(in: directory)
        for (index, file) in files.enumerated() {
            do throws(ObsError) {
                try read(file.path, newest: index == files.count - 1) { contents, bytes throws(ObsError) in
                    for frame in contents.frames { try Self.replay(frame, of: bytes, file: file.path, onto: &replay, after: state.rev) }
                    frames += contents.frames.count
                    torn += contents.torn
                }
            } catch {
                problems.append(error.message)
            }
        }
        guard problems.isEmpty else {
            throw ObsError(.internal, "the commit log cannot be loaded", details: ["problems": .array(problems.map { .string($0) })])
        }
        return (replay.state, files.count, frames, torn)
    }

    /// The log files in `directory`, in order.
    static func files(in directory: String) throws(ObsError) -> [(number: UInt64, path: String)] {
        guard let stream = opendir(directory) else {
            throw ObsError(.internal, "cannot list \(directory): \(SystemError("opendir"))")
        }
        defer { closedir(stream) }
        var files: [(number: UInt64, path: String)] = []
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            guard name.hasPrefix(filePrefix), let number = UInt64(name.dropFirst(filePrefix.count)), number > 0 else { continue }
            files.append((number, directory + "/" + name))
        }
        return files.sorted { $0.number < $1.number }
    }

    /// One frame's records replayed; `after`: the rows' revision.
    static func replay(_ frame: (rev: UInt64, records: Range<Int>), of bytes: UnsafeRawBufferPointer, file: String,
                               onto replay: inout CommitLog.Replay, after: UInt64) throws(ObsError) {
        let last: UInt64
        do throws(CommitLog.Damage) {
            last = try CommitLog.replay(UnsafeRawBufferPointer(rebasing: bytes[frame.records]), onto: &replay, after: after)
        } catch {
            throw ObsError(.internal, "log file \(file): the records of the frame at revision \(frame.rev) do not read (at byte \(frame.records.lowerBound + error.offset))")
        }
        guard last == frame.rev else {
            throw ObsError(.internal, "log file \(file): the records of the frame at revision \(frame.rev) end at revision \(last)")
        }
    }

    /// Reads the log file at `path` whole (mapped, not copied) and checks its frames.
    static func read(_ path: String, newest: Bool,
                     _ body: (CommitLogFile.Contents, UnsafeRawBufferPointer) throws(ObsError) -> Void) throws(ObsError) {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        guard fd >= 0 else {
            if errno == ELOOP { throw ObsError(.internal, "log file \(path) is a symlink; obsd does not follow symlinks in its state directory") }
            throw ObsError(.internal, "cannot open log file \(path): \(SystemError("open"))")
        }
        defer { Glibc.close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw ObsError(.internal, "cannot inspect log file \(path): \(SystemError("fstat"))") }
        if let problem = problem(with: info) { throw ObsError(.internal, "log file \(path) \(problem)") }
        let count = Int(info.st_size)
        var mapped: UnsafeMutableRawPointer?
        if count > 0 {
            let address = mmap(nil, count, PROT_READ, MAP_PRIVATE, fd, 0)
            guard let address, address != MAP_FAILED else { throw ObsError(.internal, "cannot read log file \(path): \(SystemError("mmap"))") }
            mapped = address
        }
        defer { if let mapped { munmap(mapped, count) } }
        let bytes = UnsafeRawBufferPointer(start: mapped, count: count)
        let contents: CommitLogFile.Contents
        do throws(CommitLogFile.Damage) {
            contents = try CommitLogFile.read(bytes, newest: newest)
        } catch {
            throw ObsError(.internal, "log file \(path): \(error.reason) (at byte \(error.offset))")
        }
        try body(contents, bytes)
    }

    /// Why a log file cannot be trusted, or nil: it must be a regular file of obsd's user that
    /// nobody else can write (as the state directory must be).
    static func problem(with info: stat) -> String? {
        guard info.st_mode & S_IFMT == S_IFREG else { return "is not a regular file" }
        guard info.st_uid == geteuid() else { return "belongs to uid \(info.st_uid), not to this user (uid \(geteuid()))" }
        guard info.st_mode & 0o022 == 0 else { return "can be written by others (mode \(String(info.st_mode & 0o777, radix: 8)))" }
        return nil
    }

    /// Folds the closed log file at `path` into `database` (one transaction, synced), decoding
    /// only the last change of each name (CommitLog.replayNewestFirst).
    static func fold(_ path: String, into database: SQLiteStorage) throws(ObsError) {
        try database.checkpoint(path) { replay, tablesRev throws(ObsError) in
            try read(path, newest: false) { contents, bytes throws(ObsError) in
                let groups = contents.frames.map { (records: UnsafeRawBufferPointer(rebasing: bytes[$0.records]), rev: $0.rev) }
                do throws(CommitLog.Damage) {
                    try CommitLog.replayNewestFirst(groups, onto: &replay, after: tablesRev)
                } catch {
                    let frame = contents.frames[error.group]
                    throw ObsError(.internal, "log file \(path): the records of the frame at revision \(frame.rev) do not read (at byte \(frame.records.lowerBound + error.offset)) or end at another revision")
                }
            }
        }
    }
}
