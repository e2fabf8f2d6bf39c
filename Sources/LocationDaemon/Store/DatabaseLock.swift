import Glibc

/// One daemon per database: an exclusive `flock` on `<database>.lock`, held until the process
/// exits, with the holder's pid written in it. Two daemons on one file would load each other's
/// regions, write invented events into real programs' queues and hand out the same sequence
/// numbers twice (docs/regions.md, "Persistence"). A lock file beside the database, not the
/// database itself: SQLite's own POSIX locks on a file are dropped when any descriptor of that
/// file in the process is closed.
final class DatabaseLock {
    let path: String
    private let fd: CInt

    /// Takes the lock, or throws naming the pid that holds it.
    init(database: String) throws {
        path = database + ".lock"
        try Database.makeDirectory(for: database)
        fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            let code = errno
            let unwritable = Database.unwritable(path)
            let why = unwritable.map { " (\($0.reason)); \($0.fix)" } ?? ": \(String(cString: strerror(code)))"
            throw StoreError(description: "\(path): cannot open the database's lock file\(why)", needsAdministrator: unwritable != nil)
        }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let e = errno
            var bytes = [UInt8](repeating: 0, count: 32)
            let n = pread(fd, &bytes, bytes.count, 0)
            close(fd)
            guard e == EWOULDBLOCK else {
                throw StoreError(description: "\(path): cannot lock the database: \(String(cString: strerror(e)))")
            }
            let holder = n > 0 ? String(decoding: bytes[..<n], as: UTF8.self).split(separator: "\n").first.map(String.init) ?? "?" : "?"
            throw StoreError(description: "\(database) is in use by another locationd (pid \(holder)): stop that one, or give this one its own --database (--database none keeps everything in memory)")
        }
        let line = Array("\(getpid())\n".utf8)
        _ = ftruncate(fd, 0)
        _ = pwrite(fd, line, line.count, 0)
    }

    deinit { close(fd) }
}
