import Foundation
import LocationClient
import LocationCore
import LocationProtocol
import Simulation
import Testing

/// `--as-gpsd` on every command that decodes a log — `locationd --replay`, `locationctl map` and
/// `evaluate` — decodes it as `locationctl replay --as-gpsd` does: the real executables over the
/// README demo moved to 2015 (before gpsd 3.20–3.22's rollover cut-off), whose GST gives 7 m
/// where the DOPs give 15 m.
@Suite(.serialized, .timeLimit(.minutes(5)))
struct AsGPSDCommandTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let weeks1024 = Int64(619_315_200) * 1_000_000_000

    /// The demo scenario starting on 2015-06-01, its log and its truth written in `dir`.
    static func demo2015(in dir: URL) throws -> (scenario: URL, log: URL, truth: URL, output: Simulator.Output) {
        let text = try String(contentsOf: root.appendingPathComponent("Scenarios/demo.json"), encoding: .utf8)
        let start = try #require(text.range(of: #""start": "[^"]*""#, options: .regularExpression))
        let moved = text.replacingCharacters(in: start, with: #""start": "2015-06-01T08:00:00Z""#)
        let scenario = dir.appendingPathComponent("demo2015.json"), log = dir.appendingPathComponent("demo2015.nmea")
        let truth = dir.appendingPathComponent("demo2015.truth")
        try moved.write(to: scenario, atomically: true, encoding: .utf8)
        let output = Simulator(try Scenario.parse(moved)).run()
        #expect(CivilTime(output.end).year == 2015)
        try Data(output.nmea).write(to: log)
        try output.truth.map(\.line).joined().write(to: truth, atomically: true, encoding: .utf8)
        return (scenario, log, truth, output)
    }

    static func directory() throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("asgpsd-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir
    }

    /// The lines `locationctl replay` prints for these events, with `extra` flags.
    static func replayLines(_ log: URL, events: String, _ extra: [String] = []) throws -> [String] {
        let r = try LocationCtlReplayTests.run(["replay", log.path, "--events", events] + extra)
        #expect(r.status == 0, "\(r.err)")
        return r.out.split(separator: "\n").map(String.init)
    }

    /// The daemon started with `--replay LOG --as-gpsd` sends a subscriber exactly the locations,
    /// visits and significant changes `locationctl replay --as-gpsd` prints: gpsd's dates and
    /// accuracies, not the log's own.
    @Test func daemonReplaySendsWhatReplayAsGPSDPrints() async throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let demo = try Self.demo2015(in: dir)
        let expected = try Self.replayLines(demo.log, events: "location,visits,significant", ["--as-gpsd"])
        #expect(expected.contains { $0.hasPrefix("{\"type\":\"visit\"") })
        // Every fix differs from the log's own decoding: its date and its accuracy.
        func raw(_ extra: [String]) throws -> [Fix] {
            try Self.replayLines(demo.log, events: "location", ["--raw"] + extra).map { try ServerMessage.decode($0) }.fixes
        }
        let rawAsGPSD = try raw(["--as-gpsd"]), rawOwn = try raw([])
        #expect(rawAsGPSD.count == rawOwn.count && rawOwn.count > 1000)
        #expect(rawAsGPSD.map(\.time.nanoseconds) == rawOwn.map { $0.time.nanoseconds + Self.weeks1024 })
        #expect(zip(rawAsGPSD, rawOwn).allSatisfy { ($0.horizontalAccuracy ?? 0) > ($1.horizontalAccuracy ?? 0) }, "the DOPs' accuracy, not the GST's")
        let expectedFixes = try expected.map { try ServerMessage.decode($0) }.fixes
        #expect(expectedFixes.count > 100 && expectedFixes.allSatisfy { Set(rawAsGPSD.map(\.time)).contains($0.time) })

        let daemon = try DaemonProcess(arguments: ["--replay", demo.log.path, "--as-gpsd", "--speed", "0"])
        defer { daemon.stop() }
        let client = try await daemon.connect()
        defer { client.close() }
        var reader = MessageReader(client)
        var options = SubscriptionOptions()
        options.events = [.location, .visits, .significant]
        try await client.startSession(.always)
        try client.send(.subscribe(id: .number(1), options: options))
        let messages = try await reader.read(timeout: 60) { $0.states.filter { $0 == .disconnected }.count >= 2 }
        let received = messages.compactMap { m -> String? in
            switch m {
            case .location, .visit, .significant: String(m.line.dropLast())
            default: nil
            }
        }
        #expect(received.count == expected.count)
        let difference = zip(received, expected).first { $0 != $1 }
        #expect(difference == nil, "first difference: the daemon sent \(difference?.0 ?? ""), replay printed \(difference?.1 ?? "")")
    }

    /// Each command's help names the flag.
    @Test func helpNamesAsGPSD() throws {
        let daemon = try runToExit(DaemonProcess.executable, ["--help"])
        #expect(daemon.status == 0 && daemon.out.contains("[--as-gpsd]") && daemon.out.contains("\n  --as-gpsd  "), "\(daemon.out)")
        for command in ["replay", "map", "evaluate"] {
            let help = try LocationCtlReplayTests.run([command, "--help"])
            #expect(help.status == 0 && help.out.contains("--as-gpsd") && help.out.contains("3.20–3.22"), "\(command): \(help.out)")
        }
    }

    /// `map --as-gpsd` draws the fixes and visits `replay --as-gpsd` prints: the DOPs' accuracy
    /// ("fair", 15 m) where the GST's is "good" (7 m), and the visits at gpsd's dates. `--live`
    /// refuses it: the daemon's own decoding is what it draws.
    @Test func mapAsGPSDDrawsWhatReplayAsGPSDPrints() throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let demo = try Self.demo2015(in: dir)
        func map(_ extra: [String]) throws -> [String: Any] {
            let page = dir.appendingPathComponent("map.html")
            let r = try LocationCtlReplayTests.run(["map", demo.log.path, "-o", page.path] + extra)
            #expect(r.status == 0 && r.err.isEmpty, "\(r.err)")
            return try MapTests.data(of: String(contentsOf: page, encoding: .utf8))
        }
        func colours(_ data: [String: Any]) throws -> Set<String> {
            Set(try #require(data["track"] as? [[String: Any]]).compactMap { $0["accuracy"] as? String })
        }
        func labels(_ data: [String: Any]) throws -> [String] {
            try #require(data["visits"] as? [[String: Any]]).compactMap { $0["label"] as? String }
        }
        let asGPSD = try map(["--as-gpsd"]), own = try map([])
        let ownColours = try colours(own), asGPSDColours = try colours(asGPSD)
        #expect(ownColours == ["good"] && asGPSDColours == ["fair"], "\(ownColours) \(asGPSDColours)")

        // The map's clock: `2035-01-15 08:30 UTC`.
        func clock(_ t: Timestamp) -> String {
            let c = CivilTime(t)
            return String(format: "%04d-%02d-%02d %02d:%02d UTC", c.year, c.month, c.day, c.hour, c.minute)
        }
        let arrivals = try Self.replayLines(demo.log, events: "visits", ["--as-gpsd"]).map { try ServerMessage.decode($0) }
            .compactMap { m -> Timestamp? in if case .visit(let v) = m, v.kind == .arrival { v.arrival } else { nil } }
        #expect(arrivals.count == demo.output.truth.count)
        let mapped = try labels(asGPSD)
        #expect(mapped.count == arrivals.count)
        for a in arrivals {
            #expect(mapped.contains { $0.contains("arrived \(clock(a))") }, "\(clock(a)) not in \(mapped)")
        }
        let ownLabels = try labels(own)
        #expect(ownLabels.allSatisfy { $0.contains("arrived 2015-") } && mapped.allSatisfy { $0.contains("arrived 2035-") }, "\(ownLabels) \(mapped)")

        let live = try LocationCtlReplayTests.run(["map", "--live", "--as-gpsd", "-o", dir.appendingPathComponent("live.html").path])
        #expect(live.status == 64)
        #expect(live.err.hasPrefix("Error: --regions, --date and --as-gpsd are for a log; --live draws the daemon's regions\n"), "\(live.err)")
    }

    /// `evaluate --as-gpsd` scores the visits detected in gpsd's decoding against the truth moved
    /// to gpsd's dates with them, for a scenario, a `--log` with its `--truth`, and a `--dataset`:
    /// all three true visits matched; the scenario's outliers are found at their moved times.
    @Test func evaluateAsGPSDMovesTheTruthWithTheLog() throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let demo = try Self.demo2015(in: dir)
        #expect(!demo.output.outliers.isEmpty)
        let matched = "true visits 3, detected 3, matched 3\n"

        let scenario = try LocationCtlReplayTests.run(["evaluate", demo.scenario.path, "--as-gpsd"])
        #expect(scenario.status == 0, "\(scenario.err)")
        #expect(scenario.out.hasPrefix(matched), "\(scenario.out)")
        // As many outlier fixes as in the log's own decoding: found at their moved times.
        func outlierCount(_ out: String) -> Substring? {
            out.split(separator: "\n").first { $0.hasPrefix("outlier fixes delivered") }?.split(separator: " ").dropLast(2).last
        }
        let own = try LocationCtlReplayTests.run(["evaluate", demo.scenario.path])
        #expect(outlierCount(scenario.out) != nil && outlierCount(scenario.out) != "0" && outlierCount(scenario.out) == outlierCount(own.out),
                "\(scenario.out)\n\(own.out)")

        let logged = try LocationCtlReplayTests.run(["evaluate", "--log", demo.log.path, "--truth", demo.truth.path, "--as-gpsd", "--verbose"])
        #expect(logged.status == 0, "\(logged.err)")
        #expect(logged.out.contains(matched), "\(logged.out)")
        let lines = logged.out.split(separator: "\n")
        let truthLines = lines.filter { $0.hasPrefix("true      ") }
        #expect(truthLines.count == 3 && truthLines.allSatisfy { $0.hasPrefix("true      2035-") }, "\(truthLines)")
        let first = try #require(demo.output.truth.first)
        #expect(truthLines.first?.hasPrefix("true      \(ISO8601.string(Timestamp(nanoseconds: first.arrival.nanoseconds + Self.weeks1024)))") == true)
        #expect(lines.filter { $0.hasPrefix("detected  2035-") }.count == 3, "\(logged.out)")

        let logs = dir.appendingPathComponent("logs"), labels = dir.appendingPathComponent("set/labels")
        try FileManager.default.createDirectory(at: logs, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: labels, withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: demo.log, to: logs.appendingPathComponent("demo2015.nmea"))
        try FileManager.default.copyItem(at: demo.truth, to: labels.appendingPathComponent("demo2015.truth"))
        try "demo2015\n".write(to: dir.appendingPathComponent("set/all.list"), atomically: true, encoding: .utf8)
        let dataset = try LocationCtlReplayTests.run(["evaluate", "--dataset", dir.appendingPathComponent("set/all.list").path,
                                                      "--logs", logs.path, "--as-gpsd"])
        #expect(dataset.status == 0, "\(dataset.err)")
        #expect(dataset.out.hasPrefix("1 tracks\n" + matched), "\(dataset.out)")
    }
}
