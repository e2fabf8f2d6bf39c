import Foundation
import LocationClient
import LocationCore
@testable import LocationDaemon
import Simulation
import LocationProtocol
import TestSupport
import Testing

/// Background delivery end to end (docs/protocol.md, "Background delivery"): the real daemon
/// reading a real gpsd, its SQLite file, `kill -9` and restarts. An `always` program that went
/// away gets every region, visit and significant event that happened meanwhile, in order, each
/// exactly once once acknowledged.
@Suite(.serialized, .enabled(if: GPSDHarness.isAvailable, "gpsd is not installed (apt-get install gpsd)"), .timeLimit(.minutes(5)))
struct BackgroundDeliveryTests {
    static let center = RegionPersistenceTests.center
    static let t0 = CivilTime(year: 2026, month: 3, day: 14, hour: 9).timestamp

    /// Waits until the daemon has handled the fix at `second` (its status names it as the last
    /// fix): polling another process's progress, bounded.
    static func handled(second: Int, by client: LocationClient) async throws {
        let want = t0.adding(seconds: Double(second))
        guard try await waitUntil(timeout: 30, { try await client.status().lastFix == want }) else {
            throw DaemonProcess.Failure(description: "the daemon never handled the fix at +\(second) s")
        }
    }

    /// Waits until the daemon is gpsd's client (its status leaves `disconnected`): fixes served
    /// before that would be read by gpsd with nobody watching, and lost to the test.
    static func connectedToGPSD(_ client: LocationClient) async throws {
        guard try await waitUntil(timeout: 30, { try await client.status().state != .disconnected }) else {
            throw DaemonProcess.Failure(description: "the daemon never connected to gpsd")
        }
    }

    static func queued(_ messages: [ServerMessage]) -> [(seq: UInt64, message: ServerMessage)] {
        messages.compactMap { if case .queued(let seq, let m) = $0 { (seq, m) } else { nil } }
    }

    static func describe(_ m: ServerMessage) -> String {
        switch m {
        case .region(let e): "\(e.kind.rawValue) \(e.region)"
        case .visit(let v): v.kind.rawValue
        case .significant: "significant"
        default: "\(m)"
        }
    }

    /// A subscribe under an `always` session; returns everything up to the first status event
    /// plus the backlog (which is written before any newer event, so `count` queued lines).
    static func subscribeAndReadBacklog(_ client: LocationClient, count: Int, overflow: Bool = false) async throws -> [ServerMessage] {
        var reader = MessageReader(client)
        try client.send(.subscribe(id: .string("s"), options: SubscriptionOptions(events: [.visits, .significant])))
        return try await reader.read { seen in
            queued(seen).count + seen.filter { if case .overflow = $0 { true } else { false } }.count >= count + (overflow ? 1 : 0)
        }
    }

    @Test func eventsWhileAwayAreDeliveredInOrderExactlyOnceAcrossKill9() async throws {
        let gpsd = try GPSDHarness()
        defer { gpsd.shutdown() }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("background-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let database = dir.appendingPathComponent("locationd.db").path
        let arguments = ["--gpsd", "\(gpsd.host):\(gpsd.portString)"]

        // 1. The program registers a region, subscribes to visits and significant changes, and
        //    goes away without ending its session.
        let first = try DaemonProcess(arguments: arguments, database: database)
        defer { first.stop() }
        var queuedWhileAway: Int?
        do {
            let program = try await first.connect()
            try await program.startSession(.always)
            _ = try await program.request { .regionsAdd(id: $0, regions: [Region(id: "A", center: Self.center, radius: 100)]) }
            _ = try await program.subscribe(SubscriptionOptions(events: [.visits, .significant]))
            try await Self.connectedToGPSD(program)
            gpsd.serve(bytes: RegionPersistenceTests.log(Array(repeating: -400, count: 5), startSecond: 0))
            let watcher = try await first.connect()  // the same program, never subscribed
            try await Self.handled(second: 4, by: watcher)
            program.close()
            // The daemon has seen the connection go: no session is open any more.
            guard try await waitUntil(timeout: 20, { try await watcher.status().sessions == 0 }) else {
                throw DaemonProcess.Failure(description: "the session never closed")
            }
            // 2. Away: 10 minutes inside the region (enter, visit arrival), then 400 m north
            //    (exit, departure, a significant change).
            gpsd.serve(bytes: RegionPersistenceTests.log(Array(repeating: 0, count: 600) + Array(repeating: 1500, count: 40), startSecond: 5))
            try await Self.handled(second: 644, by: watcher)
            let away = try await watcher.status()
            queuedWhileAway = away.queued
            #expect(away.backgroundMonitors == 1 && away.receiver == "watching")
            watcher.close()
        }
        first.signal(SIGKILL)
        _ = first.waitForExit()

        // 3. After kill -9: everything queued arrives, numbered from 1, in time order.
        let second = try DaemonProcess(arguments: arguments, database: database)
        defer { second.stop() }
        var expectedKinds: [String] = []
        var lastSeq: UInt64 = 0
        do {
            let program = try await second.connect()
            try await program.startSession(.always)
            let seen = try await Self.subscribeAndReadBacklog(program, count: 5)
            let backlog = Self.queued(seen)
            expectedKinds = backlog.map { Self.describe($0.message) }
            #expect(backlog.map(\.seq) == Array(1...UInt64(backlog.count)))
            #expect(Set(expectedKinds) == ["enter A", "arrival", "exit A", "departure", "significant"], "\(expectedKinds)")
            #expect(expectedKinds.filter { $0 == "enter A" }.count == 1 && expectedKinds.filter { $0 == "arrival" }.count == 1)
            // Before the backlog: the subscribed reply and the current status, nothing newer.
            #expect(seen.prefix { if case .queued = $0 { false } else { true } }.count == 2)
            lastSeq = UInt64(backlog.count)
            #expect(queuedWhileAway == backlog.count)
            // Acknowledge part of it, then go away again.
            #expect(try await program.acknowledge(2) == backlog.count - 2)
            program.close()
        }
        // 4. Away again: back inside (a second enter, and a significant change: the handed-over
        //    detector continues), then kill -9 once it is handled.
        do {
            let watcher = try await second.connect()
            try await Self.connectedToGPSD(watcher)
            gpsd.serve(bytes: RegionPersistenceTests.log(Array(repeating: 0, count: 10), startSecond: 700))
            try await Self.handled(second: 709, by: watcher)
            watcher.close()
        }
        second.signal(SIGKILL)
        _ = second.waitForExit()

        // 5. Unacknowledged events come again with the same numbers, then the new one; after the
        //    ack nothing comes again, and live events carry no seq.
        let third = try DaemonProcess(arguments: arguments, database: database)
        defer { third.stop() }
        let program = try await third.connect()
        defer { program.close() }
        try await program.startSession(.always)
        let again = Self.queued(try await Self.subscribeAndReadBacklog(program, count: Int(lastSeq) - 2 + 2))
        #expect(again.map(\.seq) == Array(3...(lastSeq + 2)))
        let kinds = again.map { Self.describe($0.message) }
        #expect(Array(kinds.dropLast(2)) == Array(expectedKinds.dropFirst(2)))
        // Their order depends on which fix of gpsd's first epoch decides each (docs/gpsd.md).
        #expect(Set(kinds.suffix(2)) == ["enter A", "significant"], "\(kinds)")
        #expect(try await program.acknowledge(lastSeq + 2) == 0)
        await #expect(throws: ProtocolError.self) { try await program.acknowledge(lastSeq + 3) }
        try await program.unsubscribe()
        var reader = MessageReader(program)
        try program.send(.subscribe(id: .string("t"), options: SubscriptionOptions(events: [.visits])))
        try await Self.connectedToGPSD(program)
        gpsd.serve(bytes: RegionPersistenceTests.log(Array(repeating: 1500, count: 10), startSecond: 800))
        let live = try await reader.read { seen in seen.contains { if case .region = $0 { true } else { false } } }
        #expect(Self.queued(live).isEmpty, "\(live)")
        #expect(live.compactMap { if case .region(let e) = $0 { "\(e.kind.rawValue) \(e.region)" } else { nil } } == ["exit A"])
    }

    /// `kill -9` at random moments while an away program's region events are being queued: after
    /// each restart the queue holds every transition once — numbered without gaps, in time
    /// order, enter and exit strictly alternating (a lost one would repeat a kind, a duplicate
    /// too).
    @Test func kill9WhileQueueingLosesAndDuplicatesNothing() async throws {
        let gpsd = try GPSDHarness()
        defer { gpsd.shutdown() }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("background-kill-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let database = dir.appendingPathComponent("locationd.db").path
        let arguments = ["--gpsd", "\(gpsd.host):\(gpsd.portString)"]
        // In and out of region A every 10 s.
        func block(_ n: Int, startSecond: Int) -> [UInt8] {
            RegionPersistenceTests.log((0..<n).map { ($0 / 10) % 2 == 0 ? -400 : 0 }, startSecond: startSecond)
        }
        do {
            let setup = try DaemonProcess(arguments: arguments, database: database)
            defer { setup.stop() }
            let program = try await setup.connect()
            try await program.startSession(.always)
            _ = try await program.request { .regionsAdd(id: $0, regions: [Region(id: "A", center: Self.center, radius: 100)]) }
            program.close()
        }
        var rng = SplitMix64(seed: 7)
        var second = 0
        for round in 0..<6 {
            let daemon = try DaemonProcess(arguments: arguments, database: database)
            let watcher = try await daemon.connect()  // the same program, never subscribed
            try await Self.connectedToGPSD(watcher)  // watching before the fixes come
            let before = try await watcher.status().queued ?? 0
            gpsd.serve(bytes: block(400, startSecond: second))
            second += 400
            // The kill comes after this daemon has queued something (on a loaded machine the
            // delay alone could end it before its first event) …
            let deadline = Date().addingTimeInterval(30)
            while try await watcher.status().queued ?? 0 <= before {
                guard Date() < deadline else { throw DaemonProcess.Failure(description: "round \(round): nothing queued within 30 s") }
                try await Task.sleep(for: .milliseconds(5))  // polling another process's progress
            }
            watcher.close()
            // … at a random moment of the replay: fault injection, not synchronisation.
            try await Task.sleep(for: .milliseconds(Int(rng.next() % 120)))
            daemon.signal(SIGKILL)
            _ = daemon.waitForExit()
            daemon.stop()
        }
        let last = try DaemonProcess(arguments: arguments, database: database)
        defer { last.stop() }
        let program = try await last.connect()
        defer { program.close() }
        try await Self.connectedToGPSD(program)
        gpsd.serve(bytes: block(40, startSecond: second))
        try await Self.handled(second: second + 39, by: program)
        try await program.startSession(.always)
        var reader = MessageReader(program)
        // The backlog is written right after the subscription opens; the status reply to the
        // request sent behind it marks its end.
        try program.send(.subscribe(id: .string("s"), options: SubscriptionOptions(events: .visits)))
        try program.send(.status(id: .string("end")))
        let seen = try await reader.read { $0.contains { if case .statusReply(let r) = $0 { r.id == .string("end") } else { false } } }
        let events = Self.queued(seen)
        #expect(!seen.contains { if case .overflow = $0 { true } else { false } })
        #expect(events.map(\.seq) == Array(1...UInt64(max(events.count, 1))), "\(events.map(\.seq))")
        let regionEvents = events.compactMap { if case .region(let e) = $0.message { e } else { nil } }
        #expect(regionEvents.count == events.count)
        #expect(zip(regionEvents, regionEvents.dropFirst()).allSatisfy { $0.time < $1.time && $0.kind != $1.kind })
        #expect(regionEvents.first?.kind == .enter)
        // Each daemon queued something before it was killed, and the last one everything after.
        #expect(regionEvents.count >= 8, "\(regionEvents.count) events")
    }

    /// `locationctl watch --session always --ack` prints the backlog with its numbers and
    /// acknowledges it: afterwards nothing waits for locationctl's program. With 600 queued
    /// events too: one `ack` each would go past the flood limit and get watch disconnected.
    @Test(arguments: [0, 599]) func watchAckPrintsAndAcknowledgesTheBacklog(farRegions: Int) async throws {
        let gpsd = try GPSDHarness()
        defer { gpsd.shutdown() }
        let daemon = try DaemonProcess(arguments: ["--gpsd", "\(gpsd.host):\(gpsd.portString)"])
        defer { daemon.stop() }
        // locationctl is its own program: it registers the region, so the events are its own.
        let geojson = daemon.directory.appendingPathComponent("a.geojson")
        // Far regions report their initial state (outside) at the first fix: one queued event each.
        let far = (0..<farRegions).map { i in
            #"{"type":"Feature","geometry":{"type":"Point","coordinates":[12.\#(i / 100),47.\#(i % 100)]},"properties":{"id":"far\#(i)","radius":100,"notifyInitialState":true}}"#
        }
        let a = #"{"type":"Feature","geometry":{"type":"Point","coordinates":[11.576124,48.137154]},"properties":{"id":"A","radius":100}}"#
        try (#"{"type":"FeatureCollection","features":["# + ([a] + far).joined(separator: ",") + "]}")
            .write(to: geojson, atomically: true, encoding: .utf8)
        let probe = try await daemon.connect()  // also waits for the socket
        defer { probe.close() }
        let imported = try LocationCtlReplayTests.run(["regions", "import", geojson.path, "--socket", daemon.socketPath])
        try #require(imported.status == 0, "\(imported.err)")
        try await Self.connectedToGPSD(probe)
        gpsd.serve(bytes: RegionPersistenceTests.log(Array(repeating: -400, count: 5) + Array(repeating: 0, count: 10), startSecond: 0))
        try await Self.handled(second: 14, by: probe)
        func queuedForLocationctl() throws -> Int? {
            let r = try LocationCtlReplayTests.run(["status", "--socket", daemon.socketPath, "--json"])
            guard case .statusReply(let reply) = try ServerMessage.decode(String(r.out.dropLast())) else { return nil }
            return reply.queued
        }
        #expect(try queuedForLocationctl() == 1 + farRegions)

        let watch = Process()
        watch.executableURL = LocationCtlReplayTests.locationctl
        watch.arguments = ["watch", "--socket", daemon.socketPath, "--session", "always", "--ack", "--json", "--events", "visits"]
        let out = Pipe()
        watch.standardOutput = out
        watch.standardError = FileHandle.nullDevice
        try watch.run()
        defer { if watch.isRunning { watch.terminate() }; watch.waitUntilExit() }
        // Reads until the daemon's reply to the ack; a watchdog ends a hang (a failure).
        let watchdog = Task { try await Task.sleep(for: .seconds(20)); watch.terminate() }
        defer { watchdog.cancel() }
        var text = ""
        while !(text.contains(#""type":"acked""#) && text.contains(#""queued":0}"#)) {
            let chunk = out.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            text += String(decoding: chunk, as: UTF8.self)
        }
        let lines = text.split(separator: "\n").map(String.init)
        let queued = try lines.map { try ServerMessage.decode($0) }.compactMap { m -> (UInt64, ServerMessage)? in
            if case .queued(let seq, let e) = m { (seq, e) } else { nil }
        }
        #expect(queued.map(\.0) == Array(1...UInt64(1 + farRegions)), "\(text.prefix(2000))")
        let regionEvents = queued.compactMap { if case .region(let e) = $0.1 { e } else { nil } }
        #expect(regionEvents.filter { $0.kind == .enter && $0.region == "A" }.count == 1)
        #expect(regionEvents.filter { $0.kind == .outside }.count == farRegions)
        #expect(lines.contains { $0.contains(#""type":"acked""#) && $0.contains(#""seq":\#(1 + farRegions),"#) && $0.contains(#""queued":0"#) },
                "\(text.suffix(2000))")
        #expect(!lines.contains { $0.contains(#""code":"flood""#) })
        #expect(try queuedForLocationctl() == 0)
    }
}

/// Two connections of one program (this test process), one going away without `session.end`:
/// its detectors go on in the background, but an event the other connection receives live is
/// not queued as well (the program would get it twice).
@Suite(.timeLimit(.minutes(5))) struct BackgroundAndLiveConnectionsTests {
    /// A 20-minute stay at 1 Hz, then a drive 3 km away and another 20-minute stay.
    static func day(from t0: Timestamp) -> [Fix] {
        var fixes: [Fix] = []
        let here = Coordinate(latitude: 48.1, longitude: 11.5), there = Coordinate(latitude: 48.127, longitude: 11.5)
        for i in 0..<1200 { fixes.append(Fix(time: t0.adding(seconds: Double(i)), coordinate: here, mode: .threeD, horizontalAccuracy: 8)) }
        for i in 0..<300 {
            let f = Double(i) / 300
            let c = Coordinate(latitude: here.latitude + (there.latitude - here.latitude) * f, longitude: here.longitude)
            fixes.append(Fix(time: t0.adding(seconds: Double(1200 + i)), coordinate: c, mode: .threeD, horizontalAccuracy: 8))
        }
        for i in 0..<1200 { fixes.append(Fix(time: t0.adding(seconds: Double(1500 + i)), coordinate: there, mode: .threeD, horizontalAccuracy: 8)) }
        return fixes
    }

    /// Returns the events queued for the program and the visits the staying connection received.
    static func run(stayingAsks events: EventKinds) async throws -> (queued: [String], live: Int) {
        let database = try Database(path: ":memory:")
        let queue = try EventQueue(database: database, limit: 1000)
        let h = try await ServerHarness.start(queue: queue)
        defer { h.stopIfRunning() }
        let leaving = try await LocationClient.connect(path: h.path)
        try await leaving.startSession(.always)
        try await leaving.subscribe(SubscriptionOptions(events: [.visits]))
        let staying = try await LocationClient.connect(path: h.path)
        try await staying.startSession(.always)
        try await staying.subscribe(SubscriptionOptions(events: events))
        leaving.close()  // without session.end: its visits go on in the background
        let deadline = ContinuousClock.now + .seconds(20)
        while try await h.server.connectionStats().count > 1 && ContinuousClock.now < deadline {}
        try #require(try await h.server.connectionStats().count == 1, "the leaving connection never closed")
        let fixes = Self.day(from: CivilTime(year: 2026, month: 6, day: 1, hour: 8).timestamp)
        let reader = Task {
            var visits = 0
            for try await m in staying.messages {
                if case .visit = m { visits += 1 }
                if case .location(let f, _) = m, f.time == fixes.last!.time { break }
                if case .significant(let f) = m, f.time == fixes.last!.time { break }
            }
            return visits
        }
        for (i, f) in fixes.enumerated() {
            h.hub.submit(.fix(f))
            if i % 500 == 499 { await h.hub.processed() }
        }
        await h.hub.processed()
        let queued = try await h.hub.eventLoop.submit {
            queue.programsWithEvents.flatMap { queue.backlog(of: $0) }
        }.get()
        staying.close()
        let live = events.contains(.visits) ? try await reader.value : 0
        reader.cancel()
        await h.stop()
        return (queued.map { String(decoding: $0, as: UTF8.self) }, live)
    }

    /// The staying connection subscribed mid-visit, 100 s before the other went away: its own
    /// detector never confirms that visit, so the departure the background makes is queued.
    @Test func aDepartureOnlyTheBackgroundSawIsQueued() async throws {
        let queue = try EventQueue(database: try Database(path: ":memory:"), limit: 1000)
        let h = try await ServerHarness.start(queue: queue)
        defer { h.stopIfRunning() }
        let fixes = Self.day(from: CivilTime(year: 2026, month: 6, day: 1, hour: 8).timestamp)
        func feed(_ range: Range<Int>) async { for i in range { h.hub.submit(.fix(fixes[i])) }; await h.hub.processed() }
        let leaving = try await LocationClient.connect(path: h.path)
        try await leaving.startSession(.always)
        try await leaving.subscribe(SubscriptionOptions(events: [.visits]))
        await feed(0..<1000)  // arrival (live, to the leaving connection) at 300 s
        let staying = try await LocationClient.connect(path: h.path)
        try await staying.startSession(.always)
        try await staying.subscribe(SubscriptionOptions(events: [.visits]))
        await feed(1000..<1100)
        leaving.close()
        let deadline = ContinuousClock.now + .seconds(20)
        while try await h.server.connectionStats().count > 1 && ContinuousClock.now < deadline {}
        try #require(try await h.server.connectionStats().count == 1, "the leaving connection never closed")
        await feed(1100..<fixes.count)
        let queued = try await h.hub.eventLoop.submit { queue.programsWithEvents.flatMap { queue.backlog(of: $0) } }.get()
            .map { String(decoding: $0, as: UTF8.self) }
        staying.close()
        await h.stop()
        // The departure from the first stay (only the background saw its arrival); the second
        // stay's arrival, which the staying connection's detector made too, is not queued again.
        #expect(queued.count == 1, "\(queued)")
        #expect(queued.first?.contains(#""event":"departure","arrival":"2026-06-01T08:00:00Z""#) == true, "\(queued)")
    }

    @Test func aKindAnotherConnectionReceivesLiveIsNotQueuedToo() async throws {
        // The staying connection asks for visits too: it gets them live, the queue stays empty.
        let both = try await Self.run(stayingAsks: [.visits, .location])
        #expect(both.live == 3)  // arrival, departure, arrival
        #expect(both.queued.isEmpty, "\(both.queued)")
        // It asks only for locations: the leaving connection's visits are queued.
        let other = try await Self.run(stayingAsks: [.location])
        #expect(other.queued.filter { $0.contains(#""type":"visit""#) }.count == 3, "\(other.queued)")
    }
}

/// A subscribed connection whose session becomes `always` (a new session.start) takes the
/// program's background over as an `always` subscribe does: the queue is delivered, the
/// background monitors carry over.
@Suite(.timeLimit(.minutes(5))) struct SessionUpgradeTakesTheBackgroundTests {
    /// A server with an in-memory queue, this process's program, and one arrival to queue for it.
    static func start() async throws -> (h: ServerHarness, queue: EventQueue, program: ProgramID, visit: Visit) {
        let queue = try EventQueue(database: try Database(path: ":memory:"), limit: 100)
        let h = try await ServerHarness.start(queue: queue)
        let program = PeerIdentity.resolve(PeerCredentials(pid: getpid(), uid: getuid(), gid: getgid())).program
        let visit = Visit(kind: .arrival, arrival: CivilTime(year: 2026, month: 6, day: 1, hour: 8).timestamp, departure: nil,
                          coordinate: Coordinate(latitude: 48.1, longitude: 11.5), horizontalAccuracy: 20)
        return (h, queue, program, visit)
    }

    @Test func upgradingToAlwaysDeliversTheQueueAndTakesTheMonitorsBack() async throws {
        let (h, queue, program, visit) = try await Self.start()
        defer { h.stopIfRunning() }
        try await h.hub.eventLoop.submit {
            h.hub.restoreBackground(program, options: SubscriptionOptions(events: [.visits]))
            try queue.append([ProgramEvent(program: program, event: .visit(visit))])
        }.get()
        let client = try await LocationClient.connect(path: h.path)
        try await client.startSession(.whenInUse)
        try await client.subscribe(SubscriptionOptions(events: [.visits]))
        #expect(try await h.hub.eventLoop.submit { h.hub.backgroundProgramIDs }.get() == [program])
        var reader = MessageReader(client)
        try await client.startSession(.always)
        let seen = try await reader.read(timeout: 10) { $0.contains { if case .queued = $0 { true } else { false } } }
        guard case .queued(let seq, .visit(let got))? = seen.last else { Issue.record("no queued visit: \(seen)"); return }
        #expect(seq == 1 && got == visit)
        #expect(try await h.hub.eventLoop.submit { h.hub.backgroundProgramIDs }.get().isEmpty)
        client.close()
        await h.stop()
    }

    /// The backlog is the program's, not the subscription's: a subscription asking for locations
    /// only still gets the queued visit, since an ack of a later seq would forget one it skipped.
    @Test func aBacklogIsWrittenWholeWhateverTheSubscriptionsEvents() async throws {
        let (h, queue, program, visit) = try await Self.start()
        defer { h.stopIfRunning() }
        try await h.hub.eventLoop.submit { try queue.append([ProgramEvent(program: program, event: .visit(visit))]) }.get()
        let client = try await LocationClient.connect(path: h.path)
        try await client.startSession(.always)
        var reader = MessageReader(client)
        try client.send(.subscribe(id: .string("s"), options: SubscriptionOptions(events: [.location])))
        let seen = try await reader.read(timeout: 10) { $0.contains { if case .queued = $0 { true } else { false } } }
        guard case .queued(let seq, .visit(let got))? = seen.last else { Issue.record("no queued visit: \(seen)"); return }
        #expect(seq == 1 && got == visit)
        client.close()
        await h.stop()
    }

    /// A visit the approximate background monitor held for its publication is newer than what
    /// waits in the queue: taken back into a precise subscription with visits, it is sent after
    /// the backlog, not before it (a departure before its queued arrival).
    @Test func aVisitHeldInTheBackgroundComesAfterTheBacklog() async throws {
        let queue = try EventQueue(database: try Database(path: ":memory:"), limit: 100)
        let h = try await ServerHarness.start(queue: queue)
        defer { h.stopIfRunning() }
        let program = PeerIdentity.resolve(PeerCredentials(pid: getpid(), uid: getuid(), gid: getgid())).program
        let t0 = CivilTime(year: 2026, month: 6, day: 1, hour: 8).timestamp
        let here = Coordinate(latitude: 48.1, longitude: 11.5)
        let earlier = Visit(kind: .arrival, arrival: t0.adding(seconds: -7200), departure: nil, coordinate: here, horizontalAccuracy: 20)
        let approximate = {
            var o = SubscriptionOptions(events: [.visits])
            o.accuracy = .approximate
            return o
        }()
        try await h.hub.eventLoop.submit {
            h.hub.restoreBackground(program, options: approximate)
            try queue.append([ProgramEvent(program: program, event: .visit(earlier))])
        }.get()
        // Parked 400 s: the arrival is detected at about 300 s and held for the publication at 600 s.
        for i in 0..<400 { h.hub.submit(.fix(Fix(time: t0.adding(seconds: Double(i)), coordinate: here, mode: .threeD, horizontalAccuracy: 5))) }
        await h.hub.processed()
        let client = try await LocationClient.connect(path: h.path)
        try await client.startSession(.always)
        var reader = MessageReader(client)
        try client.send(.subscribe(id: .string("s"), options: SubscriptionOptions(events: [.visits])))
        let seen = try await reader.read(timeout: 10) { seen in
            seen.contains { if case .queued = $0 { true } else { false } } && seen.contains { if case .visit = $0 { true } else { false } }
        }
        let order = seen.compactMap { m -> String? in
            switch m {
            case .queued(let seq, _): "queued \(seq)"
            case .visit(let v): "live \(v.kind.rawValue)"
            default: nil
            }
        }
        #expect(order == ["queued 1", "live arrival"], "\(seen)")
        client.close()
        await h.stop()
    }
}
