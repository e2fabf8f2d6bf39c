import Foundation
import LocationClient
import LocationCore
import LocationProtocol
import NMEA
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Durable subscriptions (docs/protocol.md, "Durable subscriptions") through the real daemon
/// replaying a log: every event numbered in the program's queue, written from there in order,
/// kept until acknowledged, across closed connections and `kill -9`.
@Suite(.serialized, .timeLimit(.minutes(5)))
struct DurableSubscriptionTests {
    static var durable: SubscriptionOptions {
        var o = SubscriptionOptions(events: [.location, .visits])
        o.durable = true
        return o
    }

    static func writeLog(count: Int) throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("durable-\(UUID().uuidString.prefix(8)).nmea")
        try Data(DaemonEndToEndTests.walk(count: count, startSecond: 0).bytes).write(to: url)
        return url
    }

    /// The daemon started again on `daemon`'s database (reading nothing new: gpsd is not
    /// there), with a client connected to it.
    static func restarted(_ daemon: DaemonProcess) async throws -> (DaemonProcess, LocationClient) {
        let again = try DaemonProcess(arguments: ["--gpsd", "127.0.0.1:1"], database: daemon.directory.appendingPathComponent("locationd.db").path,
                                      directory: daemon.directory)
        return (again, try await again.connect())
    }

    /// The numbered events among `messages`: (seq, event).
    static func numbered(_ messages: [ServerMessage]) -> [(seq: UInt64, message: ServerMessage)] {
        messages.compactMap { if case .queued(let seq, let m) = $0 { (seq, m) } else { nil } }
    }

    static func subscribe(_ client: LocationClient, until done: @escaping ([ServerMessage]) -> Bool) async throws -> [ServerMessage] {
        var reader = MessageReader(client)
        try await client.startSession(.always)
        try client.send(.subscribe(id: .string("d"), options: durable))
        return try await reader.read(until: done)
    }

    /// Every location of the log arrives numbered 1, 2, 3, … in time order, none live; those
    /// not acknowledged come again, with the same numbers, to the next subscription, also after
    /// the daemon stopped and started again.
    @Test func everyEventIsNumberedAndKeptUntilAcknowledged() async throws {
        let log = try Self.writeLog(count: 200)
        defer { try? FileManager.default.removeItem(at: log) }
        let daemon = try DaemonProcess(arguments: ["--replay", log.path, "--speed", "50"])
        defer { daemon.stop() }
        let client = try await daemon.connect()
        let messages = try await Self.subscribe(client) { Self.numbered($0).count >= 100 }
        #expect(messages.contains { if case .subscribed(_, let o) = $0 { o.durable } else { false } })
        let events = Self.numbered(messages)
        #expect(events.map(\.seq) == Array(1...UInt64(events.count)))
        let times = events.compactMap { if case .location(let f, _) = $0.message { f.time } else { nil } }
        #expect(times == times.sorted())
        #expect(messages.fixes.isEmpty, "no location is written live: \(messages.fixes.count)")
        _ = try await client.acknowledge(50)
        // Subscribed until the replay ends (the daemon then stops): every fix is numbered.
        #expect(daemon.waitForExit(timeout: 30) != nil)
        client.close()

        let (again, second) = try await Self.restarted(daemon)
        defer { again.stop(); second.close() }
        let waiting = try #require(try await second.status().queued)
        #expect(waiting >= 150, "the 200 locations less the 50 acknowledged")
        let backlog = Self.numbered(try await Self.subscribe(second) { Self.numbered($0).count >= waiting })
        #expect(backlog.map(\.seq) == Array(51...UInt64(50 + waiting)))
        #expect(zip(backlog, events.dropFirst(50)).allSatisfy { $0.message == $1.message }, "the same events, the same numbers")
        #expect(backlog.filter { if case .location = $0.message { true } else { false } }.count == 150)
    }

    /// Killed with -9 while a durable subscriber reads, the daemon has every event it numbered:
    /// after the restart the subscriber gets all those it did not acknowledge, none skipped.
    @Test func nothingNumberedIsLostToKill9() async throws {
        let log = try Self.writeLog(count: 3000)
        defer { try? FileManager.default.removeItem(at: log) }
        let daemon = try DaemonProcess(arguments: ["--replay", log.path, "--speed", "20"])
        defer { daemon.stop() }
        let client = try await daemon.connect()
        let first = Self.numbered(try await Self.subscribe(client) { Self.numbered($0).count >= 40 })
        try await client.acknowledge(first[19].seq)
        daemon.signal(SIGKILL)
        _ = daemon.waitForExit()
        client.close()

        let (again, second) = try await Self.restarted(daemon)
        defer { again.stop(); second.close() }
        let waiting = try #require(try await second.status().queued)
        #expect(waiting >= 20, "at least the 20 seen and not acknowledged")
        let backlog = Self.numbered(try await Self.subscribe(second) { Self.numbered($0).count >= waiting })
        #expect(backlog.first?.seq == 21)
        #expect(backlog.map(\.seq) == Array(21...UInt64(20 + waiting)), "contiguous")
        #expect(zip(backlog, first.dropFirst(20)).allSatisfy { $0.message == $1.message }, "the same events, the same numbers")
    }

    /// Only an `always` session has a queue; a program has one durable subscription at a time.
    @Test func refusals() async throws {
        let log = try Self.writeLog(count: 20)
        defer { try? FileManager.default.removeItem(at: log) }
        let daemon = try DaemonProcess(arguments: ["--replay", log.path, "--speed", "1"])
        defer { daemon.stop() }
        let a = try await daemon.connect()
        defer { a.close() }
        try await a.startSession(.whenInUse)
        do { _ = try await a.subscribe(Self.durable); Issue.record("durable under when-in-use was accepted") } catch let e as ProtocolError {
            #expect(e.code == .insufficientAuthorization)
            #expect(e.message.contains("durable subscription needs an always session"))
        }
        try await a.startSession(.always)
        #expect(try await a.subscribe(Self.durable).durable)
        let b = try await daemon.connect()
        defer { b.close() }
        try await b.startSession(.always)
        do { _ = try await b.subscribe(Self.durable); Issue.record("a second durable subscription was accepted") } catch let e as ProtocolError {
            #expect(e.code == .durableInUse)
        }
        #expect(try await b.subscribe(SubscriptionOptions()).durable == false, "without durable it may")
        try await a.unsubscribe()
        #expect(try await b.subscribe(Self.durable).durable, "once the first one ended")
    }
}
