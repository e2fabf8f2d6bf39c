import Foundation
import LocationClient
import LocationCore
import LocationProtocol
import NMEA
import TestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A durable subscription while its program is away (docs/semantics.md, "Durable subscriptions
/// away"), through the real daemon reading a real gpsd, its SQLite file and `kill -9`: the
/// locations it would have been sent connected are queued, filters applied, and the next
/// durable subscribe gets them numbered, in order, then the live ones, with no gap or repeat.
@Suite(.serialized, .enabled(if: GPSDHarness.isAvailable, "gpsd is not installed (apt-get install gpsd)"), .timeLimit(.minutes(5)))
struct DurableAwayTests {
    /// Locations at least 3 s of fix time apart: with 1 Hz fixes, exactly 3 s apart.
    static var options: SubscriptionOptions {
        var o = SubscriptionOptions(minimumInterval: 3)
        o.durable = true
        return o
    }

    /// 1 Hz fixes walking north 1 m per second, from `second` on, for `count` seconds.
    static func walk(from second: Int, count: Int) -> [UInt8] {
        RegionPersistenceTests.log((second..<(second + count)).map { Double($0) }, startSecond: second)
    }

    static func times(_ events: [(seq: UInt64, message: ServerMessage)]) -> [Double] {
        events.compactMap { if case .location(let f, _) = $0.message { (f.time.secondsSinceEpoch - BackgroundDeliveryTests.t0.secondsSinceEpoch) } else { nil } }
    }

    /// Subscribes `client` durably (a new `always` session); its events are read from the
    /// reader returned.
    static func subscribe(_ client: LocationClient) async throws -> MessageReader {
        let reader = MessageReader(client)
        try await client.startSession(.always)
        #expect(try await client.subscribe(options).durable)
        return reader
    }

    /// Reads from `reader` until `count` numbered events came.
    static func numbered(_ reader: inout MessageReader, count: Int) async throws -> [ServerMessage] {
        try await reader.read(timeout: 30) { DurableSubscriptionTests.numbered($0).count >= count }
    }

    /// The program goes away (closes its connection without ending its session): once the
    /// daemon has seen it go, `watcher` (the same program, no session) says so.
    static func away(_ program: LocationClient, watcher: LocationClient) async throws {
        program.close()
        guard try await waitUntil(timeout: 20, { try await watcher.status().sessions == 0 }) else {
            throw DaemonProcess.Failure(description: "the session never closed")
        }
    }

    @Test func locationsWhileAwayArriveNumberedInOrderFiltered() async throws {
        let gpsd = try GPSDHarness()
        defer { gpsd.shutdown() }
        let daemon = try DaemonProcess(arguments: ["--gpsd", "\(gpsd.host):\(gpsd.portString)"])
        defer { daemon.stop() }
        let watcher = try await daemon.connect()
        defer { watcher.close() }
        let program = try await daemon.connect()
        var first = try await Self.subscribe(program)
        try await BackgroundDeliveryTests.connectedToGPSD(watcher)
        gpsd.serve(bytes: Self.walk(from: 0, count: 30))
        let connected = DurableSubscriptionTests.numbered(try await Self.numbered(&first, count: 10))
        try await BackgroundDeliveryTests.handled(second: 29, by: watcher)
        try await Self.away(program, watcher: watcher)
        let before = try #require(try await watcher.status().queued)

        // Away for a minute: its locations go on into the queue; the receiver stays watched.
        gpsd.serve(bytes: Self.walk(from: 30, count: 60))
        try await BackgroundDeliveryTests.handled(second: 89, by: watcher)
        let status = try await watcher.status()
        #expect(status.receiver == "watching" && status.subscribers == 0)
        let queued = try #require(status.queued)
        #expect(queued - before == 20, "one location each 3 s of the minute away: \(queued - before)")

        // Back: the backlog, then live ones, numbered without a gap, in time order, 3 s apart
        // throughout (the filter went on across both changes).
        let again = try await daemon.connect()
        defer { again.close() }
        var reader = try await Self.subscribe(again)
        var seen = try await Self.numbered(&reader, count: queued)
        gpsd.serve(bytes: Self.walk(from: 90, count: 30))
        seen += try await Self.numbered(&reader, count: 10)
        let events = DurableSubscriptionTests.numbered(seen)
        #expect(events.map(\.seq) == Array(1...UInt64(events.count)), "\(events.map(\.seq))")
        #expect(zip(events, connected).allSatisfy { $0.message == $1.message }, "the connected part comes again unchanged")
        let times = Self.times(events)
        #expect(times.count == events.count, "locations only")
        #expect(zip(times, times.dropFirst()).allSatisfy { $1 - $0 == 3 }, "\(times)")
        #expect(times.count == 40 && times.filter { $0 >= 30 && $0 < 90 }.count == 20, "\(times)")
        #expect(seen.fixes.isEmpty, "nothing live")
    }

    /// `kill -9` while the program is away: the daemon starts its durable subscription again
    /// from the store, and the locations made between its start and the program's return are
    /// queued after those made before, numbered on.
    @Test func awaySubscriptionSurvivesKill9() async throws {
        let gpsd = try GPSDHarness()
        defer { gpsd.shutdown() }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("durable-away-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let database = dir.appendingPathComponent("locationd.db").path
        let arguments = ["--gpsd", "\(gpsd.host):\(gpsd.portString)"]
        do {
            let first = try DaemonProcess(arguments: arguments, database: database)
            defer { first.stop() }
            let watcher = try await first.connect()
            let program = try await first.connect()
            var reader = try await Self.subscribe(program)
            try await BackgroundDeliveryTests.connectedToGPSD(watcher)
            gpsd.serve(bytes: Self.walk(from: 0, count: 15))
            _ = try await Self.numbered(&reader, count: 5)
            try await BackgroundDeliveryTests.handled(second: 14, by: watcher)
            try await Self.away(program, watcher: watcher)
            gpsd.serve(bytes: Self.walk(from: 15, count: 30))
            try await BackgroundDeliveryTests.handled(second: 44, by: watcher)
            watcher.close()
            first.signal(SIGKILL)
            _ = first.waitForExit()
        }
        let second = try DaemonProcess(arguments: arguments, database: database)
        defer { second.stop() }
        let watcher = try await second.connect()
        defer { watcher.close() }
        // Nobody connected has a session, yet the receiver is watched for the program away.
        try await BackgroundDeliveryTests.connectedToGPSD(watcher)
        let before = try #require(try await watcher.status().queued)
        gpsd.serve(bytes: Self.walk(from: 45, count: 30))
        try await BackgroundDeliveryTests.handled(second: 74, by: watcher)
        let queued = try #require(try await watcher.status().queued)
        #expect(queued - before == 10, "made after the restart: \(queued - before)")

        let program = try await second.connect()
        defer { program.close() }
        var reader = try await Self.subscribe(program)
        let events = DurableSubscriptionTests.numbered(try await Self.numbered(&reader, count: queued))
        #expect(events.map(\.seq) == Array(1...UInt64(queued)))
        let times = Self.times(events)
        #expect(times.count == 25 && times.filter { $0 >= 15 && $0 < 45 }.count == 10, "5 connected, 10 away before the kill: \(times)")
        let after = times.filter { $0 >= 45 }
        #expect(after.count == 10 && zip(after, after.dropFirst()).allSatisfy { $1 - $0 == 3 }, "after the restart: \(times)")
        #expect(zip(times, times.dropFirst()).allSatisfy { $0 < $1 }, "in order, none twice")
    }

    /// An approximate program's durable subscription away is queued as it would be sent: cells
    /// at publications, stamped with the epoch's start.
    @Test func approximateAwayLocationsAreCells() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("durable-away-approx-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        // A fix every 10 s for 3 hours: 18 publications, one every 0.6 s of the replay.
        let writer = NMEAWriter()
        var text = ""
        for i in 0..<1080 {
            let s = Double(i * 10)
            var q = NMEAWriter.Quality()
            q.sigmaLatitude = 2.5; q.sigmaLongitude = 3.5; q.sigmaAltitude = 4
            text += writer.epoch(Fix(time: BackgroundDeliveryTests.t0.adding(seconds: s),
                                     coordinate: Coordinate(latitude: 48.137_154 + s * 1.3 / 111_195.0, longitude: 11.576_124),
                                     mode: .threeD, altitudeMSL: 519.5, speed: 1.3, course: 0), quality: q)
        }
        let log = dir.appendingPathComponent("walk.nmea")
        try Data(text.utf8).write(to: log)
        let config = dir.appendingPathComponent("locationd.toml")
        try "[policy.me]\nuser = \(getuid())\nauthorization = \"always\"\naccuracy = \"approximate\"\n".write(to: config, atomically: true, encoding: .utf8)
        let daemon = try DaemonProcess(arguments: ["--config", config.path, "--replay", log.path, "--speed", "1000", "--privacy-seed", "42"])
        defer { daemon.stop() }
        let watcher = try await daemon.connect()
        defer { watcher.close() }
        let program = try await daemon.connect()
        var reader = try await Self.subscribe(program)
        let connected = DurableSubscriptionTests.numbered(try await Self.numbered(&reader, count: 2))
        try await Self.away(program, watcher: watcher)
        let before = try #require(try await watcher.status().queued)
        guard try await waitUntil(timeout: 30, { try await (watcher.status().queued ?? 0) >= before + 2 }) else {
            throw DaemonProcess.Failure(description: "nothing queued while away")
        }
        let back = try await daemon.connect()
        defer { back.close() }
        var backReader = try await Self.subscribe(back)
        let events = DurableSubscriptionTests.numbered(try await Self.numbered(&backReader, count: before + 2))
        #expect(events.map(\.seq) == Array(1...UInt64(events.count)))
        #expect(zip(events, connected).allSatisfy { $0.message == $1.message })
        let grid = PrivacyGrid(secret: 42)
        let fixes = events.compactMap { if case .location(let f, _) = $0.message { f } else { nil } }
        #expect(fixes.count == events.count && fixes.count >= before + 2)
        for f in fixes {
            #expect(Geodesy.distance(f.coordinate, grid.centre(of: grid.cell(of: f.coordinate).cell)) < 0.5, "a cell centre")
            #expect(f.horizontalAccuracy == 2122 && f.speed == nil && f.altitudeMSL == nil)
            #expect((f.time.secondsSinceEpoch - BackgroundDeliveryTests.t0.secondsSinceEpoch).truncatingRemainder(dividingBy: 600) == 0, "an epoch's start")
        }
        let times = fixes.map(\.time)
        #expect(zip(times, times.dropFirst()).allSatisfy { $0 < $1 }, "one per epoch, in order")
    }

    /// The queue bound holds for what a durable subscription away makes: past `queue_limit`
    /// the oldest go, and an `overflow` says how many, before the newest.
    @Test func queueBoundHoldsWhileAway() async throws {
        let gpsd = try GPSDHarness()
        defer { gpsd.shutdown() }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("durable-away-bound-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let config = dir.appendingPathComponent("locationd.toml")
        try "[store]\nqueue_limit = 5\n".write(to: config, atomically: true, encoding: .utf8)
        let daemon = try DaemonProcess(arguments: ["--config", config.path, "--gpsd", "\(gpsd.host):\(gpsd.portString)"])
        defer { daemon.stop() }
        let watcher = try await daemon.connect()
        defer { watcher.close() }
        let program = try await daemon.connect()
        var reader = try await Self.subscribe(program)
        try await BackgroundDeliveryTests.connectedToGPSD(watcher)
        gpsd.serve(bytes: Self.walk(from: 0, count: 9))
        let connected = DurableSubscriptionTests.numbered(try await Self.numbered(&reader, count: 3))
        try await BackgroundDeliveryTests.handled(second: 8, by: watcher)
        _ = try await program.acknowledge(connected[2].seq)
        try await Self.away(program, watcher: watcher)
        gpsd.serve(bytes: Self.walk(from: 9, count: 60))
        try await BackgroundDeliveryTests.handled(second: 68, by: watcher)
        #expect(try await watcher.status().queued == 5)

        let back = try await daemon.connect()
        defer { back.close() }
        var backReader = try await Self.subscribe(back)
        let messages = try await Self.numbered(&backReader, count: 5)
        let overflow = messages.compactMap { if case .overflow(let lost, let seq) = $0 { (lost, seq) } else { nil } }
        let events = DurableSubscriptionTests.numbered(messages)
        // 3 acknowledged, 20 made away (9, 12, …, 66), the oldest 15 of them dropped.
        #expect(overflow.count == 1 && overflow.first?.0 == 15 && overflow.first?.1 == 18, "\(overflow)")
        #expect(events.map(\.seq) == Array(19...23))
        let times = Self.times(events)
        #expect(times.count == 5 && times.last! >= 66 && zip(times, times.dropFirst()).allSatisfy { $1 - $0 == 3 }, "the newest: \(times)")
    }
}
