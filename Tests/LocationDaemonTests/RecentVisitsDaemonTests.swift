import Foundation
import LocationClient
import LocationCore
@testable import LocationDaemon
import LocationProtocol
import Simulation
import Testing

/// Recent visits through the real daemon reading a real gpsd (docs/places.md, "Recent
/// visits"): kept from a program's precise visits in the SQLite store across restarts, bounded
/// by `[store] max_visits`, listed in pages, seen only by that program, none for an
/// approximate program.
@Suite(.serialized, .timeLimit(.minutes(5)),
       .enabled(if: GPSDHarness.isAvailable, "gpsd is not installed (apt-get install gpsd)"))
struct RecentVisitsDaemonTests {
    static func directory() throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("visits-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir
    }

    /// gpsd is fed the demo trip (three stays, the last not left) while this program holds an
    /// `always` session subscribed to visits; returns the visit events it was sent and its
    /// recent visits listed after them.
    static func trip(database: String, config: [String] = [],
                     until done: @escaping ([Visit]) -> Bool = { v in v.count(where: { $0.kind == .arrival }) == 3 && v.count(where: { $0.kind == .departure }) == 2 })
        async throws -> (sent: [Visit], listed: [Visit]) {
        let gpsd = try GPSDHarness()
        defer { gpsd.shutdown() }
        let daemon = try DaemonProcess(arguments: config + ["--gpsd", "\(gpsd.host):\(gpsd.portString)"], database: database)
        defer { daemon.stop() }
        let client = try await daemon.connect()
        defer { client.close() }
        var reader = MessageReader(client)
        try await client.startSession(.always)
        try client.send(.subscribe(id: .number(1), options: SubscriptionOptions(events: [.visits])))
        _ = try await reader.read { $0.contains { if case .subscribed = $0 { true } else { false } } }
        gpsd.serve(bytes: Simulator(try demo()).run().nmea)
        let messages = try await reader.read(timeout: 60) { seen in done(seen.compactMap { if case .visit(let v) = $0 { v } else { nil } }) }
        let sent = messages.compactMap { if case .visit(let v) = $0 { v } else { nil } }
        return (sent, try await client.recentVisits())
    }

    static func demo() throws -> Scenario {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        return try Scenario.parse(String(contentsOf: root.appendingPathComponent("Scenarios/demo.json"), encoding: .utf8))
    }

    /// This program's recent visits in a daemon on `database` with no fixes coming.
    static func listed(database: String, config: [String] = []) async throws -> [Visit] {
        let daemon = try DaemonProcess(arguments: config + ["--gpsd", "127.0.0.1:1"], database: database)
        defer { daemon.stop() }
        let client = try await daemon.connect()
        defer { client.close() }
        try await client.startSession(.whenInUse)
        return try await client.recentVisits()
    }

    static func config(_ text: String, in dir: URL) throws -> [String] {
        let file = dir.appendingPathComponent("locationd-\(UUID().uuidString.prefix(8)).toml")
        try text.write(to: file, atomically: true, encoding: .utf8)
        return ["--config", file.path]
    }

    @Test func visitsAreListedAsSentSurviveARestartAndAreTheProgramsOwn() async throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let database = dir.appendingPathComponent("locationd.db").path

        let trip = try await Self.trip(database: database)
        // Each visit once, as it was last sent: two stays left, the third still open.
        let expected = [trip.sent[1], trip.sent[3], trip.sent[4]]
        #expect(expected.map(\.kind) == [.departure, .departure, .arrival])
        #expect(trip.listed == expected)
        #expect(trip.listed.map(\.place) == [1, 2, 3])

        // After a restart, the same.
        #expect(try await Self.listed(database: database) == expected)

        // Another program (locationctl: another executable) has none of them; the owner's come
        // as one `visits` message and as GeoJSON Points.
        do {
            let daemon = try DaemonProcess(arguments: ["--gpsd", "127.0.0.1:1"], database: database)
            defer { daemon.stop() }
            _ = try await daemon.connect()
            let other = try LocationCtlReplayTests.run(["visits", "--socket", daemon.socketPath, "--json"])
            #expect(other.status == 0, "\(other.err)")
            #expect(other.out == "{\"type\":\"visits\",\"visits\":[]}\n")
            let empty = try LocationCtlReplayTests.run(["visits", "--socket", daemon.socketPath, "--geojson"])
            #expect(empty.status == 0 && empty.out == "{\"type\":\"FeatureCollection\",\"features\":[\n]}\n", "\(empty.err)")
        }

        // `[store] max_visits` lowered: the oldest completed visit goes, the open one stays.
        let bounded = try await Self.listed(database: database, config: try Self.config("[store]\nmax_visits = 1\n", in: dir))
        #expect(bounded == [expected[1], expected[2]])
    }

    /// The bound while visits come: with `max_visits = 1` only the last completed visit and
    /// the open one are kept.
    @Test func maxVisitsBoundsTheHistoryAsVisitsCome() async throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let trip = try await Self.trip(database: dir.appendingPathComponent("locationd.db").path,
                                       config: try Self.config("[store]\nmax_visits = 1\n", in: dir))
        #expect(trip.listed == [trip.sent[3], trip.sent[4]])
    }

    /// An approximate program is sent cells, not places: it has no recent visits, none are
    /// kept from its visits, and it does not see its precise past either. (The daemon replays
    /// the trip itself: from a live source an approximate program's events wait for the
    /// publication clock, docs/privacy.md.)
    @Test func anApproximateProgramHasNone() async throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let database = dir.appendingPathComponent("locationd.db").path
        let approximate = try Self.config("[policy.me]\nuser = \(getuid())\nauthorization = \"always\"\naccuracy = \"approximate\"\n", in: dir)
        let trip = try await PlacesDaemonTests.trip(try PlacesDaemonTests.demoLog(in: dir), database: database, config: approximate)
        #expect(!trip.visits.isEmpty && trip.visits.allSatisfy { $0 == nil })
        #expect(try await Self.listed(database: database, config: approximate).isEmpty)
        #expect(try await Self.listed(database: database).isEmpty)  // precise now: nothing was kept

        let precise = try await Self.trip(database: database)
        #expect(precise.listed.count == 3)
        #expect(try await Self.listed(database: database, config: approximate).isEmpty)
    }

    /// A thousand kept visits come back in pages that each fit a line, oldest first, and the
    /// client library follows them to the end.
    @Test func aThousandVisitsComeInPages() async throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let database = dir.appendingPathComponent("locationd.db").path
        let program = try await DaemonProcess.programOfThisProcess(database: database)

        let t0 = Timestamp(seconds: 1_777_000_000)
        var visits = (0..<1000).map { n in
            var v = Visit(kind: .departure, arrival: t0.adding(seconds: Double(n) * 3600), departure: t0.adding(seconds: Double(n) * 3600 + 600),
                          coordinate: Coordinate(latitude: 48 + Double(n) * 1e-3, longitude: 11.5), horizontalAccuracy: 12)
            v.place = UInt64(n % 7 + 1)
            return v
        }
        visits[999] = Visit(kind: .arrival, arrival: visits[999].arrival, departure: nil, coordinate: visits[999].coordinate, horizontalAccuracy: 12)
        try VisitStore(database: Database(path: database)).write(VisitHistory(limit: 1000, visits: visits), of: program)

        let config = try Self.config("[store]\nmax_visits = 1000\n", in: dir)
        let daemon = try DaemonProcess(arguments: config + ["--gpsd", "127.0.0.1:1"], database: database)
        defer { daemon.stop() }
        let client = try await daemon.connect()
        defer { client.close() }
        try await client.startSession(.whenInUse)
        let firstPage = try await client.request { .visits(id: $0, offset: 0) }
        guard case .visits(_, let page, let next) = firstPage else { Issue.record("not visits: \(firstPage.line)"); return }
        #expect(firstPage.line.utf8.count <= LocationProtocol.maxLineBytes)
        #expect(page.count > 100 && page.count < visits.count && next == page.count)
        let listed = try await client.recentVisits()
        #expect(listed.count == visits.count)
        #expect(zip(listed, visits).allSatisfy {
            $0.arrival == $1.arrival && $0.departure == $1.departure && $0.place == $1.place && Geodesy.distance($0.coordinate, $1.coordinate) < 0.01
        })
    }
}
