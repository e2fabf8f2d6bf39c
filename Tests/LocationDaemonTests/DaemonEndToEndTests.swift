import Foundation
import LocationClient
import LocationCore
import LocationProtocol
import NMEA
import Simulation
import Testing

/// Real processes end to end: a real gpsd fed an NMEA log → the real `locationd` executable
/// reading it through libgps → a subscriber on the real Unix socket.
@Suite(.serialized, .enabled(if: GPSDHarness.isAvailable, "gpsd is not installed (apt-get install gpsd)"), .timeLimit(.minutes(5)))
struct DaemonEndToEndTests {
    /// A walk of `count` 1 Hz epochs starting at `start` seconds into the day, written by our own
    /// NMEA writer; returns the log and the fixes our parser reads from it (the truth the
    /// subscriber must receive, whatever path the bytes take).
    static func walk(count: Int, startSecond: Int, northMetres: Double = 0) -> (bytes: [UInt8], fixes: [Fix]) {
        let writer = NMEAWriter()
        let t0 = CivilTime(year: 2026, month: 3, day: 14, hour: 9).timestamp
        var text = ""
        for i in 0..<count {
            let s = startSecond + i
            let c = Coordinate(latitude: 48.137_154 + (northMetres + Double(s) * 1.3) / 111_195.0,
                               longitude: 11.576_124 + Double(s % 5) * 2e-6)
            var q = NMEAWriter.Quality()
            q.sigmaLatitude = 2.5; q.sigmaLongitude = 3.5; q.sigmaAltitude = 4
            text += writer.epoch(Fix(time: t0.adding(seconds: Double(s)), coordinate: c, mode: .threeD,
                                     altitudeMSL: 519.5, speed: 1.3, course: 0), quality: q)
        }
        let bytes = Array(text.utf8)
        var decoder = NMEADecoder()
        var fixes: [Fix] = []
        decoder.feed(bytes) { if let f = $0.fix { fixes.append(f) } }
        decoder.finish { if let f = $0.fix { fixes.append(f) } }
        return (bytes, fixes)
    }

    static func expectSame(_ received: [Fix], _ expected: [Fix], sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(received.map(\.time) == expected.map(\.time), sourceLocation: sourceLocation)
        for (r, e) in zip(received, expected) {
            #expect(abs(r.coordinate.latitude - e.coordinate.latitude) < 1e-8, sourceLocation: sourceLocation)
            #expect(abs(r.coordinate.longitude - e.coordinate.longitude) < 1e-8, sourceLocation: sourceLocation)
        }
        // gpsd reports the first epoch in pieces (mode 2, no accuracy until it has seen GSA and
        // GST); from the second epoch on every fix is complete (docs/gpsd.md).
        for r in received.dropFirst() {
            #expect(r.mode == .threeD && r.horizontalAccuracy != nil, sourceLocation: sourceLocation)
        }
    }

    @Test func subscriberReceivesEveryFixOfTheLogInOrder() async throws {
        let log = Self.walk(count: 120, startSecond: 0)
        #expect(log.fixes.count == 120)
        let gpsd = try GPSDHarness(startGPSD: false)
        defer { gpsd.shutdown() }
        gpsd.serve(bytes: log.bytes, endOfReplay: true)
        let daemon = try DaemonProcess(arguments: ["--gpsd", "\(gpsd.host):\(gpsd.portString)"])
        defer { daemon.stop() }

        // Subscribe before gpsd exists, so no fix can pass before the subscriber is there.
        let client = try await daemon.connect()
        defer { client.close() }
        var reader = MessageReader(client)
        try await client.startSession(.always)
        try client.send(.subscribe(id: .string("e2e"), options: SubscriptionOptions()))
        let before = try await reader.read { $0.states.count >= 1 }
        #expect(before.states == [.disconnected])

        try gpsd.start()
        let messages = try await reader.read { $0.fixes.count >= log.fixes.count }
        Self.expectSame(messages.fixes, log.fixes)
        #expect(messages.states.prefix(2) == [.connected, .fix])
    }

    @Test func gpsdKilledAndRestartedMidStream() async throws {
        let first = Self.walk(count: 40, startSecond: 0)
        let second = Self.walk(count: 40, startSecond: 100)
        let gpsd = try GPSDHarness(startGPSD: false)
        defer { gpsd.shutdown() }
        gpsd.serve(bytes: first.bytes)
        let daemon = try DaemonProcess(arguments: ["--gpsd", "\(gpsd.host):\(gpsd.portString)"])
        defer { daemon.stop() }
        let client = try await daemon.connect()
        defer { client.close() }
        var reader = MessageReader(client)
        try await client.startSession(.always)
        try client.send(.subscribe(id: .number(1), options: SubscriptionOptions()))
        _ = try await reader.read { $0.states.count >= 1 }

        try gpsd.start()
        let part1 = try await reader.read { $0.fixes.count >= first.fixes.count }
        Self.expectSame(part1.fixes, first.fixes)

        gpsd.kill()
        let lost = try await reader.read { $0.states.contains(.disconnected) }
        #expect(lost.fixes.isEmpty)

        gpsd.serve(bytes: second.bytes, endOfReplay: true)
        let restartedAt = ContinuousClock.now
        try gpsd.start()
        let part2 = try await reader.read { $0.fixes.count >= second.fixes.count }
        #expect(part2.states.prefix(2) == [.connected, .fix])
        Self.expectSame(part2.fixes, second.fixes)
        // Reconnection within 2 s of gpsd being back (backoff capped at 1 s; docs/gpsd.md).
        #expect(ContinuousClock.now - restartedAt < reconnectBound + .seconds(second.fixes.count) / 100)
        #expect(daemon.isRunning)
    }

    @Test func sigtermShutsDownCleanlyAndRemovesTheSocket() async throws {
        let gpsd = try GPSDHarness(startGPSD: false)
        defer { gpsd.shutdown() }
        let daemon = try DaemonProcess(arguments: ["--gpsd", "\(gpsd.host):\(gpsd.portString)"])
        defer { daemon.stop() }
        let client = try await daemon.connect()
        var reader = MessageReader(client)
        daemon.signal(SIGTERM)
        // The subscriber sees its connection end, and the daemon exits 0 and removes its socket.
        #expect(try await reader.readToEnd(timeout: 10).end == .closed)
        #expect(daemon.waitForExit() == 0)
        #expect(!FileManager.default.fileExists(atPath: daemon.socketPath))
    }
}

@Suite(.serialized, .timeLimit(.minutes(5)))
struct ReplayDaemonTests {
    /// `locationd --replay` and `locationctl replay` run the same parser and engine: a subscriber
    /// of the daemon receives exactly the locations the in-process replay computes.
    @Test func daemonReplayMatchesInProcessEngine() async throws {
        let log = DaemonEndToEndTests.walk(count: 300, startSecond: 0)
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("replay-\(UUID().uuidString.prefix(8)).nmea")
        try Data(log.bytes).write(to: dir)
        defer { try? FileManager.default.removeItem(at: dir) }
        let options = SubscriptionOptions(distanceFilter: 25, desiredAccuracy: 20, minimumInterval: 2)

        var engine = Engine()
        var expected: [Delivery] = []
        engine.handle(.subscribe(SubscriberID(1), options), into: &expected)
        try NMEAReplay.inputs(fromFile: dir.path) { engine.handle($0, into: &expected) }
        let expectedFixes = expected.compactMap { if case .location(let f) = $0.event { f } else { nil } }
        #expect(expectedFixes.count > 10 && expectedFixes.count < 300)

        // The replay waits for the first subscriber, so it sees the log from its first fix.
        let daemon = try DaemonProcess(arguments: ["--replay", dir.path, "--speed", "0"])
        defer { daemon.stop() }
        let client = try await daemon.connect()
        defer { client.close() }
        var reader = MessageReader(client)
        try await client.startSession(.always)
        try client.send(.subscribe(id: .number(1), options: options))
        let messages = try await reader.read { $0.states.filter { $0 == .disconnected }.count >= 2 }
        #expect(messages.fixes.map(\.time) == expectedFixes.map(\.time))
        #expect(zip(messages.fixes, expectedFixes).allSatisfy {
            abs($0.coordinate.latitude - $1.coordinate.latitude) < 1e-8 && abs($0.coordinate.longitude - $1.coordinate.longitude) < 1e-8
        })
    }
}

/// Visits and significant changes through the real daemon: a subscriber asking for them over
/// the socket receives exactly what `locationctl replay --events visits,significant` prints.
@Suite(.serialized, .timeLimit(.minutes(5)))
struct VisitDaemonTests {
    @Test func daemonSendsTheVisitAndSignificantEventsThatReplayPrints() async throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let scenario = try Scenario.parse(String(contentsOf: root.appendingPathComponent("Scenarios/demo.json"), encoding: .utf8))
        let output = Simulator(scenario).run()
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("visits-\(UUID().uuidString.prefix(8)).nmea")
        try Data(output.nmea).write(to: path)
        defer { try? FileManager.default.removeItem(at: path) }

        let replay = try LocationCtlReplayTests.run(["replay", path.path, "--events", "visits,significant"])
        #expect(replay.status == 0, "\(replay.err)")
        let expected = replay.out.split(separator: "\n").map(String.init)
        // Three stays: three arrivals, two departures; significant changes after the drive.
        #expect(expected.filter { $0.contains("\"event\":\"arrival\"") }.count == output.truth.count)
        #expect(expected.filter { $0.contains("\"event\":\"departure\"") }.count == output.truth.count - 1)
        #expect(expected.contains { $0.hasPrefix("{\"type\":\"significant\"") })

        let daemon = try DaemonProcess(arguments: ["--replay", path.path, "--speed", "0"])
        defer { daemon.stop() }
        let client = try await daemon.connect()
        defer { client.close() }
        var reader = MessageReader(client)
        var options = SubscriptionOptions()
        options.events = [.visits, .significant]
        try await client.startSession(.always)
        try client.send(.subscribe(id: .number(1), options: options))
        let messages = try await reader.read(timeout: 60) { $0.states.filter { $0 == .disconnected }.count >= 2 }
        #expect(messages.fixes.isEmpty, "no location events were asked for")
        let received = messages.compactMap { m -> String? in
            switch m {
            case .visit, .significant: String(m.line.dropLast())
            default: nil
            }
        }
        #expect(received == expected)
        // The subscription was acknowledged with the kinds asked for.
        #expect(messages.contains { if case .subscribed(_, let o) = $0 { o.events == [.visits, .significant] } else { false } })
    }
}
