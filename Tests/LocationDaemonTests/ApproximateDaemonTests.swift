import Foundation
import LocationClient
import LocationCore
import LocationProtocol
import Simulation
import Testing

/// An approximate program through the real daemon: it receives exactly what
/// `locationctl replay --accuracy approximate` prints (same engine, same privacy stage), every
/// coordinate is a cell centre, and region monitoring is refused.
@Suite(.serialized, .timeLimit(.minutes(5)))
struct ApproximateDaemonTests {
    @Test func approximateProgramGetsCellsOnlyAndNoRegions() async throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let scenario = try Scenario.parse(String(contentsOf: root.appendingPathComponent("Scenarios/demo.json"), encoding: .utf8))
        let output = Simulator(scenario).run()
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("approx-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let log = dir.appendingPathComponent("demo.nmea")
        try Data(output.nmea).write(to: log)
        let config = dir.appendingPathComponent("locationd.toml")
        try "[policy.me]\nuser = \(getuid())\nauthorization = \"always\"\naccuracy = \"approximate\"\n".write(to: config, atomically: true, encoding: .utf8)

        let replay = try LocationCtlReplayTests.run(["replay", log.path, "--events", "location,visits,significant",
                                                     "--accuracy", "approximate", "--privacy-seed", "42"])
        #expect(replay.status == 0, "\(replay.err)")
        let expected = replay.out.split(separator: "\n").map(String.init)
        #expect(expected.contains { $0.hasPrefix("{\"type\":\"visit\"") })
        #expect(expected.contains { $0.hasPrefix("{\"type\":\"location\"") })

        let daemon = try DaemonProcess(arguments: ["--config", config.path, "--replay", log.path, "--speed", "0", "--privacy-seed", "42"])
        defer { daemon.stop() }
        let client = try await daemon.connect()
        defer { client.close() }
        let grant = try await client.startSession(.always)
        #expect(grant.accuracy == .approximate && grant.authorization == .always)
        do { _ = try await client.request { .regionsAdd(id: $0, regions: []) }; Issue.record("regions accepted") } catch let e as ProtocolError {
            #expect(e.code == .fullAccuracyDenied)
        }
        var reader = MessageReader(client)
        var options = SubscriptionOptions()
        options.events = [.location, .visits, .significant]
        options.desiredAccuracy = 10  // an approximate subscription's filter ignores it
        try client.send(.subscribe(id: .number(1), options: options))
        let messages = try await reader.read(timeout: 60) { $0.states.filter { $0 == .disconnected }.count >= 2 }
        // `subscribed` echoes the options in effect, not the ones asked for.
        let echoed = messages.compactMap { if case .subscribed(_, let o) = $0 { o } else { nil } }.first
        #expect(echoed?.desiredAccuracy == nil && echoed?.minimumInterval == SubscriptionOptions.approximateInterval
                && echoed?.accuracy == .approximate, "\(String(describing: echoed))")
        let received = messages.compactMap { m -> String? in
            switch m {
            case .location, .visit, .significant: String(m.line.dropLast())
            default: nil
            }
        }
        #expect(received == expected)
        let grid = PrivacyGrid(secret: 42)
        func isCentre(_ c: Coordinate) -> Bool { Geodesy.distance(c, grid.centre(of: grid.cell(of: c).cell)) < 0.5 }
        for m in messages {
            switch m {
            case .location(let f, _):
                #expect(isCentre(f.coordinate) && f.speed == nil && f.course == nil && f.altitudeMSL == nil)
            case .visit(let v):
                #expect(isCentre(v.coordinate) && v.arrival.nanoseconds % 900_000_000_000 == 0)
            case .significant(let f):
                #expect(isCentre(f.coordinate) && f.time.nanoseconds % 900_000_000_000 == 0)
            default: break
            }
        }
    }
}
