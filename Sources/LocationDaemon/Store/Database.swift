import CSQLite
import Glibc
import Logging
import ShellWords

public struct StoreError: Error, Hashable, CustomStringConvertible, Sendable {
    public var description: String
    /// Only an administrator can mend it (a file that is not a database, damaged, from a newer
    /// locationd, not the daemon's to write): a start it stops exits 78, which the unit does not
    /// restart (`Daemon.exitStatus`). Otherwise it may pass (a full filesystem, another
    /// locationd holding the file), and the start exits 1, which it does.
    public var needsAdministrator = false

    public init(description: String, needsAdministrator: Bool = false) {
        self.description = description
        self.needsAdministrator = needsAdministrator
    }
}

/// One SQLite connection to the daemon's database, shared by the region store and the
/// background queue so that one fix's effects (region states, queued events) commit together.
///
/// WAL journal, `synchronous=FULL`: a committed write survives the daemon being killed and a
/// power cut (docs/regions.md, "Persistence"). Kept 0600: it holds where programs' regions
/// are and where the device was. Used only from the hub's loop (and from the daemon before the
/// loop runs).
public final class Database: @unchecked Sendable {
    private(set) var handle: OpaquePointer?
    public let path: String
    private var depth = 0
    /// The -wal and -shm files as opened (none in memory, or where SQLite made none).
    private var companions: [(path: String, identity: FileIdentity)] = []

    /// Opens (creating the file and its directory if needed) `path`; `:memory:` keeps
    /// everything in memory (`--database none`).
    public init(path: String) throws {
        _ = Self.lean
        self.path = path
        if path != ":memory:" {
            try Self.makeDirectory(for: path)
            // SQLite creates the -wal and -shm files with the database's mode; ones left by an
            // earlier run (a kill, a power cut) are reused as they are.
            var fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
            // One this process may only read is checked too: its mode is changed next.
            if fd < 0 { fd = open(path, O_RDONLY | O_CLOEXEC) }
            if fd >= 0 {
                // Another file named by mistake keeps its mode: the start fails before the chmod.
                var header = [UInt8](repeating: 0, count: 16)
                let n = pread(fd, &header, header.count, 0)
                close(fd)
                if n > 0 && header[..<n] != Array("SQLite format 3\0".utf8)[..<n] || (n > 0 && n < 16) {
                    throw StoreError(description: "\(path): file is not a database; \(Self.damagedFix(path))", needsAdministrator: true)
                }
            }
            // Beside the file itself when `path` is a link to it (where SQLite keeps them).
            let real = realpath(path, nil).map { p in defer { free(p) }; return String(cString: p) } ?? path
            for file in [path, real + "-wal", real + "-shm"] {
                var st = stat()
                // Not the group's either: the daemon's group is its socket users' too.
                if stat(file, &st) == 0, st.st_mode & 0o077 != 0 { _ = chmod(file, st.st_mode & 0o700) }
            }
        }
        guard sqlite3_open_v2(path, &handle, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nil) == SQLITE_OK else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close(handle)
            let why = path == ":memory:" ? nil : Self.unwritable(path, readable: true)
            throw StoreError(description: "\(path): cannot open the database: \(message)" + (why.map { " (\($0.reason)); \($0.fix)" } ?? ""),
                             needsAdministrator: why != nil)
        }
        // SQLite falls back to reading a file it may not write, and every write would then fail
        // only later, at a fix with changes (held, then counted as lost): refused here instead.
        if sqlite3_db_readonly(handle, "main") == 1 {
            let why = Self.unwritable(path)
            throw StoreError(description: "\(path): opened read-only (\(why?.reason ?? "SQLite would not open it for writing")); \(why?.fix ?? "check the owner and mode of the file, its -wal and -shm and its directory (the daemon's user must write them), \(Self.memoryFix)")",
                             needsAdministrator: true)
        }
        // Another process that holds the file's write lock for a moment (the sqlite3 shell, a
        // backup) makes a write wait up to this long instead of failing it at once, which would
        // refuse a registration or delay a fix's background events. Short: the loop waits too.
        // Set first: switching to WAL needs the lock too.
        sqlite3_busy_timeout(handle, 250)
        // Before anything below writes to it (switching its journal to WAL would rewrite the
        // header of a file a newer daemon left in another mode): a newer file is left as it is.
        // Read as the switch below is: a -wal or -shm the daemon cannot write or create fails
        // this first read, and is named so.
        var version: Int64 = 0
        try writable { version = try schemaVersionInFile() }
        if version > Self.schemaVersion {
            throw StoreError(description: "\(path) was written by a newer locationd (its tables are version \(version); this one reads version \(Self.schemaVersion) only): run the newer locationd again, or set [store] database to another file (\"none\" keeps everything in memory); nothing in it was changed", needsAdministrator: true)
        }
        if path != ":memory:" { try checkWhole() }
        // Opens (or creates, beside the file) the -wal and -shm files; the read above did for a
        // file already in WAL mode.
        try writable { try exec("PRAGMA journal_mode=WAL") }
        // Every commit reaches the disk before the reply that acknowledges it: an `ack`ed or
        // queued sequence number is never given out again, even after a power cut. Writes are
        // rare (registrations, acks, fixes that change a region or queue an event).
        try exec("PRAGMA synchronous=FULL")
        // A -wal or -shm the daemon may not write (left by a run as another user) opens
        // read-only too: a write transaction, begun and rolled back, finds out. Another process
        // holding the write lock (busy) is no sign of a read-only file.
        if path != ":memory:" {
            try writable {
                do { try exec("BEGIN IMMEDIATE") } catch where sqlite3_errcode(handle) == SQLITE_BUSY { return }
                try exec("ROLLBACK")
            }
        }
        // Another process holding the write lock (busy): stamped at a later start.
        if version < Self.schemaVersion {
            do { try exec("PRAGMA user_version = \(Self.schemaVersion)") } catch where sqlite3_errcode(handle) == SQLITE_BUSY {}
        }
        if path != ":memory:" {
            // Where SQLite put them: beside the file itself when `path` is a link to it.
            let file = sqlite3_db_filename(handle, "main").map { String(cString: $0) } ?? path
            companions = [file + "-wal", file + "-shm"].compactMap { f in FileIdentity(path: f).map { (f, $0) } }
        }
    }

    /// SQLite's memory set aside up front, given up before the first connection (CSQLite's
    /// shim says what and why). Once, before SQLite initialises.
    static let lean: Void = { _ = locationd_sqlite3_config_lean() }()

    /// The version of the tables this daemon reads and writes, stamped in the file
    /// (`PRAGMA user_version`). 0 is a new file or an unstamped one (the same tables); it is
    /// stamped at open.
    static let schemaVersion: Int64 = 1

    /// Walks every table's and index's b-tree once (`count(*)` over each: every page is read and
    /// its header checked): a damaged page the start does not read (a queue's table, say) would
    /// let the daemon start, then fail every write that touched it and lose every queued event at
    /// the stop. Refused at the start instead, naming the fix, with the file left as it is. Not
    /// `PRAGMA quick_check`, which also checks every cell: its code would stay resident and add
    /// to the idle footprint. What the walk read is given back (the page cache).
    private func checkWhole() throws {
        defer { sqlite3_db_release_memory(handle) }
        var walks: [(what: String, sql: String)] = []
        let list = try prepare("SELECT type, name, tbl_name FROM sqlite_schema WHERE type IN ('table', 'index') AND name NOT LIKE 'sqlite_%'")
        defer { sqlite3_finalize(list) }
        func quoted(_ name: String) -> String { "\"" + name.split(separator: "\"", omittingEmptySubsequences: false).joined(separator: "\"\"") + "\"" }
        while try step(list) {
            let column = { (i: Int32) in sqlite3_column_text(list, i).map { String(cString: $0) } ?? "" }
            let (type, name, table) = (column(0), column(1), column(2))
            walks.append(type == "table"
                ? ("table \(name)", "SELECT count(*) FROM \(quoted(name)) NOT INDEXED")
                : ("index \(name)", "SELECT count(*) FROM \(quoted(table)) INDEXED BY \(quoted(name))"))
        }
        for walk in walks {
            let stmt = try prepare(walk.sql)
            defer { sqlite3_finalize(stmt) }
            let code = sqlite3_step(stmt)
            guard code == SQLITE_ROW || code == SQLITE_DONE else {
                let error = failure()
                guard error.needsAdministrator else { throw error }  // an I/O error may pass
                throw StoreError(description: "\(path): the file is damaged (\(walk.what): \(lastError)); \(Self.damagedFix(path))", needsAdministrator: true)
            }
        }
    }

    /// The file's stamp (`PRAGMA user_version`). A file a newer daemon wrote (after a downgrade)
    /// is refused, left as it is: read as this daemon's own, its tables would be misread or
    /// changed under the newer one's feet.
    private func schemaVersionInFile() throws -> Int64 {
        let stmt = try prepare("PRAGMA user_version")
        defer { sqlite3_finalize(stmt) }
        return try step(stmt) ? sqlite3_column_int64(stmt, 0) : 0
    }

    /// Runs `body`; a failure caused by the database's `-wal` or `-shm` that this process cannot
    /// write, or cannot create in the directory, is rethrown naming that file, the reason and
    /// the fix (SQLite's own message would be "attempt to write a readonly database").
    private func writable(_ body: () throws -> Void) throws {
        do { try body() } catch {
            guard path != ":memory:" else { throw error }
            for file in [path + "-wal", path + "-shm"] {
                if let why = Self.unwritable(file) {
                    throw StoreError(description: "\(file): the database cannot be written (\(why.reason)); \(why.fix)", needsAdministrator: true)
                }
            }
            throw error
        }
    }

    static let memoryFix = "or set [store] database = \"none\" to keep everything in memory"

    /// The fix for a database directory `dir` on a read-only filesystem. Under the shipped unit
    /// that is ProtectSystem=strict's doing for every directory but the state directory: making
    /// it (mkdir) does not help, allowing it does.
    static func readOnlyFix(_ dir: String) -> String {
        "remount the filesystem read-write (under systemd, the unit's ProtectSystem=strict makes all but /var/lib/locationd read-only: create \(dir) for the daemon's user and add it with ReadWritePaths=\(unitFileWord(dir)) in a drop-in, systemctl edit locationd), or set [store] database to a file on a writable filesystem (\"none\" keeps everything in memory)"
    }

    /// Why this process cannot write `file` (`readable`: read and write it), or, when it does
    /// not exist, create it in its directory, with the fix; nil when it can. For the messages
    /// that stop the start. Asked with access(2), not by opening it: closing a descriptor of a
    /// file drops the process's SQLite locks on it.
    static func unwritable(_ file: String, readable: Bool = false) -> (reason: String, fix: String)? {
        guard faccessat(AT_FDCWD, file, readable ? R_OK | W_OK : W_OK, AT_EACCESS) != 0 else { return nil }
        var code = errno
        if code == EACCES, let hidden = hiddenByTheUnit(file) { return hidden }
        let dir = directory(of: file)
        // A directory on the way that cannot be entered: the file is out of reach, whether it
        // exists or not.
        if code == EACCES, let unreachable = unreachable(dir, mode: "0750",
                                                         elsewhere: "set [store] database to a path it can reach (\"none\" keeps everything in memory)") {
            return unreachable
        }
        // What stops the write and what to change: the file, or the directory to create it in.
        var (what, target, mode) = ("the file", "it", "0600")
        if code == ENOENT {
            guard faccessat(AT_FDCWD, dir, W_OK | X_OK, AT_EACCESS) != 0 else { return nil }
            code = errno
            (what, target, mode) = ("it cannot be created: the directory \(dir)", dir, "0750")
        }
        switch code {
        case EROFS:
            return ("\(what) is on a filesystem mounted read-only", readOnlyFix(target == "it" ? dir : target))
        case EACCES:
            let user = currentUser()
            let needed = readable && target == "it" ? "readable and writable" : "writable"
            return ("\(what) is not \(needed) by user \(user.name), uid \(user.uid)",
                    "make \(target) \(needed) by the daemon's user (\(giving(target == "it" ? file : dir, to: user.name, mode: mode))), \(memoryFix)")
        default:
            return ("\(what) cannot be written: \(String(cString: strerror(code)))", "make \(target) writable by the daemon's user, \(memoryFix)")
        }
    }

    /// Under systemd, a store file where the shipped unit hides it from the daemon (a home
    /// directory, /tmp): the reason and the fix, which a file mode cannot be ("chmod o+x /home").
    /// A path that leads there through a symbolic link too (`DaemonOptions.hiddenByTheUnit`).
    static func hiddenByTheUnit(_ file: String) -> (reason: String, fix: String)? {
        guard let hidden = DaemonOptions.hiddenByTheUnit(file, unitHides: DaemonOptions.unitHides) else { return nil }
        return (hidden, "set [store] database to a file under /var/lib/locationd (the unit's state directory), \(memoryFix)")
    }

    /// The directory `file` is in: "/" for a file at the root, "." for a bare name.
    static func directory(of file: String) -> String {
        guard let slash = file.lastIndex(of: "/") else { return "." }
        var dir = file[..<slash]
        while dir.count > 1, dir.last == "/" { dir = dir.dropLast() }  // "a//x" is in "a"
        return dir.isEmpty ? "/" : String(dir)
    }

    /// Why this process cannot reach a file in `dir`, a directory on the way to and including it
    /// that it may not enter, with the fix; nil when it may enter them all. For the store and the
    /// socket alike: `mode` is what `dir` itself should get (it must be writable too, for the file
    /// to be made in it), `elsewhere` the other way out (a path it can reach).
    static func unreachable(_ dir: String, mode: String, elsewhere: String) -> (reason: String, fix: String)? {
        guard var blocked = unsearchable(dir) else { return nil }
        var own = blocked == dir
        var through = ""
        // A symbolic link on the way: what blocks is on the way to its target, named with it.
        if let target = symbolicLink(blocked) {
            let resolved = target.hasPrefix("/") ? target : directory(of: blocked) + "/" + target
            if let inner = unsearchable(resolved) {
                through = " (on the way through the symbolic link \(blocked))"
                own = own && inner == resolved
                blocked = inner
            }
        }
        let user = currentUser()
        let shown = blocked == "." ? workingDirectory() : blocked
        let place = own ? "the directory \(shown)" : "\(shown), a directory on the way to it,"
        let reason = "\(place) cannot be entered by user \(user.name), uid \(user.uid) (no search permission)\(through)"
        if own {
            return (reason, "make \(shown) searchable and writable by the daemon's user (\(giving(shown, to: user.name, mode: mode))), or \(elsewhere)")
        }
        return (reason, "let the daemon's user search \(shown) (chmod o+x, or g+x for a group it is in), or \(elsewhere)")
    }

    /// The commands that make `path` the user's with `mode`, as a fix prints them.
    static func giving(_ path: String, to user: String, mode: String) -> String {
        "chown \(shellOperands(user, path)) && chmod \(shellOperands(mode, path))"
    }

    /// The commands that create the directory `dir` (and its parents) as the user's with `mode`.
    static func creating(_ dir: String, for user: String, mode: String) -> String {
        "mkdir -p \(shellOperands(dir)) && \(giving(dir, to: user, mode: mode))"
    }

    /// The first directory on the way to and including `dir` that this process may not
    /// search (enter), outermost first; nil when it may search them all. A relative `dir` is
    /// reached through the working directory, "." here. Only directories that exist count: a
    /// missing one is made later, and a file in the way fails as "Not a directory".
    static func unsearchable(_ dir: String) -> String? {
        var chain = [dir]
        while let last = chain.last, last != "/", last != ".", let slash = last.lastIndex(of: "/") {
            chain.append(slash == last.startIndex ? "/" : String(last[..<slash]))
        }
        if let last = chain.last, last != "/", last != "." { chain.append(".") }
        // Each one's parents could be searched: EACCES is this one's missing x bit.
        return chain.reversed().first { candidate in
            // (The working directory is one, and looking "." up in it already needs the x bit.)
            if candidate != "." {
                var st = stat()
                if stat(candidate, &st) == 0 {
                    guard st.st_mode & S_IFMT == S_IFDIR else { return false }
                } else if errno != EACCES {
                    return false
                }
                // Failing for EACCES with its parents searchable, it is a symbolic link whose
                // target passes through a directory this process may not enter: it blocks the way.
            }
            return faccessat(AT_FDCWD, candidate, X_OK, AT_EACCESS) != 0 && errno == EACCES
        }
    }

    /// Where `path` points when it is a symbolic link; nil otherwise.
    static func symbolicLink(_ path: String) -> String? {
        var buffer = [UInt8](repeating: 0, count: Int(PATH_MAX))
        let n = buffer.withUnsafeMutableBytes { readlink(path, $0.baseAddress!.assumingMemoryBound(to: CChar.self), $0.count) }
        guard n > 0 else { return nil }
        return String(decoding: buffer[..<n], as: UTF8.self)
    }

    /// The working directory's path, for messages ("." when it cannot be had).
    static func workingDirectory() -> String {
        guard let path = getcwd(nil, 0) else { return "." }
        defer { free(path) }
        return String(cString: path)
    }

    /// This process's effective user: its name (the uid when it has none) and uid.
    static func currentUser() -> (name: String, uid: uid_t) {
        let uid = geteuid()
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 4096)
        guard getpwuid_r(uid, &entry, &buffer, buffer.count, &result) == 0, let result, let name = result.pointee.pw_name else {
            return ("\(uid)", uid)
        }
        return (String(cString: name), uid)
    }

    deinit { sqlite3_close(handle) }

    /// Creates the database's directory when it is missing, and each missing directory above
    /// it, 0750 (as the socket's parents are created). One that exists but cannot be reached (a
    /// directory on the way the daemon's user cannot enter) is left to the open, whose failure
    /// `unwritable` explains.
    /// A path that names a directory (it is one, or ends in '/'), or anything else that is not a
    /// regular file (`/dev/null`), is refused first, before anything is created beside it or
    /// its mode changed (as root, the start would take 0666 /dev/null to 0600).
    static func makeDirectory(for path: String) throws {
        var st = stat()
        let exists = stat(path, &st) == 0
        let type = st.st_mode & S_IFMT
        if (exists && type == S_IFDIR) || path.hasSuffix("/") {
            var dir = Substring(path)
            while dir.count > 1, dir.hasSuffix("/") { dir = dir.dropLast() }
            throw StoreError(description: "\(dir) \(exists ? "is a directory" : "names a directory (it ends in '/')"); [store] database (--database) names the database file, e.g. \(dir == "/" ? "" : dir)/locationd.db", needsAdministrator: true)
        }
        if exists && type != S_IFREG {
            let kind = type == S_IFCHR || type == S_IFBLK ? "a device" : type == S_IFIFO ? "a FIFO" : type == S_IFSOCK ? "a socket" : "not a file"
            throw StoreError(description: "\(path) is not a regular file (\(kind)); [store] database (--database) names the database file, \(memoryFix)", needsAdministrator: true)
        }
        guard let slash = path.lastIndex(of: "/"), slash != path.startIndex else { return }
        let dir = String(path[..<slash])
        try makeDirectories(dir, for: dir)
    }

    /// Creates `dir` after its missing parents; `target` is the database's directory, which the
    /// fix names.
    private static func makeDirectories(_ dir: String, for target: String) throws {
        guard access(dir, F_OK) != 0, errno == ENOENT else { return }
        let parent = directory(of: dir)
        if parent != dir, parent != "." { try makeDirectories(parent, for: target) }
        guard mkdir(dir, 0o750) != 0, errno != EEXIST else { return }
        let code = errno
        if code == EROFS {
            throw StoreError(description: "\(dir): cannot create the database directory (the directory \(parent) is on a filesystem mounted read-only); \(readOnlyFix(target))", needsAdministrator: true)
        }
        let user = currentUser()
        let why = code == EACCES
            ? "the directory \(parent) is not writable by user \(user.name), uid \(user.uid)"
            : String(cString: strerror(code))
        throw StoreError(description: "\(dir): cannot create the database directory (\(why)); create \(target) for the daemon's user (\(creating(target, for: user.name, mode: "0750")); under systemd StateDirectory= does this), \(memoryFix)",
                         needsAdministrator: code == EACCES || code == EPERM || code == ENOTDIR)
    }

    func exec(_ sql: String) throws {
        var error: UnsafeMutablePointer<CChar>?
        guard sqlite3_exec(handle, sql, nil, nil, &error) == SQLITE_OK else {
            let message = error.map { String(cString: $0) } ?? "?"
            sqlite3_free(error)
            throw failure(message)
        }
    }

    func prepare(_ sql: String) throws -> OpaquePointer {
        var stmt: OpaquePointer?
        guard sqlite3_prepare_v2(handle, sql, -1, &stmt, nil) == SQLITE_OK, let stmt else { throw failure() }
        return stmt
    }

    var lastError: String { String(cString: sqlite3_errmsg(handle)) }

    static func damagedFix(_ path: String) -> String {
        // sqlite3 takes no `--`: a relative path starting with '-' is written from "./".
        "the file is damaged or not a SQLite database: stop locationd and put back a copy of it, or move it away to start with an empty one (its regions and queued events are lost; sqlite3 \(shellWord(path.hasPrefix("-") ? "./" + path : path)) .recover may save some), or set [store] database to another file (\"none\" keeps everything in memory)"
    }

    /// SQLite's last error as a StoreError naming the file; a damaged file, one that is not a
    /// database, and a full filesystem get the fix too (they stop the start).
    func failure(_ message: String? = nil) -> StoreError {
        var text = "\(path): \(message ?? lastError)"
        let code = sqlite3_errcode(handle)
        if code == SQLITE_CORRUPT || code == SQLITE_NOTADB {
            return StoreError(description: text + "; " + Self.damagedFix(path), needsAdministrator: true)
        } else if code == SQLITE_FULL {
            let dir = Self.directory(of: path)
            text += "; the filesystem of \(dir) is full: free space on it (df \(dir)), or set [store] database to a file on another filesystem (\"none\" keeps everything in memory)"
        }
        return StoreError(description: text)
    }

    /// Rows inserted, updated or deleted through this connection since it opened.
    var totalChanges: Int { Int(sqlite3_total_changes(handle)) }

    /// Steps a statement that returns rows: true for a row, false once done; an error (a
    /// corrupt page, an I/O error) throws instead of looking like the end of the rows.
    func step(_ stmt: OpaquePointer) throws -> Bool {
        switch sqlite3_step(stmt) {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default: throw failure()
        }
    }

    /// Steps a statement that returns no rows (outside a transaction, its own commit: checked
    /// like one).
    func run(_ stmt: OpaquePointer) throws {
        if depth == 0 { try checkNotMoved() }
        guard sqlite3_step(stmt) == SQLITE_DONE else { throw failure() }
    }

    /// Replaces `program`'s rows of `table` with one row per element: column 1 the program,
    /// columns 2… bound by `bind` (in the caller's transaction, or its own).
    func replaceRows<Rows: Sequence>(of program: String, in table: String, columns: Int, _ rows: Rows,
                                     bind: (OpaquePointer, Rows.Element) -> Void) throws {
        try transaction {
            let delete = try prepare("DELETE FROM \(table) WHERE program = ?")
            defer { sqlite3_finalize(delete) }
            locationd_sqlite3_bind_text(delete, 1, program)
            try run(delete)
            let marks = Array(repeating: "?", count: columns).joined(separator: ", ")
            let insert = try prepare("INSERT INTO \(table) VALUES (\(marks))")
            defer { sqlite3_finalize(insert) }
            for row in rows {
                sqlite3_reset(insert)
                locationd_sqlite3_bind_text(insert, 1, program)
                bind(insert, row)
                try run(insert)
            }
        }
    }

    /// Runs `body` in a transaction, all or nothing; nested calls join the outer one, so a
    /// fix's region states and queued events are one commit.
    func transaction(_ body: () throws -> Void) throws {
        if depth > 0 {
            depth += 1
            defer { depth -= 1 }
            try body()
            return
        }
        try checkNotMoved()
        try exec("BEGIN IMMEDIATE")
        depth = 1
        defer { depth = 0 }
        do { try body(); try exec("COMMIT") } catch { try? exec("ROLLBACK"); throw error }
    }

    /// Refuses a write when the file at `path` is no longer the one open (deleted, or replaced,
    /// while the daemon ran): SQLite would go on writing to the deleted file and report success,
    /// and everything acknowledged from then on would be gone at the next start.
    ///
    /// The same for its -wal and -shm (SQLite's check looks at the main file only): commits go to
    /// the WAL, so with it deleted (a "leftover" cleaned up by hand) every registration and queued
    /// event would be acknowledged and then lost at the next kill or crash. Unlike the main file,
    /// the daemon still holds everything then: a graceful stop checkpoints the deleted WAL into the
    /// database file.
    func checkNotMoved() throws {
        guard path != ":memory:" else { return }
        var moved: Int32 = 0
        guard sqlite3_file_control(handle, "main", SQLITE_FCNTL_HAS_MOVED, &moved) == SQLITE_OK, moved != 0 else {
            for (file, identity) in companions where FileIdentity(path: file) != identity {
                throw StoreError(description: "\(file) was deleted or replaced while locationd ran; nothing is written until locationd restarts, or it would be lost at the next crash: restart it gracefully (systemctl restart locationd): its stop writes everything into \(path) first, and nothing is lost")
            }
            return
        }
        throw StoreError(description: "\(path) was deleted or replaced while locationd ran; nothing is written to the deleted file, which the next start would not see: restart locationd (systemctl restart locationd) to open \(path) again (the regions and queued events in the deleted file are lost then, unless it is copied back first from the daemon's open descriptor: ls -l /proc/\(getpid())/fd)")
    }

    /// Writes the WAL's commits into the database file and empties the WAL (at a graceful stop),
    /// so the file alone holds everything: a copy of it made after `systemctl stop`, or a -wal
    /// removed as a leftover, loses nothing. Nothing to do in memory.
    func checkpoint() throws {
        guard path != ":memory:" else { return }
        guard sqlite3_wal_checkpoint_v2(handle, nil, SQLITE_CHECKPOINT_TRUNCATE, nil, nil) == SQLITE_OK else {
            throw StoreError(description: "\(path): \(lastError)")
        }
    }

    /// A failed write or read outside a request is logged as an error (the daemon keeps going
    /// from memory): through the daemon's log, so the journal gets its priority and error field.
    func report(_ what: String, _ error: any Error) {
        Logger(label: "locationd").error("database: \(what) failed", metadata: ["database": "\(path)", "error": "\(error)"])
    }
}
