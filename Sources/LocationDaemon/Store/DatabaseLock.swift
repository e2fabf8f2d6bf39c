import Glibc

/// One daemon per database: an exclusive `flock` on `<database>.lock`, held until the process
/// exits, with the holder's pid written in it. Two daemons on one file would load each other's
/// regions, write invented events into real programs' queues and hand out the same sequence
/// numbers twice (docs/regions.md, "Persistence"). A lock file beside the database, not the
/// database itself: SQLite's own POSIX locks on a file are dropped when any descriptor of that
/// file in the process is closed.
final class DatabaseLock {
    let path: String
    /// The database file with every link on its way resolved: what the lock stands for.
    let file: String
    private let fd: CInt
    /// The database file itself, `flock`ed too once it exists: another name for the same file
    /// (a hard link) has a lock file of its own. Kept open until the daemon exits: closing any
    /// descriptor of the file would drop SQLite's own locks on it.
    private var fileFD: CInt = -1

    /// Takes the lock, or throws naming the pid that holds it.
    init(database: String) throws {
        try Database.makeDirectory(for: database)
        // By the file it is, not the name given: a second daemon reaching the same file through
        // a symbolic link (`/var/lib/locationd` linked to a data partition) would take a lock file
        // of its own, open the same database and WAL, and the two would give out the same
        // sequence numbers in one queue.
        file = Self.resolved(database)
        path = file + ".lock"
        fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            let code = errno
            let unwritable = Database.unwritable(path)
            let why = unwritable.map { " (\($0.reason)); \($0.fix)" } ?? ": \(String(cString: strerror(code)))"
            throw StoreError(description: "\(path): cannot open the database's lock file\(why)", needsAdministrator: unwritable != nil)
        }
        let named = file == database ? database : "\(database) (the file \(file))"
        // From here on a throw runs `deinit`, which closes `fd`: closing it here as well closed
        // whatever descriptor another thread had been given that number meanwhile.
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let e = errno
            var bytes = [UInt8](repeating: 0, count: 32)
            let n = pread(fd, &bytes, bytes.count, 0)
            guard e == EWOULDBLOCK else {
                throw StoreError(description: "\(path): cannot lock the database: \(String(cString: strerror(e)))")
            }
            let holder = n > 0 ? String(decoding: bytes[..<n], as: UTF8.self).split(separator: "\n").first.map(String.init) ?? "?" : "?"
            throw StoreError(description: "\(named) is in use by another locationd (pid \(holder)): stop that one, or give this one its own --database (--database none keeps everything in memory)")
        }
        let line = Array("\(getpid())\n".utf8)
        _ = ftruncate(fd, 0)
        _ = pwrite(fd, line, line.count, 0)
        try holdDatabaseFile(named: named)
    }

    /// Locks the database file itself if it exists (at the start; again once the database is
    /// open, for a file SQLite has just created). An `flock` and SQLite's POSIX locks do not
    /// interact on Linux.
    func holdDatabaseFile(named: String? = nil) throws {
        guard fileFD < 0 else { return }
        let d = open(file, O_RDONLY | O_CLOEXEC)
        guard d >= 0 else { return }  // none yet (SQLite makes it), or not ours to read: the lock file still stands
        guard flock(d, LOCK_EX | LOCK_NB) == 0 else {
            let e = errno
            close(d)
            // Only a lock held elsewhere is another daemon: where `flock` is emulated or refused
            // (NFS, CIFS) the lock file alone stands.
            guard e == EWOULDBLOCK else { return }
            throw StoreError(description: "\(named ?? file) is in use by another locationd, which reached it by another name (a hard link, or a symbolic link made after it started): stop that one, or give this one its own --database (--database none keeps everything in memory)")
        }
        fileFD = d
    }

    /// `database` with its links resolved: the file's real path if it exists, else its
    /// directory's real path and its name (a link to a file not made yet is followed).
    static func resolved(_ database: String) -> String {
        var database = database
        if let real = realpath(database, nil) { defer { free(real) }; return String(cString: real) }
        // A link to a file not made yet (SQLite makes it where the link points): followed, or
        // the first start would lock by the link's name and later ones by the file's.
        for _ in 0..<40 {
            var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
            let n = readlink(database, &buffer, buffer.count - 1)
            guard n > 0 else { break }
            let target = String(decoding: buffer[..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
            database = target.hasPrefix("/") ? target : Database.directory(of: database) + "/" + target
        }
        let dir = Database.directory(of: database)
        let name = database.split(separator: "/", omittingEmptySubsequences: false).last.map(String.init) ?? database
        guard !name.isEmpty, let real = realpath(dir, nil) else { return database }
        defer { free(real) }
        let base = String(cString: real)
        return base == "/" ? "/" + name : base + "/" + name
    }

    deinit {
        close(fd)
        if fileFD >= 0 { close(fileFD) }
    }
}
