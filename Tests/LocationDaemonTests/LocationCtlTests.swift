import Foundation
import LocationCore
import LocationProtocol
import NMEA
import Testing

/// `locationctl replay` as a user runs it: the real executable, its NDJSON output parsed back.
@Suite(.timeLimit(.minutes(5))) struct LocationCtlReplayTests {
    static var locationctl: URL { DaemonProcess.executable.deletingLastPathComponent().appendingPathComponent("locationctl") }

    /// Runs locationctl to its exit; one still running after `timeout` seconds (a `watch` whose
    /// events never come) is terminated, so the test fails instead of hanging. `environment`
    /// changes the inherited environment (nil: the variable is removed).
    static func run(_ arguments: [String], environment: [String: String?] = [:], timeout: Double = 60) throws
        -> (status: Int32, out: String, err: String) {
        let p = Process()
        p.executableURL = locationctl
        p.arguments = arguments
        if !environment.isEmpty {
            var env = ProcessInfo.processInfo.environment
            for (name, value) in environment { env[name] = value }
            p.environment = env
        }
        let out = Pipe(), err = Pipe()
        p.standardOutput = out
        p.standardError = err
        try p.run()
        let watchdog = Task { try await Task.sleep(for: .milliseconds(Int(timeout * 1000))); p.terminate() }
        defer { watchdog.cancel() }
        let o = out.fileHandleForReading.readDataToEndOfFile(), e = err.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return (p.terminationStatus, String(decoding: o, as: UTF8.self), String(decoding: e, as: UTF8.self))
    }

    @Test func replayPrintsWhatTheEngineDelivers() throws {
        let log = DaemonEndToEndTests.walk(count: 200, startSecond: 0)
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ctl-\(UUID().uuidString.prefix(8)).nmea")
        try Data(log.bytes).write(to: path)
        defer { try? FileManager.default.removeItem(at: path) }

        let result = try Self.run(["replay", path.path, "--distance-filter", "40"])
        #expect(result.status == 0, "\(result.err)")
        let messages = try result.out.split(separator: "\n").map { try ServerMessage.decode(String($0)) }
        // 1.3 m per epoch under a 40 m filter: every 31st fix (40.3 m) from the first.
        let expected = stride(from: 0, to: log.fixes.count, by: 31).map { log.fixes[$0].time }
        #expect(messages.fixes.map(\.time) == expected)
        #expect(messages.states == [.disconnected, .connected, .fix, .disconnected])

        let onlyLocations = try Self.run(["replay", path.path, "--distance-filter", "40", "--events", "location"])
        #expect(onlyLocations.out.split(separator: "\n").count == expected.count)
    }

    @Test func badOptionsAndMissingFilesAreClearErrors() throws {
        let bad = try Self.run(["replay", "/nonexistent.nmea", "--distance-filter=-5"])
        #expect(bad.status != 0)
        #expect(bad.err.contains("--distance-filter -5.0 is out of range"))
        let missing = try Self.run(["replay", "/nonexistent.nmea"])
        #expect(missing.status != 0)
        #expect(missing.err.contains("/nonexistent.nmea: cannot open NMEA log"))
    }
}

/// `locationctl replay --regions` runs the same engine path as the daemon and prints region events.
@Suite(.timeLimit(.minutes(5))) struct LocationCtlRegionReplayTests {
    @Test func replayWithRegionsPrintsRegionEventsIdenticallyCappedAndUnlimited() throws {
        let log = DaemonEndToEndTests.walk(count: 300, startSecond: 0)  // 1.3 m/s north, 390 m
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ctl-regions-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try Data(log.bytes).write(to: dir.appendingPathComponent("walk.nmea"))
        // 30 regions of 40 m along the walk (one every 12 m northwards): cap 3 must rotate.
        let start = log.fixes[0].coordinate
        var features: [String] = []
        for i in 0..<30 {
            let lat = start.latitude + (60 + 10 * Double(i)) / 111_195.0
            features.append(#"{"type":"Feature","geometry":{"type":"Point","coordinates":[\#(start.longitude),\#(lat)]},"properties":{"id":"r\#(i)","radius":15}}"#)
        }
        let geojson = #"{"type":"FeatureCollection","features":["# + features.joined(separator: ",") + "]}"
        try Data(geojson.utf8).write(to: dir.appendingPathComponent("regions.geojson"))

        let capped = try LocationCtlReplayTests.run(["replay", dir.appendingPathComponent("walk.nmea").path,
                                                     "--regions", dir.appendingPathComponent("regions.geojson").path, "--max-active", "3"])
        let unlimited = try LocationCtlReplayTests.run(["replay", dir.appendingPathComponent("walk.nmea").path,
                                                        "--regions", dir.appendingPathComponent("regions.geojson").path, "--max-active", "unlimited"])
        #expect(capped.status == 0, "\(capped.err)")
        #expect(capped.out == unlimited.out)
        let events = try capped.out.split(separator: "\n").map { try ServerMessage.decode(String($0)) }
        let kinds = events.compactMap { if case .region(let e) = $0 { e.kind } else { nil } }
        #expect(kinds.count == events.count)
        #expect(kinds.filter { $0 == .enter }.count >= 20, "\(capped.out)")

        let bad = try LocationCtlReplayTests.run(["replay", dir.appendingPathComponent("walk.nmea").path, "--regions", "/nonexistent.geojson"])
        #expect(bad.status != 0)
        #expect(bad.err.contains("/nonexistent.geojson: cannot open"))
    }
}
