import Foundation
import LocationClient
import LocationCore
import LocationProtocol
import NMEA
import Testing

/// Registrations and states survive `kill -9`: the real daemon, its SQLite file, restarted.
@Suite(.serialized, .timeLimit(.minutes(5))) struct RegionPersistenceTests {
    static let center = Coordinate(latitude: 48.137_154, longitude: 11.576_124)

    /// An NMEA log of 1 Hz fixes at `northMetres[i]` from the centre.
    static func log(_ northMetres: [Double], startSecond: Int) -> [UInt8] {
        let writer = NMEAWriter()
        let t0 = CivilTime(year: 2026, month: 3, day: 14, hour: 9).timestamp
        var text = ""
        for (i, n) in northMetres.enumerated() {
            var q = NMEAWriter.Quality()
            q.sigmaLatitude = 2.5; q.sigmaLongitude = 3.5; q.sigmaAltitude = 4
            let c = Coordinate(latitude: center.latitude + n / 111_195.0, longitude: center.longitude)
            text += writer.epoch(Fix(time: t0.adding(seconds: Double(startSecond + i)), coordinate: c, mode: .threeD,
                                     altitudeMSL: 519.5, speed: 0, course: 0), quality: q)
        }
        return Array(text.utf8)
    }

    static func regionEvents(_ messages: [ServerMessage]) -> [RegionEvent] {
        messages.compactMap { if case .region(let e) = $0 { e } else { nil } }
    }

    @Test func registrationsAndStatesSurviveKill9WithoutDuplicateOrLostTransitions() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("regions-persist-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let database = dir.appendingPathComponent("state/locationd.db").path  // the directory is created
        // Log 1: 5 fixes 400 m south, then inside for 5 minutes (replayed at 10×: killed long before its end).
        let log1 = dir.appendingPathComponent("one.nmea"), log2 = dir.appendingPathComponent("two.nmea")
        try Data(Self.log(Array(repeating: -400, count: 5) + Array(repeating: 0, count: 300), startSecond: 0)).write(to: log1)
        // Log 2 (after the restart): still inside for 10 s, then 400 m north.
        try Data(Self.log(Array(repeating: 0, count: 10) + Array(repeating: 400, count: 20), startSecond: 1000)).write(to: log2)

        let first = try DaemonProcess(arguments: ["--replay", log1.path, "--speed", "10"], database: database)
        let client = try await first.connect()
        try await client.startSession(.always)
        _ = try await client.request { .regionsAdd(id: $0, regions: [
            Region(id: "A", center: Self.center, radius: 100),
            Region(id: "B", center: Coordinate(latitude: Self.center.latitude + 0.05, longitude: Self.center.longitude),
                   radius: 200, notifyInitialState: true, metadata: #"{"name":"far"}"#)]) }
        var reader = MessageReader(client)
        try client.send(.subscribe(id: .number(9), options: SubscriptionOptions(desiredAccuracy: 1)))
        let before = try await reader.read { Self.regionEvents($0).count >= 2 }
        #expect(Self.regionEvents(before).map { "\($0.kind.rawValue) \($0.region)" } == ["outside B", "enter A"])
        first.signal(SIGKILL)
        _ = first.waitForExit()
        client.close()

        let second = try DaemonProcess(arguments: ["--replay", log2.path, "--speed", "0"], database: database)
        defer { second.stop() }
        let again = try await second.connect()
        defer { again.close() }
        try await again.startSession(.always)
        guard case .regions(_, let listed, _) = try await again.request({ .regionsList(id: $0) }) else { Issue.record("no list"); return }
        #expect(listed.map(\.region.id) == ["A", "B"])
        #expect(listed.map(\.state) == [.inside, .outside])
        #expect(listed[1].region.metadata == #"{"name":"far"}"#)
        var reader2 = MessageReader(again)
        try again.send(.subscribe(id: .number(10), options: SubscriptionOptions(desiredAccuracy: 1)))
        let after = try await reader2.read { $0.states.filter { $0 == .disconnected }.count >= 2 }
        // No second enter A, no second initial state of B: only the real exit, back-dated to its first fix.
        let events = Self.regionEvents(after)
        #expect(events.map { "\($0.kind.rawValue) \($0.region)" } == ["exit A"])
        #expect(events.first?.time == CivilTime(year: 2026, month: 3, day: 14, hour: 9).timestamp.adding(seconds: 1010))
        first.stop()
    }
}

/// The `[regions]` limits of the config file reach the daemon's region monitor.
@Suite(.timeLimit(.minutes(5))) struct RegionConfigTests {
    @Test func maxRegisteredFromTheConfigFileIsEnforced() async throws {
        let config = FileManager.default.temporaryDirectory.appendingPathComponent("regions-\(UUID().uuidString.prefix(8)).toml")
        try "[regions]\nmax_registered = 2\n".write(to: config, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: config) }
        let daemon = try DaemonProcess(arguments: ["--config", config.path, "--gpsd", "127.0.0.1:1"], database: "none")
        defer { daemon.stop() }
        let client = try await daemon.connect()
        defer { client.close() }
        try await client.startSession(.always)
        let c = Coordinate(latitude: 48.1, longitude: 11.5)
        let two = [Region(id: "a", center: c, radius: 100), Region(id: "b", center: c, radius: 200)]
        let ok = try await client.request { .regionsAdd(id: $0, regions: two) }
        guard case .regionsChanged(_, 2, 0, 2) = ok else { Issue.record("expected 2 added, got \(ok)"); return }
        do {
            _ = try await client.request { .regionsAdd(id: $0, regions: [Region(id: "c", center: c, radius: 300)]) }
            Issue.record("a third region was accepted past max_registered = 2")
        } catch let error as ProtocolError {
            #expect(error.code.rawValue == "tooManyRegions")
            // The setting and the fix, not only the numbers.
            #expect(error.message == "2 registered + 1 new is more than the limit of 2 regions per program ([regions] max_registered in locationd.toml): remove some first (regions.remove), or raise max_registered", "\(error.message)")
        }
    }

    /// A limit lowered below what programs registered keeps their regions (it stops new ones
    /// until the program is below it): a restart does not delete them, and neither does the
    /// program's next change (which rewrites all of its rows).
    @Test func loweringMaxRegisteredKeepsWhatWasRegistered() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("regions-limit-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let database = dir.appendingPathComponent("locationd.db").path
        let config = dir.appendingPathComponent("locationd.toml")
        try "[regions]\nmax_registered = 2\n".write(to: config, atomically: true, encoding: .utf8)
        let c = Coordinate(latitude: 48.1, longitude: 11.5)
        do {
            let daemon = try DaemonProcess(arguments: ["--gpsd", "127.0.0.1:1"], database: database)
            defer { daemon.stop() }
            let client = try await daemon.connect()
            defer { client.close() }
            try await client.startSession(.always)
            let three = ["a", "b", "c"].map { Region(id: $0, center: c, radius: 100) }
            _ = try await client.request { .regionsAdd(id: $0, regions: three) }
        }
        let daemon = try DaemonProcess(arguments: ["--config", config.path, "--gpsd", "127.0.0.1:1"], database: database)
        defer { daemon.stop() }
        let client = try await daemon.connect()
        defer { client.close() }
        try await client.startSession(.always)
        func listed() async throws -> [String] {
            guard case .regions(_, let records, _) = try await client.request({ .regionsList(id: $0) }) else { return [] }
            return records.map(\.region.id)
        }
        #expect(try await listed() == ["a", "b", "c"])
        for expected in ["tooManyRegions", "tooManyRegions"] {
            do {
                _ = try await client.request { .regionsAdd(id: $0, regions: [Region(id: "d", center: c, radius: 100)]) }
                Issue.record("a region was accepted past max_registered = 2")
            } catch let error as ProtocolError {
                #expect(error.code.rawValue == expected)
            }
            // Removing one leaves 2: still no room for another.
            if try await listed().count == 3 { _ = try await client.request { .regionsRemove(id: $0, ids: ["a"]) } }
        }
        #expect(try await listed() == ["b", "c"])
        _ = try await client.request { .regionsRemove(id: $0, ids: ["b"]) }
        _ = try await client.request { .regionsAdd(id: $0, regions: [Region(id: "d", center: c, radius: 100)]) }
        #expect(try await listed() == ["c", "d"])
    }
}

/// A program whose remembered regions cannot be loaded (a stored region this version rejects)
/// keeps its rows: its changes are refused, since each rewrites all of its rows.
@Suite(.timeLimit(.minutes(5))) struct UnrestoredRegionsTests {
    @Test func changesOfAProgramWhoseRegionsDidNotLoadAreRefused() async throws {
        let harness = try await ServerHarness.start()
        defer { harness.stopIfRunning() }
        let hub = harness.hub
        let c = Coordinate(latitude: 48.1, longitude: 11.5)
        let program = ProgramID("uid=1000 exe=/usr/bin/tracker"), other = ProgramID("uid=1000 exe=/usr/bin/other")
        let outcome = try await hub.eventLoop.submit { () -> [String] in
            var out: [String] = []
            let bad = RegionRecord(region: Region(id: "a", center: c, radius: 1), state: .unknown)  // radius out of range
            do throws(RegionError) { try hub.restoreRegions([bad], for: program) } catch { out.append("restore \(error.code.rawValue)") }
            do throws(RegionError) { _ = try hub.addRegions([Region(id: "b", center: c, radius: 100)], for: program) } catch {
                out.append("\(error.code.rawValue): \(error.message)")
            }
            do throws(RegionError) { _ = try hub.removeRegions(nil, for: program) } catch { out.append("\(error.code.rawValue): \(error.message)") }
            do throws(RegionError) { try hub.checkRestored(program) } catch { out.append("\(error.code.rawValue): \(error.message)") }
            // Another program is not affected.
            do { out.append("other \(try hub.addRegions([Region(id: "b", center: c, radius: 100)], for: other))") } catch { out.append("other \(error)") }
            return out
        }.get()
        await harness.stop()
        #expect(outcome.count == 5)
        #expect(outcome[0] == "restore invalidRegion")
        for refusal in outcome[1...3] {  // add, remove, and what list and state check
            #expect(refusal.hasPrefix("notStored: this program's remembered regions could not be loaded at start (region a: radius 1 is out of range"))
            // The fix (the database's rows, a restart) is the administrator's: logged at start.
            #expect(refusal.hasSuffix("cannot be listed or changed until the daemon's administrator mends them (the daemon's log says how)"), "\(refusal)")
        }
        #expect(outcome[4] == "other 1")
    }
}
