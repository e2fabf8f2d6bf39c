import Foundation
import LocationClient
import LocationCore
@testable import LocationDaemon
import LocationProtocol
import Simulation
import TestSupport
import Testing

/// Places through the real daemon (docs/places.md): built from a program's precise visits,
/// kept in the SQLite store across restarts, seen only by that program, none for an
/// approximate session.
@Suite(.serialized, .timeLimit(.minutes(5)))
struct PlacesDaemonTests {
    /// The demo trip's three stays (the last two 280 m apart: two places).
    static func demoLog(in dir: URL) throws -> URL {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let scenario = try Scenario.parse(String(contentsOf: root.appendingPathComponent("Scenarios/demo.json"), encoding: .utf8))
        let log = dir.appendingPathComponent("demo.nmea")
        try Data(Simulator(scenario).run().nmea).write(to: log)
        return log
    }

    /// Replays the log to a precise `always` subscriber asking for visits; returns the place of
    /// each visit event and the program's places after it. A replay's daemon stops at the log's
    /// end, closing its connections (docs/nmea.md), as soon as it has sent the last `status`: a
    /// request sent after that one raced the stop. The places are asked of a daemon started on
    /// the database once the replay's has exited.
    static func trip(_ log: URL, database: String, config: [String] = []) async throws -> (visits: [UInt64?], places: [Place]) {
        let visits: [UInt64?]
        do {
            let daemon = try DaemonProcess(arguments: config + ["--replay", log.path, "--speed", "0"], database: database)
            defer { daemon.stop() }
            let client = try await daemon.connect()
            defer { client.close() }
            var reader = MessageReader(client)
            try await client.startSession(.always)
            try client.send(.subscribe(id: .number(1), options: SubscriptionOptions(events: [.visits])))
            let messages = try await reader.read(timeout: 60) { $0.states.filter { $0 == .disconnected }.count >= 2 }
            visits = messages.compactMap { m -> UInt64?? in if case .visit(let v) = m { v.place } else { nil } }
            try #require(await waitUntil(timeout: 30) { !daemon.isRunning }, "the replay's daemon did not stop: \(daemon.stderrText())")
            #expect(daemon.waitForExit(timeout: 0) == 0, "\(daemon.stderrText())")
        }
        return (visits, try await places(database: database, config: config))
    }

    /// The program's places in a daemon on `database` with no fixes coming.
    static func places(database: String, config: [String]) async throws -> [Place] {
        let daemon = try DaemonProcess(arguments: config + ["--gpsd", "127.0.0.1:1"], database: database)
        defer { daemon.stop() }
        let client = try await daemon.connect()
        defer { client.close() }
        try await client.startSession(.whenInUse)
        return try await client.places()
    }

    @Test func placesSurviveARestartAndAreTheProgramsOwn() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("places-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let log = try Self.demoLog(in: dir)
        let database = dir.appendingPathComponent("locationd.db").path

        let first = try await Self.trip(log, database: database)
        // Arrival and departure of a stay name the same place.
        #expect(first.visits == [1, 1, 2, 2, 3])
        #expect(first.places.map(\.name) == ["p1", "p2", "p3"])
        #expect(first.places.map(\.visits) == [1, 1, 1])
        #expect(first.places[0].totalSeconds > 300 && first.places[2].totalSeconds == 0)  // the last stay has not ended

        // The same trip after a restart: the same places, visited twice (the ids were kept).
        let second = try await Self.trip(log, database: database)
        #expect(second.visits == [1, 1, 2, 2, 3])
        #expect(second.places.map(\.visits) == [2, 2, 2])
        #expect(second.places.map(\.firstVisit) == first.places.map(\.firstVisit))
        #expect(zip(second.places, first.places).allSatisfy { Geodesy.distance($0.centre, $1.centre) < 10 })

        // Another program (locationctl: another executable) has none of them.
        let daemon = try DaemonProcess(arguments: ["--gpsd", "127.0.0.1:1"], database: database)
        defer { daemon.stop() }
        _ = try await daemon.connect()
        let other = try LocationCtlReplayTests.run(["places", "--socket", daemon.socketPath, "--json"])
        #expect(other.status == 0, "\(other.err)")
        #expect(other.out == "{\"type\":\"places\",\"places\":[]}\n")
        // The owning program's, exported by the client library as listed.
        let client = try await daemon.connect()
        defer { client.close() }
        try await client.startSession(.whenInUse)
        #expect(try await client.places().map(\.name) == ["p1", "p2", "p3"])
    }

    /// An approximate session sees no places and its visits name none, even of the program's
    /// precise past.
    @Test func anApproximateProgramGetsNone() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("places-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let log = try Self.demoLog(in: dir)
        let database = dir.appendingPathComponent("locationd.db").path
        let precise = try await Self.trip(log, database: database)
        #expect(precise.places.count == 3)

        let config = dir.appendingPathComponent("locationd.toml")
        try "[policy.me]\nuser = \(getuid())\nauthorization = \"always\"\naccuracy = \"approximate\"\n".write(to: config, atomically: true, encoding: .utf8)
        let approximate = try await Self.trip(log, database: database, config: ["--config", config.path])
        #expect(!approximate.visits.isEmpty && approximate.visits.allSatisfy { $0 == nil })
        #expect(approximate.places.isEmpty)
    }

    /// `[store] max_places` bounds the places of each program: the demo trip's three stays
    /// keep the two most recent (docs/places.md); lowered, a restart cuts what was kept.
    @Test func maxPlacesBoundsThePlacesOfAProgram() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("places-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let log = try Self.demoLog(in: dir)
        func config(_ limit: Int) throws -> [String] {
            let file = dir.appendingPathComponent("locationd-\(limit).toml")
            try "[store]\nmax_places = \(limit)\n".write(to: file, atomically: true, encoding: .utf8)
            return ["--config", file.path]
        }
        let bounded = try await Self.trip(log, database: dir.appendingPathComponent("a.db").path, config: try config(2))
        #expect(bounded.visits == [1, 1, 2, 2, 3])
        #expect(bounded.places.map(\.name) == ["p2", "p3"])

        let database = dir.appendingPathComponent("b.db").path
        #expect(try await Self.trip(log, database: database).places.count == 3)
        let daemon = try DaemonProcess(arguments: try config(1) + ["--gpsd", "127.0.0.1:1"], database: database)
        defer { daemon.stop() }
        let client = try await daemon.connect()
        defer { client.close() }
        try await client.startSession(.whenInUse)
        #expect(try await client.places().map(\.name) == ["p3"])
    }

    /// A thousand places (the default bound) kept in the store come back in pages that each fit
    /// a line, ascending id, and the client library follows them to the end.
    @Test func aThousandPlacesComeInPages() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("places-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let database = dir.appendingPathComponent("locationd.db").path
        let program = try await DaemonProcess.programOfThisProcess(database: database)

        let t0 = Timestamp(seconds: 1_777_000_000)
        let places = (1...UInt64(PlaceBook.defaultLimit)).map { id in
            let centre = Coordinate(latitude: 48 + Double(id) * 1e-2, longitude: 11.5)
            return Place(id: id, sum: Geodesy.unitVector(centre), visits: 1, totalSeconds: 600,
                         firstVisit: t0.adding(seconds: Double(id) * 3600), lastVisit: t0.adding(seconds: Double(id) * 3600 + 600))
        }
        try PlaceStore(database: Database(path: database)).write(PlaceBook(limit: places.count, places: places, nextID: 1001, counted: nil),
                                                                  of: program)

        let daemon = try DaemonProcess(arguments: ["--gpsd", "127.0.0.1:1"], database: database)
        defer { daemon.stop() }
        let client = try await daemon.connect()
        defer { client.close() }
        try await client.startSession(.whenInUse)
        let firstPage = try await client.request { .places(id: $0, offset: 0) }
        guard case .places(_, let page, let next) = firstPage else { Issue.record("not places: \(firstPage.line)"); return }
        #expect(firstPage.line.utf8.count <= LocationProtocol.maxLineBytes)
        #expect(page.count > 100 && page.count < places.count && next == page.count)
        let listed = try await client.places()
        #expect(listed.map(\.id) == places.map(\.id))
        #expect(zip(listed, places).allSatisfy { Geodesy.distance($0.centre, $1.centre) < 0.01 && $0.firstVisit == $1.firstVisit })
    }

    /// With a gazetteer, each listed place carries the locality of its centre.
    @Test func placesCarryTheLocalityOfTheirCentre() async throws {
        let dir = try LocalityTests.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (log, gazetteer, truth) = try LocalityTests.demo(in: dir)
        let config = dir.appendingPathComponent("locationd.toml")
        try "[geocoding]\ngazetteer = \"\(gazetteer.path)\"\n".write(to: config, atomically: true, encoding: .utf8)
        let trip = try await Self.trip(log, database: dir.appendingPathComponent("locationd.db").path, config: ["--config", config.path])
        #expect(trip.places.count == 3)
        let towns = try (0..<truth.count).map { try LocalityTests.town("Town \($0)", in: gazetteer) }
        for place in trip.places {
            let nearest = towns.indices.min { Geodesy.distance(place.centre, towns[$0]) < Geodesy.distance(place.centre, towns[$1]) }!
            let locality = try #require(place.locality, "\(place.name) has no locality")
            #expect(locality.name == "Town \(nearest)" && locality.countryCode == "DE" && locality.admin1 == "0\(nearest + 1)")
            #expect(abs(locality.distance - Geodesy.distance(place.centre, towns[nearest])) <= 1)
        }
    }
}
