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
    /// The record is written here first, then renamed over `path` (same directory, so the
    /// rename is atomic: a reader sees the old line or the new one, never half of one).
    let temporaryPath: String

    init(directory: String) {
        path = ReloadRecord.path(in: directory)
        temporaryPath = path + ".\(getpid()).tmp"
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
    func write(_ record: ReloadRecord) -> String? {
        let fd = open(temporaryPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { return "cannot create \(temporaryPath): \(String(cString: strerror(errno)))" }
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
