import LocationCore
import NMEA
import Simulation
import Testing

/// Scenarios across ±180 and over a pole, replayed through the project's NMEA decoder: every
/// fix is a position on the globe and no fix jumps farther than a step: no move goes the long way
/// round in longitude, no noise writes longitudes past 180 or divides by cos(90°).
@Suite struct GlobeEdgeTests {
    static func fixes(_ json: String) throws -> [Fix] {
        let nmea = Simulator(try Scenario.parse(json)).run().nmea
        var fixes: [Fix] = []
        var decoder = NMEADecoder()
        decoder.feed(nmea) { if let f = $0.fix { fixes.append(f) } }
        decoder.finish { if let f = $0.fix { fixes.append(f) } }
        return fixes
    }

    /// Without noise, consecutive fixes are at most one step apart (1.4 m at 1.4 m/s, plus the
    /// rounding of a step count and of NMEA's 5 decimals of minutes).
    static func expectSmallSteps(_ fixes: [Fix], epochs: Int) {
        #expect(fixes.count == epochs)
        #expect(fixes.allSatisfy { $0.coordinate.isValid })
        let longest = zip(fixes, fixes.dropFirst()).map { Geodesy.distance($0.coordinate, $1.coordinate) }.max() ?? 0
        #expect(longest <= 1.4 * 1.1, "longest jump \(longest) m")
    }

    @Test func movesAcrossTheAntimeridianGoTheShortWay() throws {
        let fixes = try Self.fixes("""
            {"start":"2026-03-10T07:00:00Z","origin":{"latitude":-16.5,"longitude":179.998},"outdoor":{"sigma":0},
             "legs":[{"stay":10},{"walk":{"latitude":-16.5,"longitude":-179.998}},{"stay":10},
                     {"walk":{"east":-430}},{"walk":{"east":430}},{"walk":{"north":200,"east":-300}},{"stay":10}]}
            """)
        // 427 m, 430 m, 430 m and 361 m at 1.4 m/s: 305 + 307 + 307 + 258 epochs.
        Self.expectSmallSteps(fixes, epochs: 10 + 305 + 10 + 307 + 307 + 258 + 10)
        #expect(fixes.contains { $0.coordinate.longitude < -179.99 } && fixes.contains { $0.coordinate.longitude > 179.99 })
    }

    @Test func movesOverAPoleStayOnTheGlobe() throws {
        let fixes = try Self.fixes("""
            {"start":"2026-03-10T07:00:00Z","origin":{"latitude":89.9995,"longitude":30},"outdoor":{"sigma":0},
             "legs":[{"walk":{"north":111}},{"stay":10},{"walk":{"latitude":89.9995,"longitude":30}},{"walk":{"east":100}}]}
            """)
        // Over the pole and back (111 m each way), then 100 m east: 79 + 10 + 79 + 71 epochs.
        Self.expectSmallSteps(fixes, epochs: 79 + 10 + 79 + 71)
        #expect(fixes.contains { $0.coordinate.latitude > 89.99995 })
    }

    /// With noise at a pole and on ±180, every fix is on the globe and near the truth.
    @Test(arguments: [(90.0, 0.0), (-90.0, 45.0), (0.0, 180.0), (-16.5, -180.0), (89.99999, 179.99999)])
    func noiseAtTheEdgesStaysOnTheGlobe(_ latitude: Double, _ longitude: Double) throws {
        let fixes = try Self.fixes("""
            {"start":"2026-03-10T07:00:00Z","origin":{"latitude":\(latitude),"longitude":\(longitude)},
             "outdoor":{"sigma":30,"multipathSigma":20,"outlierRate":0.05,"outlierDistance":500},"legs":[{"stay":600}]}
            """)
        #expect(fixes.count == 600)
        let origin = Coordinate(latitude: latitude, longitude: longitude)
        for f in fixes {
            #expect(f.coordinate.isValid, "\(f.coordinate)")
            #expect(Geodesy.distance(origin, f.coordinate) < 1000, "\(f.coordinate)")
        }
    }
}
