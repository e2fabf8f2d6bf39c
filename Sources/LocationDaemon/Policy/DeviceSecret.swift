import Glibc
import TOMLConfig

/// The per-device secret of the approximate-location grid (docs/privacy.md): 8 random bytes
/// generated once (the system CSPRNG) into `privacy-secret` next to the database, mode 0600, and read
/// back on every start, so the grid is the same across restarts. Without a database a fresh
/// secret per start (memory-only mode).
enum DeviceSecret {
    static func random() -> UInt64 {
        // SystemRandomNumberGenerator reads getrandom(2) on Linux.
        UInt64.random(in: .min ... .max)
    }

    static func path(forDatabase database: String) -> String {
        guard let slash = database.lastIndex(of: "/") else { return "privacy-secret" }
        return String(database[..<slash]) + "/privacy-secret"
    }

    /// Reads the secret at `path`, creating it when absent.
    static func load(path: String) throws -> UInt64 {
        let user = Database.currentUser().name
        if let text = try DaemonOptions.readFile(path, unreadableFix: "make it the daemon's user's (\(Database.giving(path, to: user, mode: "0600")))") {
            // Whoever reads it can undo the grid's offset: the owner's alone, whatever made it.
            var st = stat()
            if stat(path, &st) == 0, st.st_mode & 0o077 != 0 { _ = chmod(path, st.st_mode & 0o700) }
            let trimmed = text.split(whereSeparator: { $0 == "\n" || $0 == " " }).first.map(String.init) ?? ""
            guard let v = UInt64(trimmed, radix: 16) else {
                throw ConfigError(file: path, line: 1, message: "not a privacy secret (16 hex digits); remove it to generate a new one")
            }
            return v
        }
        let v = random()
        var hex = String(v, radix: 16)
        hex = String(repeating: "0", count: 16 - hex.count) + hex + "\n"
        // Written whole or not at all: a crash while writing must not leave an empty or partial
        // file that stops every later start. The file appears by link(2), which fails if another
        // start created it meanwhile; that one's secret is then read.
        let partial = path + ".new"
        func failure(_ what: String, _ code: Int32 = errno) -> StoreError {
            let why = code == 0 ? "short write" : String(cString: strerror(code))
            // Part of the store: a directory the daemon may not write stays so (78); a full or
            // failing disk may pass (1, restarted).
            return StoreError(description: "\(path): cannot create the privacy secret (\(what): \(why)); check that locationd may write to its state directory",
                              needsAdministrator: [EACCES, EPERM, EROFS, ENOTDIR].contains(code))
        }
        unlink(partial)  // one a crash left: it may have any mode, and O_CREAT would keep it
        let fd = open(partial, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw failure("open \(partial)") }
        let bytes = Array(hex.utf8)
        errno = 0
        let written = write(fd, bytes, bytes.count) == bytes.count && fsync(fd) == 0
        let code = errno  // before close(2) may change it
        close(fd)
        defer { unlink(partial) }
        guard written else { throw failure("write \(partial)", code) }
        guard link(partial, path) == 0 else {
            if errno == EEXIST { return try load(path: path) }
            throw failure("link \(partial)")
        }
        let slash = path.lastIndex(of: "/")
        let directory = open(slash.map { String(path[..<$0]) } ?? ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if directory >= 0 { fsync(directory); close(directory) }  // the new name is durable too
        return v
    }
}
