import Foundation
import LocationCore
@testable import LocationDaemon
import Logging
import NIOPosix
import Testing

/// The approximate-location cell survives a restart (docs/privacy.md, "Mechanism"): a device
/// held by the hysteresis in the cell it came from still shows that cell after the daemon
/// restarts, instead of its true one.
@Suite struct PrivacyCellTests {
    static let secret: UInt64 = 0x5EED_1234_ABCD_0001
    static let grid = PrivacyGrid(secret: secret)

    /// A hub on the database at `path` as the daemon starts it: secret, then the remembered cell.
    static func withHub(path: String, _ body: (Hub) async throws -> Void) async throws {
        let database = try Database(path: path)
        let cells = try PrivacyCellStore(database: database)
        var logger = Logger(label: "test")
        logger.logLevel = .critical
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let hub = Hub(eventLoop: group.next(), sourceDescription: "test", logger: logger,
                      regionStore: try RegionStore(database: database), privacyCells: cells)
        let cell = try cells.load()
        try await hub.eventLoop.submit {
            hub.privacySecret = secret
            if let cell { hub.restorePrivacyCell(cell) }
        }.get()
        do { try await body(hub) } catch {
            try? await group.shutdownGracefully()
            throw error
        }
        try await group.shutdownGracefully()
    }

    static func feed(_ hub: Hub, _ c: Coordinate, seconds: Range<Int>) async {
        let t0 = CivilTime(year: 2026, month: 6, day: 1, hour: 8).timestamp
        for s in seconds {
            hub.submit(.fix(Fix(time: t0.adding(seconds: Double(s)), coordinate: c, mode: .threeD, horizontalAccuracy: 5)))
        }
        await hub.processed()
    }

    @Test func theHysteresisGoesOnAcrossARestart() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cell-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("locationd.db").path
        // Home: a cell's centre; parked: 200 m into the next cell east, within the 500 m margin.
        let home = Self.grid.centre(of: Self.grid.cell(of: Coordinate(latitude: 52.52, longitude: 13.40)).cell)
        let homeCell = Self.grid.cell(of: home).cell
        var parked = home
        var metres = 0.0
        while Self.grid.cell(of: parked).cell == homeCell || Self.grid.cell(of: parked).inset < 200 {
            metres += 10
            parked = Coordinate(latitude: home.latitude, longitude: home.longitude + metres / (111_320 * cos(home.latitude * .pi / 180)))
        }
        #expect(Self.grid.cell(of: parked).inset < Self.grid.margin, "the test point is within the hysteresis margin")
        try await Self.withHub(path: path) { hub in
            await Self.feed(hub, home, seconds: 0..<5)
            await Self.feed(hub, parked, seconds: 5..<10)
            let cell = try await hub.eventLoop.submit { hub.loopPrivacyCell }.get()
            #expect(cell == homeCell, "held by the hysteresis")
        }
        try await Self.withHub(path: path) { hub in
            await Self.feed(hub, parked, seconds: 100..<105)
            let cell = try await hub.eventLoop.submit { hub.loopPrivacyCell }.get()
            #expect(cell == homeCell, "still held after the restart")
        }
        // Carried 20 km away while the daemon was down: the first fix after the restart sets the
        // cell, even one too inaccurate to move a cell otherwise, and it is what is shown.
        let far = Coordinate(latitude: home.latitude + 0.18, longitude: home.longitude)
        try await Self.withHub(path: path) { hub in
            let t0 = CivilTime(year: 2026, month: 6, day: 1, hour: 9).timestamp
            hub.submit(.fix(Fix(time: t0, coordinate: far, mode: .threeD, horizontalAccuracy: 900)))
            await hub.processed()
            let (cell, shown) = try await hub.eventLoop.submit {
                (hub.loopPrivacyCell, hub.loopPublishedFix?.coordinate)
            }.get()
            #expect(cell == Self.grid.cell(of: far).cell)
            #expect(shown == Self.grid.centre(of: Self.grid.cell(of: far).cell))
        }
    }
}
