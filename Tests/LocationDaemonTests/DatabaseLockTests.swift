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
        #expect(second.stderrText().contains("\(database) is in use by another locationd (pid \(first.pid ?? -1))"), "\(second.stderrText())")
        #expect(first.isRunning)
    }
}
