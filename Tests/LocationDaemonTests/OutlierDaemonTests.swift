import Foundation
import LocationClient
import LocationCore
import LocationProtocol
import Simulation
import Testing

/// The outlier gate and pause when stationary through the real daemon: a subscriber on the
/// socket receives exactly the locations and pause events `locationctl replay` prints for the
/// bundled `spikes` scenario (docs/semantics.md, "Outliers", "Pause when stationary").
@Suite(.serialized, .timeLimit(.minutes(5)))
struct OutlierDaemonTests {
    static func spikesLog() throws -> (path: URL, output: Simulator.Output) {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let scenario = try Scenario.parse(String(contentsOf: root.appendingPathComponent("Scenarios/spikes.json"), encoding: .utf8))
        let output = Simulator(scenario).run()
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("spikes-\(UUID().uuidString.prefix(8)).nmea")
        try Data(output.nmea).write(to: path)
        return (path, output)
    }

    /// The daemon's lines for a subscription with `options`: locations and pause events.
    static func daemonLines(_ log: URL, _ options: SubscriptionOptions) async throws -> [String] {
        // Paced (50 minutes in 10 s) so that the subscriber reads every location: a reader
        // that falls behind is sent the newest only (docs/protocol.md, "Slow readers").
        let daemon = try DaemonProcess(arguments: ["--replay", log.path, "--speed", "300"])
        defer { daemon.stop() }
        let client = try await daemon.connect()
        defer { client.close() }
        var reader = MessageReader(client)
        try await client.startSession(.whenInUse)
        try client.send(.subscribe(id: .number(1), options: options))
        let messages = try await reader.read(timeout: 90) { $0.states.filter { $0 == .disconnected }.count >= 2 }
        #expect(messages.contains { if case .subscribed(_, let o) = $0 { o.raw == options.raw && o.pausesWhenStationary == options.pausesWhenStationary } else { false } })
        return messages.compactMap { m -> String? in
            switch m {
            case .location, .paused, .resumed: String(m.line.dropLast())
            default: nil
            }
        }
    }

    @Test func daemonSendsTheLocationsAndPauseEventsThatReplayPrints() async throws {
        let (log, output) = try Self.spikesLog()
        defer { try? FileManager.default.removeItem(at: log) }
        let replay = try LocationCtlReplayTests.run(["replay", log.path, "--events", "location", "--distance-filter", "10",
                                                     "--pauses-when-stationary", "--activity-type", "other"])
        #expect(replay.status == 0, "\(replay.err)")
        let expected = replay.out.split(separator: "\n").map(String.init)
        // Three stays long enough to pause, each resumed when the trip goes on.
        #expect(expected.filter { $0.hasPrefix("{\"type\":\"paused\"") }.count >= 3)
        #expect(expected.filter { $0.hasPrefix("{\"type\":\"resumed\"") }.count >= 3)
        // No spike's fix is among the locations.
        let spikeTimes = Set(output.outliers.map { ISO8601.string($0) })
        #expect(!expected.contains { line in spikeTimes.contains { line.contains("\"time\":\"\($0)\"") && line.hasPrefix("{\"type\":\"location\"") } })

        var options = SubscriptionOptions(distanceFilter: 10)
        options.pausesWhenStationary = true
        #expect(try await Self.daemonLines(log, options) == expected)
    }

    @Test func aRawSubscriberGetsTheSpikesThatReplayRawPrints() async throws {
        let (log, output) = try Self.spikesLog()
        defer { try? FileManager.default.removeItem(at: log) }
        let replay = try LocationCtlReplayTests.run(["replay", log.path, "--events", "location", "--raw", "--minimum-interval", "1"])
        #expect(replay.status == 0, "\(replay.err)")
        let expected = replay.out.split(separator: "\n").map(String.init)
        let first = try #require(output.outliers.first)
        #expect(expected.contains { $0.contains("\"time\":\"\(ISO8601.string(first))\"") })

        var options = SubscriptionOptions(minimumInterval: 1)
        options.raw = true
        #expect(try await Self.daemonLines(log, options) == expected)
    }

    /// `locationctl watch --pauses-when-stationary` asks for it and prints the pause events.
    @Test func watchPausesWhenStationary() async throws {
        let scenario = try Scenario.parse(#"""
            {"start": "2026-06-01T07:00:00Z", "origin": {"latitude": 48.775846, "longitude": 9.182932},
             "legs": [{"stay": 200}, {"walk": {"north": 300}}, {"stay": 200}]}
            """#)
        let output = Simulator(scenario).run()
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("pause-\(UUID().uuidString.prefix(8)).nmea")
        try Data(output.nmea).write(to: log)
        defer { try? FileManager.default.removeItem(at: log) }
        let daemon = try DaemonProcess(arguments: ["--replay", log.path, "--speed", "0"])
        defer { daemon.stop() }
        let watch = try LocationCtlReplayTests.run(["watch", "--socket", daemon.socketPath, "--wait", "10", "--json",
                                                    "--pauses-when-stationary", "--activity-type", "fitness"])
        // The replay's end closes the connection: watch's failure, with what it printed.
        #expect(watch.status == 1 && watch.err.contains("locationd closed the connection"), "\(watch.err)")
        let lines = watch.out.split(separator: "\n").map(String.init)
        #expect(lines.contains { $0.hasPrefix("{\"type\":\"subscribed\"") && $0.contains("\"pausesWhenStationary\":true,\"activityType\":\"fitness\"") })
        // Paused 180 s into each stay; resumed by the walk.
        #expect(lines.filter { $0.hasPrefix("{\"type\":\"paused\"") } == [
            #"{"type":"paused","time":"2026-06-01T07:03:00Z"}"#, #"{"type":"paused","time":"2026-06-01T07:09:54Z"}"#])
        #expect(lines.filter { $0.hasPrefix("{\"type\":\"resumed\"") }.count == 1)
    }
}
