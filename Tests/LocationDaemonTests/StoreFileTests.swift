import CSQLite
import Foundation
import LocationClient
import LocationCore
import LocationProtocol
@testable import LocationDaemon
import TOMLConfig
import TestSupport
import Testing

/// The database file itself (docs/regions.md, "Persistence").
@Suite struct StoreFileTests {
    static func directory() throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("store-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir
    }

    static func mode(_ path: String) throws -> Int {
        (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int) ?? -1
    }

    /// `--database /tmp/a/b/x.db` with /tmp/a missing: every missing directory is made, 0750
    /// (only one level was, and the start failed with "cannot create the database directory:
    /// No such file or directory"); the lock file, taken first, needs them too.
    @Test func missingParentDirectoriesAreCreated() throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let old = umask(0o022)
        defer { umask(old) }
        let a = dir.appendingPathComponent("a").path, b = a + "/b"
        let lock = try DatabaseLock(database: b + "/x.db")
        #expect(try Self.mode(a) == 0o750 && Self.mode(b) == 0o750)
        try FileManager.default.removeItem(atPath: a)
        let database = try Database(path: a + "/b/c/x.db")
        #expect(try Self.mode(a) == 0o750 && Self.mode(b) == 0o750 && Self.mode(b + "/c") == 0o750)
        withExtendedLifetime((lock, database)) {}
    }

    /// The tables' version is stamped in the file (`PRAGMA user_version`), and a file stamped by
    /// a newer daemon (a downgrade) is refused with the fix, untouched, not opened and read as
    /// this daemon's own, whatever its tables have become.
    @Test func aDatabaseFromANewerDaemonIsRefusedUntouched() throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("x.db").path
        func version(_ database: Database) throws -> Int64 {
            let stmt = try database.prepare("PRAGMA user_version")
            defer { sqlite3_finalize(stmt) }
            return try database.step(stmt) ? sqlite3_column_int64(stmt, 0) : -1
        }
        do {
            let database = try Database(path: path)
            #expect(try version(database) == 1)
            _ = try RegionStore(database: database)
            try database.exec("PRAGMA user_version = 2")
        }
        let size = try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int
        #expect(throws: StoreError(description: "\(path) was written by a newer locationd (its tables are version \(2); this one reads version 1 only): run the newer locationd again, or set [store] database to another file (\"none\" keeps everything in memory); nothing in it was changed", needsAdministrator: true)) {
            _ = try Database(path: path)
        }
        #expect(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int == size)
    }

    /// SQLite sets no page-cache bulk aside for the store's connection (CSQLite's shim): with
    /// Debian's 20 pages (≈ 86 KiB, all written at the first read) the store, opened and read,
    /// would hold ≈ 100 KiB of SQLite's memory; without them, what it reads. (SQLite's own count,
    /// process-wide: `make test` runs the tests one at a time.)
    @Test func theStoreSetsNoPageCacheAsideUpFront() throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        var before: Int64 = 0, after: Int64 = 0, highest: Int64 = 0
        #expect(sqlite3_status64(SQLITE_STATUS_MEMORY_USED, &before, &highest, 0) == SQLITE_OK)
        let database = try Database(path: dir.appendingPathComponent("x.db").path)
        let store = try RegionStore(database: database)
        _ = try store.load()
        #expect(sqlite3_status64(SQLITE_STATUS_MEMORY_USED, &after, &highest, 0) == SQLITE_OK)
        #expect(after - before < 64 * 1024, "\(after - before) bytes")
        withExtendedLifetime(store) {}
    }

    /// The daemon started on such a file exits 78, which the unit does not restart
    /// (`RestartPreventExitStatus=`): restarted every 2 s it would be refused in the same way for
    /// good. A file another locationd holds may come free: that start still exits 1, restarted.
    @Test func aStartOnANewerDatabaseExits78() throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("x.db").path
        do {
            let database = try Database(path: path)
            try database.exec("PRAGMA user_version = 2")
        }
        let daemon = try DaemonProcess(arguments: ["--gpsd", "127.0.0.1:1"], database: path)
        defer { daemon.stop() }
        #expect(daemon.waitForExit() == 78, "\(daemon.stderrText().suffix(1000))")
        #expect(daemon.stderrText().contains("\(path) was written by a newer locationd"), "\(daemon.stderrText().suffix(1000))")
    }

    /// What each start failure exits with: 78 for what only an administrator can mend, 75 for a
    /// check that could not be made for now, 1 for what may pass.
    @Test func exitStatusSaysWhetherTheUnitShouldRestart() {
        var lookup = ConfigError(file: "c.toml", line: 3, message: "lookup failed")
        #expect(Daemon.exitStatus(for: lookup) == 78)
        lookup.temporary = true
        #expect(Daemon.exitStatus(for: lookup) == 75)
        #expect(Daemon.exitStatus(for: StoreError(description: "damaged", needsAdministrator: true)) == 78)
        #expect(Daemon.exitStatus(for: StoreError(description: "in use by another locationd")) == 1)
        #expect(Daemon.exitStatus(for: SocketServerError.cannotCreate("/run/x.sock", errno: EACCES, user: "daemon")) == 78)
        #expect(Daemon.exitStatus(for: SocketServerError.system("mkdir /run/x", errno: ENOTDIR)) == 78)
        #expect(Daemon.exitStatus(for: SocketServerError.system("socket", errno: EMFILE)) == 1)
        #expect(Daemon.exitStatus(for: SocketServerError.pathInUse("/run/x.sock")) == 1)
        #expect(Daemon.exitStatus(for: DaemonFailure(description: "replay failed")) == 1)
    }

    /// "Left as it is" holds for a newer file in another journal mode too: the stamp is read
    /// before the journal is switched to WAL, which rewrote the file's header (and made a -wal)
    /// before the refusal.
    @Test func aNewerDatabaseInAnotherJournalModeIsNotSwitchedToWAL() throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("x.db").path
        var handle: OpaquePointer?
        _ = Database.lean  // SQLite configured before its first connection, as `Database` does
        try #require(sqlite3_open(path, &handle) == SQLITE_OK)
        #expect(sqlite3_exec(handle, "PRAGMA journal_mode=DELETE; CREATE TABLE t (x); PRAGMA user_version = 2", nil, nil, nil) == SQLITE_OK)
        sqlite3_close(handle)
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(before[18] == 1 && before[19] == 1)  // a rollback journal, not WAL (2)
        #expect(throws: StoreError.self) { _ = try Database(path: path) }
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)
        #expect(!FileManager.default.fileExists(atPath: path + "-wal"))
    }

    /// It says where programs' regions are and where the device was: only its owner reads it,
    /// and its WAL, whatever the umask; an existing file the group or others could read loses
    /// that (the daemon's group is its socket users' too).
    @Test func theDatabaseAndItsWALAreTheOwnersAlone() throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("locationd.db").path
        let old = umask(0o022)
        defer { umask(old) }
        do {
            let store = try RegionStore(path: path)
            try store.writeRegions(of: ProgramID("uid=1 exe=/a"), [RegionRecord(region: Region(id: "r", center: Coordinate(latitude: 48, longitude: 11), radius: 100), state: .outside)])
            #expect(try Self.mode(path) == 0o600)
            #expect(try Self.mode(path + "-wal") == 0o600)
        }
        chmod(path, 0o644)
        // A WAL left by a killed daemon, created under a looser umask, is reused as it is.
        #expect(FileManager.default.createFile(atPath: path + "-wal", contents: nil, attributes: [.posixPermissions: 0o644]))
        let reopened = try Database(path: path)
        #expect(try Self.mode(path) == 0o600)
        #expect(try Self.mode(path + "-wal") == 0o600)
        withExtendedLifetime(reopened) {}
    }

    /// A program whose stored regions are refused at start (here a radius below 10 m) is logged
    /// on its own and not counted in "regions restored".
    @Test func aProgramWhoseRegionsDoNotLoadIsNotCountedAsRestored() async throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("locationd.db").path
        do {
            let store = try RegionStore(path: path)
            let c = Coordinate(latitude: 48, longitude: 11)
            try store.writeRegions(of: ProgramID("uid=1 exe=/good"), [RegionRecord(region: Region(id: "a", center: c, radius: 100), state: .unknown)])
            try store.writeRegions(of: ProgramID("uid=1 exe=/bad"), [RegionRecord(region: Region(id: "b", center: c, radius: 1), state: .unknown)])
        }
        let daemon = try DaemonProcess(arguments: ["--gpsd", "127.0.0.1:1"], database: path)
        defer { daemon.stop() }
        try await daemon.connect(timeout: 10).close()
        let log = daemon.stderrText()
        #expect(log.contains("cannot restore regions: kept as they are, unmonitored, and the program's region requests are refused (storeFailed) until a start loads them; correct or delete its rows in "), "\(log)")
        #expect(log.contains("and restart locationd error=invalidRegion: region b: radius 1 is out of range"), "\(log)")
        let restored = log.split(separator: "\n").first { $0.contains("regions restored") }.map(String.init) ?? ""
        #expect(restored.contains("failed=1 programs=1 regions=1"), "\(restored)")
    }

    /// The store refusing an `ack` (here: another process holds the write lock) is
    /// `storeFailed`, not `outOfRange`: the client's numbers were right. Nothing is forgotten.
    @Test func anAckTheStoreRefusesIsStoreFailedAndForgetsNothing() throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("locationd.db").path
        let queue = try EventQueue(database: Database(path: path), limit: 10)
        let program = ProgramID("uid=1 exe=/a")
        try queue.database.transaction { try queue.append([ProgramEvent(program: program, event: .region(EventQueueTests.event(1)))]) }
        let holder = try Database(path: path)
        try holder.exec("BEGIN IMMEDIATE")
        do {
            _ = try queue.acknowledge(1, for: program)
            Issue.record("acknowledged under another holder's lock")
        } catch {
            #expect(error.code == .storeFailed, "\(error)")
        }
        #expect(queue.count(of: program) == 1)
        try holder.exec("COMMIT")
        #expect(try queue.acknowledge(1, for: program) == 0)
    }

    /// The same through a connection: the client gets a client's reason, not the administrator's
    /// text (the daemon's file, its error, its fix); the log gets the rest.
    @Test func anAckTheStoreRefusesGivesTheClientAClientsReasonAndLogsTheCause() async throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("locationd.db").path
        let queue = try EventQueue(database: Database(path: path), limit: 10)
        let log = CapturedLog()
        let h = try await ServerHarness.start(queue: queue, log: log)
        defer { h.stopIfRunning() }
        let client = try await LocationClient.connect(path: h.path)
        defer { client.close() }
        try await client.startSession(.always)
        let me = PeerIdentity.resolve(PeerCredentials(pid: getpid(), uid: getuid(), gid: getgid())).program
        try await h.hub.eventLoop.submit {
            try queue.database.transaction { try queue.append([ProgramEvent(program: me, event: .region(EventQueueTests.event(1)))]) }
        }.get()
        let holder = try Database(path: path)
        try holder.exec("BEGIN IMMEDIATE")
        do {
            _ = try await client.acknowledge(1)
            Issue.record("acknowledged under another holder's lock")
        } catch let error as ProtocolError {
            #expect(error.code == .storeFailed)
            #expect(error.message == "the daemon could not record the acknowledgement in its database, so nothing was forgotten; acknowledge again later (the daemon's log says why)")
        }
        try holder.exec("COMMIT")
        #expect(log.messages(.error).contains("cannot record an acknowledgement"), "\(log.entries)")
        #expect(try await client.acknowledge(1) == 0)
        await h.stop()
    }

    /// The start's write probe (a write transaction, rolled back) finding the write lock held by
    /// another process (the sqlite3 shell, a backup) is no read-only file: the open succeeds.
    @Test func aDatabaseWhoseWriteLockIsHeldStillOpens() throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("locationd.db").path
        let holder = try Database(path: path)
        try holder.exec("BEGIN IMMEDIATE")
        let second = try Database(path: path)
        try holder.exec("COMMIT")
        try second.transaction {}
    }

    /// A read that fails half-way (a corrupt page, an I/O error) is an error, not the end of
    /// the rows: a daemon that took it for "no more regions" would silently monitor nothing.
    @Test func aCorruptTableFailsTheLoadInsteadOfLoadingNothing() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("corrupt-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("locationd.db").path
        do {
            let store = try RegionStore(path: path)
            for p in ["uid=1 exe=/a", "uid=2 exe=/b"] {
                let records = (0..<40).map { i in
                    RegionRecord(region: Region(id: "r\(i)", center: Coordinate(latitude: 48, longitude: 11), radius: 100,
                                                metadata: String(repeating: "x", count: 200)), state: .outside)
                }
                try store.writeRegions(of: ProgramID(p), records)
            }
            #expect(try store.load().map(\.records.count) == [40, 40])
        }  // closed: the WAL is checkpointed into the file
        // Every page but the schema's (page 1) overwritten.
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: path))
        let size = try handle.seekToEnd()
        #expect(size > 8192, "the table spans pages")
        try handle.seek(toOffset: 4096)
        try handle.write(contentsOf: Data(repeating: 0xA5, count: Int(size) - 4096))
        try handle.close()
        #expect(throws: StoreError.self) { try RegionStore(path: path).load() }
        // The error that stops the start names the fix.
        do { _ = try RegionStore(path: path).load() } catch {
            #expect("\(error)".hasSuffix("; \(Self.damagedFix(path))"), "\(error)")
        }
    }

    static func damagedFix(_ path: String) -> String {
        "the file is damaged or not a SQLite database: stop locationd and put back a copy of it, or move it away " +
            "to start with an empty one (its regions and queued events are lost; sqlite3 \(path) .recover may save some), " +
            #"or set [store] database to another file ("none" keeps everything in memory)"#
    }

    /// A damaged page the start does not read (the queue's, say): the daemon started, then every
    /// write that touched it failed and every queued event was lost at the stop. The start reads
    /// every page once (`PRAGMA quick_check`) and is refused, naming the fix, the file untouched.
    @Test func aDamagedPageAnywhereFailsTheStartUntouched() throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("locationd.db").path
        do {
            let database = try Database(path: path)
            try database.exec("CREATE TABLE filler (n INTEGER PRIMARY KEY, text TEXT NOT NULL)")
            try database.transaction {
                for n in 0..<2000 { try database.exec("INSERT INTO filler VALUES (\(n), '\(String(repeating: "x", count: 100))')") }
            }
            try database.checkpoint()
        }
        var bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        let pageSize = 4096
        try #require(bytes.count > 20 * pageSize)
        for i in 0..<pageSize { bytes[10 * pageSize + i] = UInt8(truncatingIfNeeded: i &* 2654435761 >> 7) }
        try bytes.write(to: URL(fileURLWithPath: path))
        do {
            _ = try Database(path: path)
            Issue.record("a damaged file opened")
        } catch let error as StoreError {
            #expect(error.description.hasPrefix("\(path): the file is damaged ("), "\(error)")
            #expect(!error.description.contains("\n") && !error.description.contains("***"), "\(error)")
            #expect(error.description.hasSuffix(Database.damagedFix(path)), "\(error)")
            #expect(error.needsAdministrator)
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == bytes)
    }

    /// `[store] database` (`--database`) naming a directory, its own state directory say, is
    /// refused before anything is touched, naming the fix: taken for a file, the start would take
    /// the group's and others' permissions off that directory (as root with `--database /home`,
    /// every user's home unreachable), make a `.lock` in it for a trailing '/', and fail with
    /// "unable to open database file".
    @Test func aDirectoryAsTheDatabaseIsRefusedUntouched() throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        chmod(dir.path, 0o755)
        let message = "\(dir.path) is a directory; [store] database (--database) names the database file, e.g. \(dir.path)/locationd.db"
        for path in [dir.path, dir.path + "/"] {
            #expect(throws: StoreError(description: message, needsAdministrator: true)) { try DatabaseLock(database: path) }
            #expect(throws: StoreError(description: message, needsAdministrator: true)) { try Database(path: path) }
        }
        #expect(try Self.mode(dir.path) == 0o755)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).isEmpty)
        #expect(!FileManager.default.fileExists(atPath: dir.path + ".lock"))
    }

    /// `--database /dev/null`, meant as "no database": anything that is not a regular file is
    /// refused before it is touched, naming "none". Taken for a file, as root, the start would
    /// take the group's and others' permissions off the device (0666 → 0600, so every other
    /// user's programs lose /dev/null), leave a `-journal` beside it, and fail with "disk I/O
    /// error". (A copy of
    /// /dev/null, major 1 minor 3, made with mknod in a temporary folder: root only, as the
    /// suites that need root are; run as another user it failed at the mknod, EPERM.)
    @Test(.enabled(if: getuid() == 0, "needs root: mknod of a device needs CAP_MKNOD"))
    func aDeviceAsTheDatabaseIsRefusedUntouched() throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let null = dir.appendingPathComponent("null").path
        try #require(mknod(null, S_IFCHR | 0o666, dev_t(1 << 8 | 3)) == 0, "mknod: \(errno)")
        chmod(null, 0o666)
        let message = "\(null) is not a regular file (a device); [store] database (--database) names the database file, or set [store] database = \"none\" to keep everything in memory"
        #expect(throws: StoreError(description: message, needsAdministrator: true)) { try DatabaseLock(database: null) }
        #expect(throws: StoreError(description: message, needsAdministrator: true)) { try Database(path: null) }
        #expect(try Self.mode(null) == 0o666)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path) == ["null"])
    }

    /// A file that is not a database at all (`[store] database` pointing at the wrong file, or
    /// one overwritten): the start's error named only SQLite's "file is not a database".
    @Test func aFileThatIsNotADatabaseNamesTheFix() throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("locationd.db").path
        #expect(FileManager.default.createFile(atPath: path, contents: Data(repeating: 0x5A, count: 5000),
                                               attributes: [.posixPermissions: 0o644]))
        do {
            _ = try Database(path: path)
            Issue.record("opened")
        } catch {
            #expect("\(error)" == "\(path): file is not a database; \(Self.damagedFix(path))")
        }
        // Named by mistake (another file of the admin's), it keeps its mode: it must not lose the
        // group's and others' bits before SQLite finds it is no database.
        #expect(try Self.mode(path) == 0o644)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path) == ["locationd.db"])
    }

    /// The database file deleted while the daemon runs (with its -wal and -shm): SQLite would go on
    /// writing to the deleted file, so a registration would be acknowledged and gone at the next
    /// start. It is refused with `storeFailed`, naming the file and the fix, and logged.
    @Test func aDatabaseDeletedWhileRunningRefusesWrites() async throws {
        let dir = try DaemonProcess.makeDirectory()
        let daemon = try DaemonProcess(spawning: ["--socket", dir.appendingPathComponent("locationd.sock").path,
                                                   "--gpsd", "127.0.0.1:1"], environment: [:], directory: dir)
        defer { daemon.stop() }
        try await DescriptorLimitTests.connect(daemon).close()
        var client = try RawClient(path: daemon.socketPath)
        defer { client.close() }
        func add(_ name: String) -> String? {
            client.send(#"{"type":"regions.add","id":"\#(name)","regions":[{"id":"\#(name)","latitude":52.5,"longitude":13.4,"radius":100}]}"# + "\n")
            return client.waitFor(#""id":"\#(name)""#)?.last
        }
        client.send(#"{"type":"session.start","id":1,"authorization":"always"}"# + "\n")
        #expect(client.waitFor(#""type":"session""#) != nil)
        #expect(add("before")?.contains(#""type":"regions.changed""#) == true)

        let database = dir.appendingPathComponent("locationd.db").path
        for file in [database, database + "-wal", database + "-shm"] { #expect(unlink(file) == 0, "\(file)") }
        let refused = add("after")
        #expect(refused?.contains(#""code":"storeFailed""#) == true, "\(refused ?? "no reply")")
        // The client gets a client's reason; the file and the fix are the administrator's, in the log.
        #expect(refused?.contains(Hub.notStoredReason) == true, "\(refused ?? "no reply")")
        #expect(refused?.contains(dir.path) == false && refused?.contains("restart") == false, "\(refused ?? "no reply")")
        #expect(daemon.stderrText().contains("error locationd: cannot store region registrations"), "\(daemon.stderrText().suffix(1000))")
        #expect(daemon.stderrText().contains("\(database) was deleted or replaced while locationd ran"), "\(daemon.stderrText().suffix(1000))")
        #expect(daemon.stderrText().contains("restart locationd (systemctl restart locationd)"), "\(daemon.stderrText().suffix(1000))")
    }

    /// The -wal removed while the daemon runs (a "leftover" cleaned up by hand): commits would go
    /// on into the deleted WAL, acknowledged, and a kill would lose them (regions added after the
    /// removal gone at the next start). Writes are refused instead, and a graceful restart keeps
    /// everything acknowledged before. (Given as a symbolic link, the WAL is beside the file it
    /// points to: checked there.)
    @Test(arguments: [false, true])
    func aWALDeletedWhileRunningRefusesWritesAndAGracefulRestartKeepsEverything(throughALink: Bool) async throws {
        let dir = try DaemonProcess.makeDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let socket = dir.appendingPathComponent("locationd.sock").path
        let database = dir.appendingPathComponent(throughALink ? "data/locationd.db" : "locationd.db").path
        var given = database
        if throughALink {
            try FileManager.default.createDirectory(at: dir.appendingPathComponent("data"), withIntermediateDirectories: true)
            given = dir.appendingPathComponent("link.db").path
            try #require(symlink(database, given) == 0)
        }
        let arguments = ["--socket", socket, "--gpsd", "127.0.0.1:1", "--database", given]
        let daemon = try DaemonProcess(spawning: arguments, environment: [:], directory: dir)
        defer { daemon.stop() }
        try await DescriptorLimitTests.connect(daemon).close()
        var client = try RawClient(path: daemon.socketPath)
        func add(_ name: String) -> String? {
            client.send(#"{"type":"regions.add","id":"\#(name)","regions":[{"id":"\#(name)","latitude":52.5,"longitude":13.4,"radius":100}]}"# + "\n")
            return client.waitFor(#""id":"\#(name)""#)?.last
        }
        client.send(#"{"type":"session.start","id":1,"authorization":"always"}"# + "\n")
        #expect(client.waitFor(#""type":"session""#) != nil)
        #expect(add("before")?.contains(#""type":"regions.changed""#) == true)

        #expect(unlink(database + "-wal") == 0)
        let refused = add("after")
        #expect(refused?.contains(#""code":"storeFailed""#) == true, "\(refused ?? "no reply")")
        #expect(refused?.contains(Hub.notStoredReason) == true && refused?.contains(dir.path) == false, "\(refused ?? "no reply")")
        #expect(daemon.stderrText().contains("\(database)-wal was deleted or replaced while locationd ran"), "\(daemon.stderrText().suffix(1000))")
        #expect(daemon.stderrText().contains("restart it gracefully"), "\(daemon.stderrText().suffix(1000))")
        client.close()

        daemon.signal(SIGTERM)  // systemctl stop: the stop checkpoints the deleted WAL into the file
        #expect(daemon.waitForExit(timeout: 20) == 0, "\(daemon.stderrText().suffix(1000))")
        let restarted = try DaemonProcess(spawning: arguments, environment: [:], directory: dir)
        defer { restarted.stop() }
        try await DescriptorLimitTests.connect(restarted).close()
        client = try RawClient(path: restarted.socketPath)
        defer { client.close() }
        client.send(#"{"type":"session.start","id":1,"authorization":"always"}"# + "\n")
        #expect(client.waitFor(#""type":"session""#) != nil)
        client.send(#"{"type":"regions.list","id":2}"# + "\n")
        let list = client.waitFor(#""id":2"#)?.last ?? "no reply"
        #expect(list.contains(#""id":"before""#), "\(list)")
        #expect(!list.contains(#""id":"after""#), "\(list)")
    }

    /// A graceful stop (SIGTERM: systemctl stop) leaves the database file whole on its own: the
    /// WAL is checkpointed into it. Left in the -wal, every commit would be missing from the .db
    /// copied alone after a stop (a backup, a move to another machine), and a -wal removed as a
    /// leftover would take every acknowledged registration with it.
    @Test func aGracefulStopLeavesEverythingInTheDatabaseFile() async throws {
        let dir = try DaemonProcess.makeDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let daemon = try DaemonProcess(spawning: ["--socket", dir.appendingPathComponent("locationd.sock").path,
                                                   "--gpsd", "127.0.0.1:1"], environment: [:], directory: dir)
        defer { daemon.stop() }
        try await DescriptorLimitTests.connect(daemon).close()
        var client = try RawClient(path: daemon.socketPath)
        client.send(#"{"type":"session.start","id":1,"authorization":"always"}"# + "\n")
        #expect(client.waitFor(#""type":"session""#) != nil)
        client.send(#"{"type":"regions.add","id":2,"regions":[{"id":"home","latitude":52.5,"longitude":13.4,"radius":100}]}"# + "\n")
        #expect(client.waitFor(#""type":"regions.changed""#) != nil)
        client.close()
        daemon.signal(SIGTERM)
        #expect(daemon.waitForExit() == 0, "\(daemon.stderrText().suffix(1000))")

        let database = dir.appendingPathComponent("locationd.db").path
        let wal = (try? FileManager.default.attributesOfItem(atPath: database + "-wal")[.size] as? Int) ?? 0
        #expect(wal == 0, "\(wal) bytes left in the -wal")
        let copy = dir.appendingPathComponent("copy.db").path
        try FileManager.default.copyItem(atPath: database, toPath: copy)
        #expect(try RegionStore(path: copy).load().flatMap { $0.records.map(\.region.id) } == ["home"])
    }

    /// A daemon logging to a stand-in journal, whose database file (and its -wal and -shm) was
    /// deleted once it ran: every write outside a request fails from then on.
    static func daemonWithItsDatabaseDeleted() async throws -> (daemon: DaemonProcess, journal: StandInJournal, database: String) {
        let journal = try StandInJournal(directory: try DaemonProcess.makeDirectory())
        let dir = journal.directory
        let daemon = try journal.spawn(arguments: ["--socket", dir.appendingPathComponent("locationd.sock").path, "--gpsd", "127.0.0.1:1"])
        try await DescriptorLimitTests.connect(daemon).close()
        let database = dir.appendingPathComponent("locationd.db").path
        for file in [database, database + "-wal", database + "-shm"] { #expect(unlink(file) == 0, "\(file)") }
        return (daemon, journal, database)
    }

    /// A write the store refuses outside a request (here the program's identity, recorded when
    /// an `always` session starts) goes to the log as an error with its `error` field, not raw
    /// to stderr, which under systemd is the journal's stream — priority 6 (info), no
    /// LOCATIOND_ERROR, so `journalctl -p err` would never show it.
    @Test(.enabled(if: StandInJournal.isAvailable, "needs root and unshare: a stand-in journald"))
    func aFailedWriteOutsideARequestIsLoggedAsAnError() async throws {
        let (daemon, journal, database) = try await Self.daemonWithItsDatabaseDeleted()
        defer { daemon.stop() }
        var client = try RawClient(path: daemon.socketPath)
        defer { client.close() }
        client.send(#"{"type":"session.start","id":1,"authorization":"always"}"# + "\n")
        // The journal read before the reply is awaited: the daemon's sends block once 10
        // datagrams wait (net.unix.max_dgram_qlen), and the reply comes after more than that
        // as another user than root (its CAP_SYS_PTRACE warning is one more).
        var entry: [String: String]?
        while entry == nil, let fields = try journal.receive(timeout: 10) {
            if fields["MESSAGE"]?.contains("program identity") == true { entry = fields }
        }
        #expect(client.waitFor(#""type":"session""#) != nil)
        #expect(entry?["PRIORITY"] == "3", "\(entry ?? [:]); stderr: \(daemon.stderrText())")
        #expect(entry?["LOCATIOND_ERROR"]?.contains("\(database) was deleted or replaced") == true, "\(entry ?? [:])")
        #expect(daemon.stderrText().isEmpty, "\(daemon.stderrText())")
    }

    /// A background monitor that cannot be written is logged naming it and its program: what was
    /// not saved (the monitor, which a restart then lacks) and whose (docs/systemd.md, "Journal").
    @Test(.enabled(if: StandInJournal.isAvailable, "needs root and unshare: a stand-in journald"))
    func aFailedBackgroundMonitorWriteIsLoggedNamingIt() async throws {
        let (daemon, journal, database) = try await Self.daemonWithItsDatabaseDeleted()
        defer { daemon.stop() }
        var client = try RawClient(path: daemon.socketPath)
        defer { client.close() }
        // Both at once, and the journal read before the replies are awaited (the daemon's sends
        // block once 10 datagrams wait: net.unix.max_dgram_qlen).
        client.send(#"{"type":"session.start","id":1,"authorization":"always"}"# + "\n" +
                    #"{"type":"subscribe","id":2,"events":["visits"]}"# + "\n")
        var messages: [String] = []
        while !messages.contains(where: { $0.contains("background monitor") }), let fields = try journal.receive(timeout: 10) {
            if fields["PRIORITY"] == "3", let message = fields["MESSAGE"] { messages.append(message) }
        }
        #expect(client.waitFor(#""type":"subscribed""#) != nil)
        let uid = getuid()
        #expect(messages.contains { $0.hasPrefix("database: writing the background monitor of uid=\(uid) exe=") && $0.contains(" failed database=\(database)") },
                "\(messages)")
    }

    /// A region id with U+0000 (valid JSON: `"a\u0000b"`) was acknowledged and stored cut at
    /// the NUL, as "a": a later region "a" then failed with a UNIQUE constraint, and an id cut to
    /// nothing failed the program's next start. Such an id is refused as invalid.
    @Test func aRegionIDWithNULIsRefused() async throws {
        let dir = try DaemonProcess.makeDirectory()
        let daemon = try DaemonProcess(spawning: ["--socket", dir.appendingPathComponent("locationd.sock").path,
                                                   "--gpsd", "127.0.0.1:1"], environment: [:], directory: dir)
        defer { daemon.stop() }
        try await DescriptorLimitTests.connect(daemon).close()
        var client = try RawClient(path: daemon.socketPath)
        defer { client.close() }
        func add(_ request: Int, _ id: String) -> String? {
            client.send(#"{"type":"regions.add","id":\#(request),"regions":[{"id":"\#(id)","latitude":52.5,"longitude":13.4,"radius":100}]}"# + "\n")
            return client.waitFor(#""id":\#(request),"#)?.last
        }
        client.send(#"{"type":"session.start","id":1,"authorization":"always"}"# + "\n")
        #expect(client.waitFor(#""type":"session""#) != nil)
        let refused = add(2, #"a\u0000b"#)
        #expect(refused?.contains(#""code":"invalidRegion""#) == true && refused?.contains("U+0000") == true, "\(refused ?? "no reply")")
        #expect(add(3, #"\u0000"#)?.contains(#""code":"invalidRegion""#) == true)
        let plain = add(4, "a")
        #expect(plain?.contains(#""type":"regions.changed""#) == true, "\(plain ?? "no reply")")
    }

    /// A registration change writes the rows it changes, not all of the program's: with 2,000
    /// regions registered, rewriting all would make adding one write 4,001 rows (every row deleted
    /// and inserted again; at 10,000 regions ≈ 14 ms a request in release, so 200 such requests
    /// would hold every connection for ≈ 2.8 s: docs/regions.md, "Persistence").
    @Test func aRegistrationChangeWritesOnlyItsRows() async throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try RegionStore(path: dir.appendingPathComponent("r.db").path)
        let h = try await ServerHarness.start(store: store)
        defer { h.stopIfRunning() }
        let program = try await LocationClient.connect(path: h.path)
        defer { program.close() }
        try await program.startSession(.always)
        func region(_ id: String) -> Region { Region(id: id, center: Coordinate(latitude: 52.5, longitude: 13.4), radius: 100) }
        for batch in 0..<20 {
            _ = try await program.request { .regionsAdd(id: $0, regions: (0..<100).map { region("r\(batch)-\($0)") }) }
        }
        func written(_ change: @escaping (RequestID) -> Request) async throws -> Int {
            let before = try await h.hub.eventLoop.submit { store.database.totalChanges }.get()
            _ = try await program.request(change)
            return try await h.hub.eventLoop.submit { store.database.totalChanges }.get() - before
        }
        #expect(try await written { .regionsAdd(id: $0, regions: [region("one")]) } == 1)
        #expect(try await written { .regionsRemove(id: $0, ids: ["r3-7", "one"]) } == 2)
        // Order and content survive a restart: what the store loads is what the engine holds.
        let me = PeerIdentity.resolve(PeerCredentials(pid: getpid(), uid: getuid(), gid: getgid())).program
        let (held, loaded) = try await h.hub.eventLoop.submit {
            (h.hub.regionRecords(of: me), try store.load().first { $0.program == me }?.records ?? [])
        }.get()
        #expect(held.count == 1_999 && loaded.map(\.region.id) == held.map(\.region.id))
        await h.stop()
    }
}
