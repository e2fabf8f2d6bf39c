import LocationProtocol
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The daemon's side of `ReloadRecord`: the file `reload` in the runtime directory
/// (`RUNTIME_DIRECTORY`, else the socket's directory), replaced atomically at the end of each
/// reload so `locationctl reload` (`ExecReload=`) returns only once the reload has finished
/// (docs/systemd.md, "Reload").
///
/// The file is made at start (`start()`), and the daemon keeps it open: a record that cannot
/// be replaced later (the directory full or no longer writable by the daemon) is written into
/// that file in place instead, so the waiting caller still gets its answer rather than
/// waiting out its timeout. `locationctl reload` refuses to signal when the file is not there,
/// which is how a directory the daemon could not write at start reaches it at once.
final class ReloadRecordFile: Sendable {
    let path: String
    /// The file now at `path`, as the daemon made it (-1 before `start()` or when it failed).
    private let current = Mutex<CInt>(-1)

    /// How a record was written.
    enum Written: Equatable {
        case replaced
        /// Replacing failed (the error), and the line went into the file at `path` in place.
        case inPlace(String)
        /// Neither worked (both errors).
        case failed(String)
    }

    init(directory: String) {
        path = ReloadRecord.path(in: directory)
    }

    convenience init(environment: EnvironmentLookup = processEnvironment, socketPath: String) {
        self.init(directory: ReloadRecord.directory(runtimeDirectory: environment("RUNTIME_DIRECTORY"), socketPath: socketPath))
    }

    deinit {
        current.withLock { if $0 >= 0 { close($0) } }
    }

    /// Makes the file at start with the record `0 ok` (no reload yet), over one left by an
    /// earlier daemon: the monotonic clock starts again at boot, so in a directory that outlives
    /// one (not /run) an old record could look newer than a reload asked for now. When the file
    /// cannot be replaced, a record file of the daemon's user already there (an earlier run's)
    /// is taken over and written in place, as a later reload's would be.
    func start() -> Written {
        let record = ReloadRecord(start: 0, outcome: .ok)
        if create(record) { return .replaced }
        guard let problem = replace(record) else { return .replaced }
        // Only a plain file of this user's with no other name: through a link, or in a
        // directory others can write to, it could be someone else's file.
        let fd = open(path, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return .failed(problem) }
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG, st.st_uid == geteuid(), st.st_nlink == 1 else {
            close(fd)
            return .failed(problem)
        }
        adopt(fd)
        return writeInPlace(record).map { .failed("\(problem); \($0)") } ?? .inPlace(problem)
    }

    /// Makes the file at start directly: the old one removed, the new one created exclusively
    /// (`O_EXCL` follows no link and takes no file another made meanwhile) and written. No
    /// reader can wait for a reload yet, so nothing needs the atomic rename a reload's record
    /// has, and a start that does not call `mkstemp` and `rename` pages in 50–70 KiB less of
    /// libc for good (idle RSS, docs/benchmarks.md). False when it could not: `replace` then
    /// tries, and says why.
    private func create(_ record: ReloadRecord) -> Bool {
        guard unlink(path) == 0 || errno == ENOENT else { return false }
        let fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
        guard fd >= 0 else { return false }
        // The umask's bits off 0644 back on: locationctl reload, run as another user, reads it.
        guard fchmod(fd, 0o644) == 0, Self.writeAll(fd, record.line) == nil else {
            close(fd)
            unlink(path)
            return false
        }
        adopt(fd)
        return true
    }

    /// `fd` is the file now at `path`, the one `writeInPlace` writes.
    private func adopt(_ fd: CInt) {
        current.withLock { old in
            if old >= 0 { close(old) }
            old = fd
        }
    }

    /// Writes `record`: replaced atomically when it can be, else in place.
    func write(_ record: ReloadRecord) -> Written {
        guard let problem = replace(record) else { return .replaced }
        guard let second = writeInPlace(record) else { return .inPlace(problem) }
        return .failed("\(problem); \(second)")
    }

    /// The record goes to a new file first, renamed over `path` (same directory, so the rename is
    /// atomic: a reader sees the old line or the new one, never half of one). That file is made
    /// by `mkstemp` (an unguessable name, `O_EXCL`): the name was `reload.PID.tmp`, opened with
    /// `O_TRUNC`, and in a directory others can write to (a hand-started daemon's `--socket` in
    /// /tmp) a symlink planted at that name had a root daemon truncate and overwrite its target.
    /// Its descriptor is kept: the file it becomes is the one `writeInPlace` writes.
    private func replace(_ record: ReloadRecord) -> String? {
        var template = Array((path + ".XXXXXX").utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        let temporaryPath = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard fd >= 0 else { return "cannot create a file in the directory of \(path): \(String(cString: strerror(errno)))" }
        func failed(_ what: String, _ code: Int32) -> String {
            close(fd)
            unlink(temporaryPath)
            return "\(what): \(Self.describe(code))"
        }
        // mkstemp's 0600; locationctl reload, run as another user (ExecReload=), reads it.
        guard fcntl(fd, F_SETFD, FD_CLOEXEC) == 0, fchmod(fd, 0o644) == 0 else { return failed("cannot write \(temporaryPath)", errno) }
        if let code = Self.writeAll(fd, record.line) { return failed("cannot write \(temporaryPath)", code) }
        guard rename(temporaryPath, path) == 0 else { return failed("cannot rename \(temporaryPath) to \(path)", errno) }
        adopt(fd)
        return nil
    }

    /// Overwrites the file the daemon made last, through its descriptor: no new file, no new
    /// space (a record is a line shorter than a block, and goes into the block the file has), no
    /// write permission on the directory. In the steps of `inPlaceSteps`, each of which a
    /// reader may see half done.
    private func writeInPlace(_ record: ReloadRecord) -> String? {
        current.withLock { fd in
            guard fd >= 0 else { return "no record file of this daemon to write into (it could not be made at start)" }
            for step in Self.inPlaceSteps(Array(record.line.utf8)) {
                switch step {
                case .write(let offset, let bytes):
                    if let code = Self.writeAll(fd, bytes, at: off_t(offset)) {
                        return "cannot write into \(path): \(Self.describe(code))"
                    }
                case .truncate(let length):
                    guard ftruncate(fd, off_t(length)) == 0 else { return "cannot write into \(path): \(String(cString: strerror(errno)))" }
                }
            }
            return nil
        }
    }

    enum InPlaceStep: Equatable {
        case write(offset: Int, bytes: [UInt8])
        case truncate(Int)
    }

    /// How `line` replaces the record in the file in place, such that a reader between or
    /// inside the steps finds no record or the new one, never a mix: the new line written
    /// over the old from its start would, cut short, end in the old line's tail (`1234 failed`
    /// over `9 ok` read as `1234 ok`, a refused reload reported as in force). So the first byte
    /// is first made `#`, which no record starts with, the rest written and the file cut to
    /// length behind it, and the real first byte written last, alone.
    static func inPlaceSteps(_ line: [UInt8]) -> [InPlaceStep] {
        guard let first = line.first else { return [.truncate(0)] }
        return [.write(offset: 0, bytes: [UInt8(ascii: "#")]),
                .write(offset: 1, bytes: Array(line.dropFirst())),
                .truncate(line.count),
                .write(offset: 0, bytes: [first])]
    }

    /// `writeAll`'s error: an errno, or 0 for a short write.
    private static func describe(_ code: Int32) -> String { code == 0 ? "short write" : String(cString: strerror(code)) }

    /// Writes `text` whole (at `offset`, or at the file offset); the errno (0: a short write), nil on success.
    private static func writeAll(_ fd: CInt, _ text: String, at offset: off_t? = nil) -> Int32? {
        writeAll(fd, Array(text.utf8), at: offset)
    }

    private static func writeAll(_ fd: CInt, _ bytes: [UInt8], at offset: off_t? = nil) -> Int32? {
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBytes { raw in
                offset.map { pwrite(fd, raw.baseAddress! + done, raw.count - done, $0 + off_t(done)) }
                    ?? Glibc.write(fd, raw.baseAddress! + done, raw.count - done)
            }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return n < 0 ? errno : 0 }
            done += n
        }
        return nil
    }
}
