import Foundation
import LocationClient
import LocationCore
import LocationProtocol
@testable import LocationDaemon
#if canImport(Glibc)
import Glibc
#endif
import Testing

/// A daemon killed while an `always` program is subscribed (the watchdog, the OOM killer,
/// `kill -9`) monitors it in the background after the restart, as if its connection had
/// closed without `session.end`; one that ended its subscription leaves nothing behind
/// (docs/semantics.md, "Background").
@Suite(.serialized, .timeLimit(.minutes(5))) struct BackgroundRestartTests {
    static func restartedBackgroundMonitors(unsubscribeFirst: Bool, downgradeFirst: Bool = false) async throws -> Int? {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("bg-restart-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let database = dir.appendingPathComponent("locationd.db").path
        let first = try DaemonProcess(arguments: ["--gpsd", "127.0.0.1:1"], database: database)
        defer { first.stop() }
        let program = try await first.connect()
        defer { program.close() }
        try await program.startSession(.always)
        _ = try await program.subscribe(SubscriptionOptions(events: [.visits, .significant]))
        if unsubscribeFirst { try await program.unsubscribe() }
        if downgradeFirst { try await program.startSession(.whenInUse) }  // still subscribed
        #expect(try await program.status().backgroundMonitors == 0, "no connection has gone away yet")
        first.signal(SIGKILL)
        _ = first.waitForExit()

        let second = try DaemonProcess(arguments: ["--gpsd", "127.0.0.1:1"], database: database)
        defer { second.stop() }
        let watcher = try await second.connect()
        defer { watcher.close() }
        return try await watcher.status().backgroundMonitors
    }

    @Test func aProgramSubscribedWhenTheDaemonDiesIsMonitoredAfterTheRestart() async throws {
        #expect(try await Self.restartedBackgroundMonitors(unsubscribeFirst: false) == 1)
    }

    @Test func aProgramThatUnsubscribedLeavesNoMonitorBehind() async throws {
        #expect(try await Self.restartedBackgroundMonitors(unsubscribeFirst: true) == 0)
    }

    @Test func aProgramNoLongerAlwaysLeavesNoMonitorBehind() async throws {
        #expect(try await Self.restartedBackgroundMonitors(unsubscribeFirst: false, downgradeFirst: true) == 0)
    }

    /// Subscribing again with the same options writes nothing: every write is a synced
    /// transaction on the hub's loop, and a program may subscribe 100 times a second.
    @Test func subscribingAgainWritesNothing() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("bg-writes-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let queue = try EventQueue(database: Database(path: dir.appendingPathComponent("q.db").path), limit: 100)
        let h = try await ServerHarness.start(queue: queue)
        defer { h.stopIfRunning() }
        let program = try await LocationClient.connect(path: h.path)
        try await program.startSession(.always)
        _ = try await program.subscribe(SubscriptionOptions(events: [.visits]))
        let before = try await h.hub.eventLoop.submit { queue.database.totalChanges }.get()
        for _ in 0..<20 { _ = try await program.subscribe(SubscriptionOptions(events: [.visits])) }
        let after = try await h.hub.eventLoop.submit { queue.database.totalChanges }.get()
        #expect(after == before, "\(after - before) rows written by 20 identical subscribes")
        #expect(try await h.hub.eventLoop.submit { try queue.loadBackground().count }.get() == 1)
        program.close()
        await h.stop()
    }

    /// A background monitor whose save failed (another process held the database's write lock
    /// past the busy timeout) was remembered as saved all the same: the same subscription again
    /// wrote nothing, so after a restart the program was not monitored. A failed save is not
    /// remembered; the next subscription or hand-over writes it.
    @Test func aMonitorWhoseSaveFailedIsSavedByTheNextSubscribe() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("bg-failed-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("q.db").path
        let queue = try EventQueue(database: Database(path: path), limit: 100)
        let h = try await ServerHarness.start(queue: queue)
        defer { h.stopIfRunning() }
        let program = try await LocationClient.connect(path: h.path)
        try await program.startSession(.always)
        let holder = try Database(path: path)
        try holder.exec("BEGIN IMMEDIATE")
        _ = try await program.subscribe(SubscriptionOptions(events: [.visits]))
        try await h.hub.eventLoop.submit {}.get()  // the save, after the reply, has been tried
        try holder.exec("COMMIT")
        #expect(try await h.hub.eventLoop.submit { try queue.loadBackground().count }.get() == 0, "the lock was held")
        _ = try await program.subscribe(SubscriptionOptions(events: [.visits]))
        #expect(try await h.hub.eventLoop.submit { try queue.loadBackground().count }.get() == 1)
        program.close()
        await h.stop()
    }
}
