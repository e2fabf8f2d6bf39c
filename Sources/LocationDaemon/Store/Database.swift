import CSQLite
import Glibc

public struct StoreError: Error, Hashable, CustomStringConvertible, Sendable {
    public var description: String
}

/// One SQLite connection to the daemon's database, shared by the region store and the
/// background queue so that one fix's effects (region states, queued events) commit together.
///
/// WAL journal, `synchronous=NORMAL`: a committed write survives the daemon being killed
/// (`kill -9`); a power cut may lose the last transactions, never corrupt the file. Used only
/// from the hub's loop (and from the daemon before the loop runs).
public final class Database: @unchecked Sendable {
    private(set) var handle: OpaquePointer?
    public let path: String
    private var depth = 0

    /// Opens (creating the file and its directory if needed) `path`; `:memory:` keeps
    /// everything in memory (`--database none`).
    public init(path: String) throws {
        self.path = path
        if path != ":memory:", let slash = path.lastIndex(of: "/"), slash != path.startIndex {
            let dir = String(path[..<slash])
            if access(dir, F_OK) != 0, mkdir(dir, 0o750) != 0, errno != EEXIST {
                throw StoreError(description: "\(dir): cannot create the database directory: \(String(cString: strerror(errno)))")
            }
        }
        guard sqlite3_open_v2(path, &handle, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nil) == SQLITE_OK else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close(handle)
            throw StoreError(description: "\(path): cannot open the database: \(message)")
        }
        try exec("PRAGMA journal_mode=WAL")
        try exec("PRAGMA synchronous=NORMAL")
        // Another process that holds the file's write lock for a moment (the sqlite3 shell, a
        // backup) makes a write wait up to this long instead of failing it at once, which would
        // refuse a registration or drop a fix's background events. Short: the loop waits too.
        sqlite3_busy_timeout(handle, 250)
    }

    deinit { sqlite3_close(handle) }

    func exec(_ sql: String) throws {
        var error: UnsafeMutablePointer<CChar>?
        guard sqlite3_exec(handle, sql, nil, nil, &error) == SQLITE_OK else {
            let message = error.map { String(cString: $0) } ?? "?"
            sqlite3_free(error)
            throw StoreError(description: "\(path): \(message)")
        }
    }

    func prepare(_ sql: String) throws -> OpaquePointer {
        var stmt: OpaquePointer?
        guard sqlite3_prepare_v2(handle, sql, -1, &stmt, nil) == SQLITE_OK, let stmt else {
            throw StoreError(description: "\(path): \(lastError)")
        }
        return stmt
    }

    var lastError: String { String(cString: sqlite3_errmsg(handle)) }

    /// Steps a statement that returns no rows.
    func run(_ stmt: OpaquePointer) throws {
        guard sqlite3_step(stmt) == SQLITE_DONE else { throw StoreError(description: "\(path): \(lastError)") }
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
        try exec("BEGIN IMMEDIATE")
        depth = 1
        defer { depth = 0 }
        do { try body(); try exec("COMMIT") } catch { try? exec("ROLLBACK"); throw error }
    }

    /// A failed write is reported on stderr (the daemon keeps going from memory).
    func report(_ what: String, _ error: any Error) {
        let line = "locationd: \(what) \(path): \(error)\n"
        _ = line.withCString { write(STDERR_FILENO, $0, strlen($0)) }
    }
}
