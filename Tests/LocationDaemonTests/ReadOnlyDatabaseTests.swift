import Foundation
@testable import LocationDaemon
import Testing
import TestSupport

/// A database the daemon could read but not write stops the start, naming the file, the reason
/// and the fix (docs/regions.md, "Persistence"); SQLite alone would open it read-only and every
/// write would fail later, at a fix with changes. File modes do not stop root, so the daemon
/// runs as the user `daemon` (setpriv), or as root on a read-only bind mount in a mount
/// namespace of its own (unshare -m).
@Suite(.serialized, .enabled(if: getuid() == 0, "needs root: runs the daemon as another user or in its own mount namespace"),
       .timeLimit(.minutes(5)))
struct ReadOnlyDatabaseTests {
    static let asDaemonUser = ["/usr/bin/setpriv", "--reuid=daemon", "--regid=daemon", "--clear-groups"]
    static let memoryFix = #"or set [store] database = "none" to keep everything in memory"#

    /// The user `daemon`'s uid and gid.
    static func daemonUser() throws -> (uid: uid_t, gid: gid_t) {
        let entry = try #require(getpwnam("daemon"))
        return (entry.pointee.pw_uid, entry.pointee.pw_gid)
    }

    /// A database with the daemon's tables in WAL mode, closed (its -wal and -shm removed), as a
    /// run of the daemon leaves it.
    static func makeDatabase(at path: String) throws {
        let database = try Database(path: path)
        _ = try RegionStore(database: database)
        _ = try EventQueue(database: database, limit: 10)
        _ = try ProgramIdentities(database: database)
        _ = try PrivacyCellStore(database: database)
    }

    static func temporaryDirectory() throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("locationd-ro-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir
    }

    /// A database made (as root) in a new directory owned by `user`.
    static func databaseInUsersDirectory(_ user: (uid: uid_t, gid: gid_t)) throws -> (dir: URL, database: String) {
        let dir = try temporaryDirectory()
        let database = dir.appendingPathComponent("locationd.db").path
        chown(dir.path, user.uid, user.gid)
        try makeDatabase(at: database)
        return (dir, database)
    }

    /// The daemon's exit status, or nil when it started instead (its socket answered).
    static func exitStatus(of daemon: DaemonProcess) async -> Int32? {
        if let client = try? await daemon.connect(timeout: 20) {
            client.close()
            return nil
        }
        return daemon.waitForExit()
    }

    /// Starts the daemon on `database` under `launcher` and expects it to exit with `status`
    /// (78: only an administrator can mend it, and the unit does not restart it) with `message`
    /// on stderr.
    static func expectRefusal(database: String, launcher: [String], message: String, status expected: Int32 = 78,
                              sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let daemon = try DaemonProcess(arguments: ["--gpsd", "127.0.0.1:1"], database: database, launcher: launcher)
        defer { daemon.stop() }
        let status = await exitStatus(of: daemon)
        let log = daemon.stderrText()
        #expect(status == expected, "exit status \(status.map(String.init) ?? "none: it started"); stderr: \(log.suffix(2000))",
                sourceLocation: sourceLocation)
        #expect(log.contains(message), "\(log.suffix(2000))", sourceLocation: sourceLocation)
    }

    /// A database file owned by root, 0644 (restored from a backup as root, say): SQLite opens
    /// it read-only for the daemon's user. 0600, it cannot open it at all.
    @Test(.enabled("user 'daemon' cannot run the built locationd (a parent folder is not searchable by others)") {
        try OtherUserTests.daemonUserCanRunLocationd()
    })
    func aDatabaseFileTheDaemonsUserCannotWriteStopsTheStart() async throws {
        let user = try Self.daemonUser()
        for mode: mode_t in [0o644, 0o600] {
            let (dir, database) = try Self.databaseInUsersDirectory(user)
            defer { try? FileManager.default.removeItem(at: dir) }
            chmod(database, mode)
            let message = mode == 0o644 ? """
                \(database): opened read-only (the file is not writable by user daemon, uid \(user.uid)); \
                make it writable by the daemon's user (chown daemon \(database) && chmod 0600 \(database)), \(Self.memoryFix)
                """ : """
                \(database): cannot open the database: unable to open database file (the file is not readable and \
                writable by user daemon, uid \(user.uid)); make it readable and writable by the daemon's user \
                (chown daemon \(database) && chmod 0600 \(database)), \(Self.memoryFix)
                """
            try await Self.expectRefusal(database: database, launcher: Self.asDaemonUser, message: message)
        }
    }

    /// Under systemd, a database in a home directory, which the unit's ProtectHome=yes hides
    /// from the daemon, is said to be hidden, with the fix ("chmod o+x /home" cannot
    /// help). Only when the directory is hidden indeed (INVOCATION_ID alone is no sign):
    /// ProtectHome=yes is played by a mode-0000 tmpfs on /home in a mount namespace of the
    /// daemon's own, the daemon running as the user `daemon`.
    @Test(.enabled("needs unshare, a locationd built outside /home, and user 'daemon' able to run it") {
        try DaemonProcess.canHideHome && OtherUserTests.daemonUserCanRunLocationd()
    })
    func aDatabaseTheUnitHidesSaysWhy() throws {
        let database = "/home/nobody-\(UUID().uuidString.prefix(8))/locationd.db"
        let invocation = ["INVOCATION_ID": "0123456789abcdef0123456789abcdef"]
        let asDaemon = "exec \(Self.asDaemonUser.joined(separator: " ")) \"$0\" \"$@\"; "
        let protectHome = "mount -t tmpfs -o mode=000 tmpfs /home || exit 98; "
        let hint = "\(database).lock: cannot open the database's lock file (the unit's ProtectHome=yes hides /home from locationd); set [store] database to a file under /var/lib/locationd (the unit's state directory), \(Self.memoryFix)"
        for (prelude, expected) in [(protectHome + asDaemon, hint),
                                    (asDaemon, "cannot create the database directory (the directory /home is not writable by user daemon")] {
            let dir = try DaemonProcess.makeDirectory()
            let daemon = try DaemonProcess(spawning: ["--gpsd", "127.0.0.1:1", "--database", database, "--socket", dir.appendingPathComponent("s").path],
                                           environment: invocation, directory: dir, wrapper: ["/usr/bin/unshare", "-m"], prelude: prelude)
            defer { daemon.stop() }
            #expect(daemon.waitForExit() == 78, "\(daemon.stderrText())")
            #expect(daemon.stderrText().contains(expected), "\(prelude): \(daemon.stderrText())")
        }
    }

    /// Another file of the daemon's user named by mistake, one it may read but not write
    /// (0444): refused as no database with its mode kept: checked only once the file opens for
    /// writing, it would lose its group's and others' bits (0444 → 0400), and the start would say
    /// to make it writable (chmod 0600), after which it would still be no database.
    @Test(.enabled("user 'daemon' cannot run the built locationd (a parent folder is not searchable by others)") {
        try OtherUserTests.daemonUserCanRunLocationd()
    })
    func aReadOnlyFileThatIsNotADatabaseKeepsItsMode() async throws {
        let user = try Self.daemonUser()
        let dir = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        chown(dir.path, user.uid, user.gid)
        let notes = dir.appendingPathComponent("notes.txt").path
        #expect(FileManager.default.createFile(atPath: notes, contents: Data("not a database\n".utf8)))
        chown(notes, user.uid, user.gid)
        chmod(notes, 0o444)
        try await Self.expectRefusal(database: notes, launcher: Self.asDaemonUser,
                                     message: "\(notes): file is not a database; \(Database.damagedFix(notes))")
        var st = stat()
        #expect(stat(notes, &st) == 0 && st.st_mode & 0o777 == 0o444, "mode \(String(st.st_mode & 0o777, radix: 8))")
    }

    /// A privacy-secret the daemon's user may not read (restored from a backup as root, 0600):
    /// the start's error names the user and the fix.
    @Test(.enabled("user 'daemon' cannot run the built locationd (a parent folder is not searchable by others)") {
        try OtherUserTests.daemonUserCanRunLocationd()
    })
    func aPrivacySecretTheDaemonsUserCannotReadNamesTheFix() async throws {
        let user = try Self.daemonUser()
        let (dir, database) = try Self.databaseInUsersDirectory(user)
        defer { try? FileManager.default.removeItem(at: dir) }
        chown(database, user.uid, user.gid)
        let secret = dir.appendingPathComponent("privacy-secret").path
        #expect(FileManager.default.createFile(atPath: secret, contents: Data("0123456789abcdef\n".utf8), attributes: [.posixPermissions: 0o600]))
        try await Self.expectRefusal(database: database, launcher: Self.asDaemonUser, message: """
            \(secret): cannot be read by user daemon, uid \(user.uid) (permission denied); make it the daemon's user's \
            (chown daemon \(secret) && chmod 0600 \(secret))
            """)
    }

    /// A -wal left by a run as root (killed, so it stayed): readable, SQLite opens it read-only
    /// and only a write finds out; not even readable, SQLite cannot open the database at all.
    @Test(.enabled("user 'daemon' cannot run the built locationd (a parent folder is not searchable by others)") {
        try OtherUserTests.daemonUserCanRunLocationd()
    })
    func aWALTheDaemonsUserCannotWriteStopsTheStart() async throws {
        let user = try Self.daemonUser()
        for mode: mode_t in [0o644, 0o600] {
            let (dir, database) = try Self.databaseInUsersDirectory(user)
            defer { try? FileManager.default.removeItem(at: dir) }
            chown(database, user.uid, user.gid)
            #expect(FileManager.default.createFile(atPath: database + "-wal", contents: nil, attributes: [.posixPermissions: Int(mode)]))
            try await Self.expectRefusal(database: database, launcher: Self.asDaemonUser, message: """
                \(database)-wal: the database cannot be written (the file is not writable by user daemon, uid \(user.uid)); \
                make it writable by the daemon's user (chown daemon \(database)-wal && chmod 0600 \(database)-wal), \(Self.memoryFix)
                """)
        }
    }

    /// A state directory the daemon's user cannot write: SQLite cannot create the -wal beside
    /// the database (which, and its lock file, the daemon's user may write), nor the daemon
    /// its lock file.
    @Test(.enabled("user 'daemon' cannot run the built locationd (a parent folder is not searchable by others)") {
        try OtherUserTests.daemonUserCanRunLocationd()
    })
    func aDirectoryTheDaemonsUserCannotWriteStopsTheStart() async throws {
        let user = try Self.daemonUser()
        let state = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: state) }
        chmod(state.path, 0o755)
        let database = state.appendingPathComponent("locationd.db").path
        try Self.makeDatabase(at: database)
        #expect(FileManager.default.createFile(atPath: database + ".lock", contents: nil, attributes: [.posixPermissions: 0o600]))
        for file in [database, database + ".lock"] { chown(file, user.uid, user.gid) }
        #expect(!FileManager.default.fileExists(atPath: database + "-wal"))
        let fix = "make \(state.path) writable by the daemon's user (chown daemon \(state.path) && chmod 0750 \(state.path)), \(Self.memoryFix)"
        try await Self.expectRefusal(database: database, launcher: Self.asDaemonUser, message: """
            \(database)-wal: the database cannot be written (it cannot be created: the directory \(state.path) \
            is not writable by user daemon, uid \(user.uid)); \(fix)
            """)

        try FileManager.default.removeItem(atPath: database + ".lock")
        try await Self.expectRefusal(database: database, launcher: Self.asDaemonUser, message: """
            \(database).lock: cannot open the database's lock file (it cannot be created: the directory \(state.path) \
            is not writable by user daemon, uid \(user.uid)); \(fix)
            """)
    }

    /// A state directory the daemon's user cannot even enter (root's, 0750): the lock file is
    /// out of reach whether it exists or not, so the directory is named, not the file; likewise
    /// a directory further up.
    @Test(.enabled("user 'daemon' cannot run the built locationd (a parent folder is not searchable by others)") {
        try OtherUserTests.daemonUserCanRunLocationd()
    })
    func aDirectoryTheDaemonsUserCannotEnterIsNamed() async throws {
        let user = try Self.daemonUser()
        let top = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: top) }
        chmod(top.path, 0o755)
        let state = top.appendingPathComponent("x")
        try FileManager.default.createDirectory(at: state, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o750])
        let database = state.appendingPathComponent("x.db").path
        #expect(!FileManager.default.fileExists(atPath: database + ".lock"))
        try await Self.expectRefusal(database: database, launcher: Self.asDaemonUser, message: """
            \(database).lock: cannot open the database's lock file (the directory \(state.path) cannot be entered by \
            user daemon, uid \(user.uid) (no search permission)); make \(state.path) searchable and writable by the \
            daemon's user (chown daemon \(state.path) && chmod 0750 \(state.path)), or set [store] database to a path it can reach ("none" keeps \
            everything in memory)
            """)

        // One further up: the state directory itself is the daemon's, the one above it is not.
        let deeper = state.appendingPathComponent("y")
        try FileManager.default.createDirectory(at: deeper, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o750])
        chown(deeper.path, user.uid, user.gid)
        let inner = deeper.appendingPathComponent("x.db").path
        try await Self.expectRefusal(database: inner, launcher: Self.asDaemonUser, message: """
            \(inner).lock: cannot open the database's lock file (\(state.path), a directory on the way to it, cannot be \
            entered by user daemon, uid \(user.uid) (no search permission)); let the daemon's user search \(state.path) \
            (chmod o+x, or g+x for a group it is in), or set [store] database to a path it can reach ("none" keeps \
            everything in memory)
            """)
    }

    /// Missing directories above the database are made, but not in a directory the daemon's
    /// user cannot write: the one that could not be made is named, with the fix for the whole
    /// path.
    @Test(.enabled("user 'daemon' cannot run the built locationd (a parent folder is not searchable by others)") {
        try OtherUserTests.daemonUserCanRunLocationd()
    })
    func aMissingDirectoryTheDaemonsUserCannotCreateIsNamed() async throws {
        let user = try Self.daemonUser()
        let top = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: top) }
        chmod(top.path, 0o755)
        let target = top.path + "/a/b"
        try await Self.expectRefusal(database: target + "/x.db", launcher: Self.asDaemonUser, message: """
            \(top.path)/a: cannot create the database directory (the directory \(top.path) is not writable by user daemon, \
            uid \(user.uid)); create \(target) for the daemon's user (mkdir -p \(target) && chown daemon \(target) && \
            chmod 0750 \(target); under systemd StateDirectory= does this), \(Self.memoryFix)
            """)
    }

    /// The fixes' commands for a path a shell would split and expand: run as printed, chown,
    /// chmod and mkdir get exactly the path (the file, the privacy secret, the directory to
    /// make; FixCommandTests has every kind of awkward word).
    @Test(.enabled("user 'daemon' cannot run the built locationd (a parent folder is not searchable by others)") {
        try OtherUserTests.daemonUserCanRunLocationd()
    })
    func theFixesCommandsGetAnAwkwardPathAsWritten() async throws {
        let user = try Self.daemonUser()
        let top = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: top) }
        chmod(top.path, 0o755)
        let dir = top.appendingPathComponent("o'brien $HOME")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: false)
        chown(dir.path, user.uid, user.gid)
        let database = dir.appendingPathComponent("locationd.db").path
        try Self.makeDatabase(at: database)
        chmod(database, 0o644)
        func refusal(_ database: String) async -> String {
            guard let daemon = try? DaemonProcess(arguments: ["--gpsd", "127.0.0.1:1"], database: database, launcher: Self.asDaemonUser) else { return "" }
            defer { daemon.stop() }
            #expect(await Self.exitStatus(of: daemon) == 78, "\(daemon.stderrText().suffix(2000))")
            return daemon.stderrText()
        }
        /// What the shell gives chown, chmod and mkdir of the command in `log` from `start`
        /// (included) to `end`.
        func calls(_ log: String, _ start: String, _ end: String) throws -> [[String]] {
            let from = try #require(log.range(of: start)?.lowerBound, "\(log.suffix(2000))")
            let to = try #require(log[from...].range(of: end)?.lowerBound, "\(log.suffix(2000))")
            return try shellCalls(String(log[from..<to]), programs: ["chown", "chmod", "mkdir"])
        }
        let unwritable = await refusal(database)
        #expect(try calls(unwritable, "chown ", "), or set [store]") == [["chown", "daemon", database], ["chmod", "0600", database]])

        chown(database, user.uid, user.gid)
        let secret = dir.appendingPathComponent("privacy-secret").path
        #expect(FileManager.default.createFile(atPath: secret, contents: Data("0123456789abcdef\n".utf8), attributes: [.posixPermissions: 0o600]))
        let unreadable = await refusal(database)
        #expect(try calls(unreadable, "chown ", ")\n") == [["chown", "daemon", secret], ["chmod", "0600", secret]])

        let missing = top.appendingPathComponent("a b'c/d").path
        let uncreatable = await refusal(missing + "/x.db")
        #expect(try calls(uncreatable, "mkdir ", "; under systemd")
                == [["mkdir", "-p", missing], ["chown", "daemon", missing], ["chmod", "0750", missing]])
    }

    /// The fix a read-only filesystem gets, for the database's directory `dir`: under the unit
    /// that is ProtectSystem=strict's doing for any directory but the state directory.
    /// `unitWord`: `dir` as the drop-in's line writes it.
    static func readOnlyFix(_ dir: String, unitWord: String? = nil) -> String {
        #"remount the filesystem read-write (under systemd, the unit's ProtectSystem=strict makes all but /var/lib/locationd read-only: create "# +
        #"\#(dir) for the daemon's user and add it with ReadWritePaths=\#(unitWord ?? dir) in a drop-in, systemctl edit locationd), "# +
        #"or set [store] database to a file on a writable filesystem ("none" keeps everything in memory)"#
    }

    /// `[store] database` in a directory that does not exist, on a read-only filesystem: what the
    /// shipped unit's ProtectSystem=strict makes of any path outside /var/lib/locationd. The fix
    /// names ReadWritePaths=: creating the directory (mkdir -p …) would still leave the daemon
    /// unable to write there.
    @Test(.enabled("cannot make read-only bind mounts here (unshare -m)") { try ReadOnlyDatabaseTests.canMountReadOnly() })
    func aDatabaseDirectoryOnAReadOnlyFilesystemNamesReadWritePaths() async throws {
        let state = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: state) }
        let target = state.appendingPathComponent("my srv").path
        try await Self.expectRefusal(database: target + "/locationd.db", launcher: Self.readOnlyMount(of: state.path), message: """
            \(target): cannot create the database directory (the directory \(state.path) is on a filesystem mounted read-only); \
            \(Self.readOnlyFix(target, unitWord: "\"\(target)\""))
            """)
    }

    /// A full filesystem at start: beside SQLite's "database or disk is full", the error names
    /// the filesystem to free and the way out. Space may come free: exit 1, which the
    /// unit restarts. (A 48 KiB tmpfs, filled, in a mount namespace of the daemon's own.)
    @Test(.enabled("cannot make read-only bind mounts here (unshare -m)") { try ReadOnlyDatabaseTests.canMountReadOnly() })
    func aFullFilesystemAtStartNamesTheFix() async throws {
        let state = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: state) }
        let database = state.appendingPathComponent("locationd.db").path
        let full = ["/usr/bin/unshare", "-m", "/bin/sh", "-c",
                    #"mount -t tmpfs -o size=48k tmpfs "$1" && ! dd if=/dev/zero of="$1/fill" bs=1k count=100 2>/dev/null && shift && exec "$@""#,
                    "sh", state.path]
        try await Self.expectRefusal(database: database, launcher: full, message: """
            \(database): database or disk is full; the filesystem of \(state.path) is full: free space on it (df \(state.path)), \
            or set [store] database to a file on another filesystem ("none" keeps everything in memory)
            """, status: 1)
    }

    /// Whether this process may make read-only bind mounts in a mount namespace of its own.
    static func canMountReadOnly() throws -> Bool {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        return try runToExit(URL(fileURLWithPath: "/usr/bin/unshare"),
                             ["-m", "/bin/sh", "-c", #"mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && ! touch "$1/x" 2>/dev/null"#,
                              "sh", dir.path]).status == 0
    }

    /// Runs the daemon in a mount namespace of its own where `path` (the database, or its
    /// directory) is a read-only bind mount of itself; as root, so only the mount stops writes.
    static func readOnlyMount(of path: String) -> [String] {
        ["/usr/bin/unshare", "-m", "/bin/sh", "-c", #"mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && exec "$@""#,
         "sh", path]
    }

    @Test(.enabled("cannot make read-only bind mounts here (unshare -m)") { try ReadOnlyDatabaseTests.canMountReadOnly() })
    func aDatabaseOnAReadOnlyFilesystemStopsTheStart() async throws {
        let state = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: state) }
        let database = state.appendingPathComponent("locationd.db").path
        try Self.makeDatabase(at: database)
        let fix = Self.readOnlyFix(state.path)
        // The file alone read-only: its lock file and -wal could be created.
        try await Self.expectRefusal(database: database, launcher: Self.readOnlyMount(of: database), message: """
            \(database): opened read-only (the file is on a filesystem mounted read-only); \(fix)
            """)
        // The whole directory: the lock file (left by the first daemon) comes first.
        try FileManager.default.removeItem(atPath: database + ".lock")
        try await Self.expectRefusal(database: database, launcher: Self.readOnlyMount(of: state.path), message: """
            \(database).lock: cannot open the database's lock file (it cannot be created: the directory \(state.path) \
            is on a filesystem mounted read-only); \(fix)
            """)
    }
}
