import LocationProtocol
#if canImport(Glibc)
import Glibc
#endif

/// The daemon's side of `ReloadRecord`: the file `reload` in the runtime directory
/// (`RUNTIME_DIRECTORY`, else the socket's directory), replaced atomically at the end of each
/// reload so `locationctl reload` (`ExecReload=`) returns only once the reload has finished
/// (docs/systemd.md, "Reload").
struct ReloadRecordFile: Sendable {
    let path: String

    init(directory: String) {
        path = ReloadRecord.path(in: directory)
    }

    init(environment: EnvironmentLookup = processEnvironment, socketPath: String) {
        self.init(directory: ReloadRecord.directory(runtimeDirectory: environment("RUNTIME_DIRECTORY"), socketPath: socketPath))
    }

    /// Removes a record left by an earlier daemon. The monotonic clock starts again at boot, so
    /// in a directory that outlives one (not /run) an old record could look newer than a reload
    /// asked for now. The error, nil when removed or absent.
    func removeStale() -> String? {
        guard unlink(path) == 0 || errno == ENOENT else { return "cannot remove \(path): \(String(cString: strerror(errno)))" }
        return nil
    }

    /// Writes `record`; the error (naming the file and errno), nil on success.
    ///
    /// The record goes to a new file first, renamed over `path` (same directory, so the rename is
    /// atomic: a reader sees the old line or the new one, never half of one). That file is made
    /// by `mkstemp` (an unguessable name, `O_EXCL`): the name was `reload.PID.tmp`, opened with
    /// `O_TRUNC`, and in a directory others can write to (a hand-started daemon's `--socket` in
    /// /tmp) a symlink planted at that name had a root daemon truncate and overwrite its target.
    func write(_ record: ReloadRecord) -> String? {
        var template = Array((path + ".XXXXXX").utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        let temporaryPath = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard fd >= 0 else { return "cannot create a file in the directory of \(path): \(String(cString: strerror(errno)))" }
        // mkstemp's 0600; locationctl reload, run as another user (ExecReload=), reads it.
        guard fcntl(fd, F_SETFD, FD_CLOEXEC) == 0, fchmod(fd, 0o644) == 0 else {
            let e = errno
            close(fd)
            unlink(temporaryPath)
            return "cannot write \(temporaryPath): \(String(cString: strerror(e)))"
        }
        let bytes = Array(record.line.utf8)
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else {
                let e = n < 0 ? String(cString: strerror(errno)) : "short write"
                close(fd)
                unlink(temporaryPath)
                return "cannot write \(temporaryPath): \(e)"
            }
            offset += n
        }
        guard close(fd) == 0 else {
            let e = errno
            unlink(temporaryPath)
            return "cannot write \(temporaryPath): \(String(cString: strerror(e)))"
        }
        guard rename(temporaryPath, path) == 0 else {
            let e = errno
            unlink(temporaryPath)
            return "cannot rename \(temporaryPath) to \(path): \(String(cString: strerror(e)))"
        }
        return nil
    }
}
