import Foundation
@testable import LocationDaemon
import Testing

/// One daemon per database (docs/regions.md, "Persistence").
@Suite(.serialized, .timeLimit(.minutes(5))) struct DatabaseLockTests {
    @Test func aSecondHolderIsRefusedNamingTheFirstUntilItLetsGo() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("dblock-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let database = dir.appendingPathComponent("locationd.db").path
        var first: DatabaseLock? = try DatabaseLock(database: database)
        #expect(first != nil)
        #expect(throws: StoreError(description: "\(database) is in use by another locationd (pid \(getpid())): stop that one, or give this one its own --database (--database none keeps everything in memory)")) {
            _ = try DatabaseLock(database: database)
        }
        first = nil
        _ = try DatabaseLock(database: database)
    }

    /// A second daemon on the same file exits 1 before touching it, naming the first one's pid.
    @Test func aSecondDaemonOnTheSameDatabaseExitsNamingTheFirst() async throws {
        let first = try DaemonProcess(arguments: ["--replay", "/dev/null"])
        defer { first.stop() }
        let client = try await first.connect()
        client.close()
        let database = first.directory.appendingPathComponent("locationd.db").path
        let second = try DaemonProcess(arguments: ["--replay", "/dev/null"], database: database)
        defer { second.stop() }
        #expect(second.waitForExit(timeout: 20) == 1)
        #expect(second.stderrText().contains("\(database) is in use by another locationd (pid \(first.pid))"), "\(second.stderrText())")
        #expect(first.isRunning)
    }

    /// Another name for the same file is the same database: a symbolic link to it (or to its
    /// directory) and a hard link are refused while the first holder lives.
    @Test func theSameFileUnderAnotherNameIsRefused() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("dblock-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir.appendingPathComponent("data"), withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let database = dir.appendingPathComponent("data/locationd.db").path
        let first = try DatabaseLock(database: database)
        // The file does not exist yet: the lock file alone stands for it.
        let dirLink = dir.appendingPathComponent("linked").path
        try #require(symlink(dir.appendingPathComponent("data").path, dirLink) == 0)
        #expect(throws: StoreError(description: "\(dirLink)/locationd.db (the file \(database)) is in use by another locationd (pid \(getpid())): stop that one, or give this one its own --database (--database none keeps everything in memory)")) {
            _ = try DatabaseLock(database: dirLink + "/locationd.db")
        }
        // Made (as SQLite makes it), then held by the first.
        try Data("SQLite format 3\u{0}".utf8).write(to: URL(fileURLWithPath: database))
        try first.holdDatabaseFile()
        let fileLink = dir.appendingPathComponent("link.db").path
        try #require(symlink(database, fileLink) == 0)
        #expect(throws: StoreError(description: "\(fileLink) (the file \(database)) is in use by another locationd (pid \(getpid())): stop that one, or give this one its own --database (--database none keeps everything in memory)")) {
            _ = try DatabaseLock(database: fileLink)
        }
        let hardLink = dir.appendingPathComponent("hard.db").path
        try #require(link(database, hardLink) == 0)
        let byHardLink = StoreError(description: "\(hardLink) is in use by another locationd, which reached it by another name (a hard link, or a symbolic link made after it started): stop that one, or give this one its own --database (--database none keeps everything in memory)")
        #expect(throws: byHardLink) { _ = try DatabaseLock(database: hardLink) }
        // The hard link's own lock file was let go with its refusal (held, this would say it is
        // in use by this pid).
        #expect(throws: byHardLink) { _ = try DatabaseLock(database: hardLink) }
        withExtendedLifetime(first) {}
    }

    /// A link to a database not made yet: the lock is the file's from the first start on.
    @Test func aLinkToAFileNotMadeYetLocksTheFile() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("dblock-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir.appendingPathComponent("data"), withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let database = dir.appendingPathComponent("data/locationd.db").path
        let linkPath = dir.appendingPathComponent("link.db").path
        try #require(symlink("data/locationd.db", linkPath) == 0)
        let first = try DatabaseLock(database: linkPath)
        #expect(first.path == database + ".lock")
        #expect(throws: StoreError(description: "\(database) is in use by another locationd (pid \(getpid())): stop that one, or give this one its own --database (--database none keeps everything in memory)")) {
            _ = try DatabaseLock(database: database)
        }
        withExtendedLifetime(first) {}
    }
}
