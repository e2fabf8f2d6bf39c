import Testing
import LocationCore
import Simulation
#if canImport(Glibc)
import Glibc
#endif

@Suite struct GazetteerTests {
    static func read(_ text: String) throws(GazetteerError) -> Gazetteer { try GeoNamesReader.read(Array(text.utf8)) }

    static let towns = [
        GeoNamesSample.row(id: 1, name: "Paris", latitude: 48.85341, longitude: 2.3488, countryCode: "FR", admin1: "11"),
        GeoNamesSample.row(id: 2, name: "Versailles", latitude: 48.80359, longitude: 2.13424, countryCode: "FR", admin1: "11"),
        GeoNamesSample.row(id: 3, name: "Saint-Étienne", latitude: 45.43389, longitude: 4.39, countryCode: "FR", admin1: "84"),
        GeoNamesSample.row(id: 4, name: "Mont Blanc", latitude: 45.83265, longitude: 6.86517, featureClass: "T", countryCode: "FR", admin1: "84"),
    ].joined()

    @Test func nearestPopulatedPlaceWithItsCodesAndDistance() throws {
        let g = try Self.read(Self.towns)
        #expect(g.count == 3)  // the mountain (class T) is not a populated place
        let near = try #require(g.nearest(Coordinate(latitude: 48.81, longitude: 2.14)))
        #expect(near.name == "Versailles" && near.countryCode == "FR" && near.admin1 == "11")
        let expected = Geodesy.distance(Coordinate(latitude: 48.81, longitude: 2.14), Coordinate(latitude: 48.80359, longitude: 2.13424))
        #expect(abs(near.distance - expected) < 2)
        // Next to the mountain, the nearest populated place (UTF-8 name intact).
        #expect(g.nearest(Coordinate(latitude: 45.83, longitude: 6.86))?.name == "Saint-Étienne")
    }

    @Test func agreesWithExhaustiveSearch() throws {
        var rng = SplitMix64(seed: 7)
        let text = GeoNamesSample.synthetic(count: 3000, seed: 3)
        let g = try GeoNamesReader.read(text)
        #expect(g.count == 3000)
        let places = String(decoding: text, as: UTF8.self).split(separator: "\n").map { row in
            let c = row.split(separator: "\t", omittingEmptySubsequences: false)
            return Coordinate(latitude: Double(c[4])!, longitude: Double(c[5])!)
        }
        for _ in 0..<500 {
            let q = Coordinate(latitude: Double.random(in: -90...90, using: &rng), longitude: Double.random(in: -180...180, using: &rng))
            let best = places.map { Geodesy.distance(q, $0) }.min()!
            let found = try #require(g.nearest(q))
            #expect(abs(found.distance - best) < 1, "query \(q)")
        }
    }

    @Test func acrossTheAntimeridian() throws {
        let g = try Self.read([
            GeoNamesSample.row(id: 1, name: "East", latitude: -16.5, longitude: 179.9, countryCode: "FJ", admin1: "01"),
            GeoNamesSample.row(id: 2, name: "West", latitude: -16.5, longitude: -179.95, countryCode: "FJ", admin1: "02"),
            GeoNamesSample.row(id: 3, name: "Inland", latitude: -16.5, longitude: 179.6, countryCode: "FJ", admin1: "03"),
        ].joined())
        // 0.02° west of the line: "West" (0.07° away) across it, not "East" (0.08°).
        let across = try #require(g.nearest(Coordinate(latitude: -16.5, longitude: 179.98)))
        #expect(across.name == "West")
        #expect(abs(across.distance - 0.07 * 111_195 * cos(16.5 * Double.pi / 180)) < 20)
        #expect(g.nearest(Coordinate(latitude: -16.5, longitude: -179.99))?.name == "West")
        #expect(g.nearest(Coordinate(latitude: -16.5, longitude: 179.92))?.name == "East")
    }

    @Test func atThePoles() throws {
        let g = try Self.read([
            GeoNamesSample.row(id: 1, name: "Longyearbyen", latitude: 78.22, longitude: 15.64, countryCode: "SJ", admin1: ""),
            GeoNamesSample.row(id: 2, name: "Alert", latitude: 82.5, longitude: -62.35, countryCode: "CA", admin1: "13"),
            GeoNamesSample.row(id: 3, name: "Amundsen-Scott", latitude: -90, longitude: 0, countryCode: "AQ", admin1: ""),
        ].joined())
        // At the pole every longitude is the same point: the nearest is the highest latitude.
        let north = try #require(g.nearest(Coordinate(latitude: 90, longitude: 170)))
        #expect(north.name == "Alert")
        #expect(abs(north.distance - 7.5 * 111_195) < 200)
        let south = try #require(g.nearest(Coordinate(latitude: -89.999, longitude: -120)))
        #expect(south.name == "Amundsen-Scott" && south.distance < 200)
    }

    @Test func emptyFileIsAnEmptyGazetteer() throws {
        let g = try Self.read("")
        #expect(g.count == 0)
        #expect(g.nearest(Coordinate(latitude: 0, longitude: 0)) == nil)
        #expect(try Self.read("\n\r\n").count == 0)
    }

    @Test func crlfLinesAndAShortLastRow() throws {
        // Windows line ends; a row cut after the admin1 code column still has what is read.
        let g = try Self.read("1\tA\tA\t\t10\t20\tP\tPPL\tXX\t\t05\r\n2\tB\tB\t\t-10\t-20\tP\tPPL\tYY\t\t07")
        #expect(g.count == 2)
        #expect(g.nearest(Coordinate(latitude: 10, longitude: 20)).map { [$0.name, $0.countryCode, $0.admin1] } == ["A", "XX", "05"])
        #expect(g.nearest(Coordinate(latitude: -10, longitude: -20))?.admin1 == "07")
    }

    @Test(arguments: [
        ("1\tA\tA\t\tnorth\t20\tP\tPPL\tXX\t\t05\t\t\t\t1\t\t1\tUTC\t2024-01-01\n", "latitude 'north'"),
        ("1\tA\tA\t\t91\t20\tP\tPPL\tXX\t\t05\t\t\t\t1\t\t1\tUTC\t2024-01-01\n", "latitude '91'"),
        ("1\tA\tA\t\t10\t-180.5\tP\tPPL\tXX\t\t05\t\t\t\t1\t\t1\tUTC\t2024-01-01\n", "longitude '-180.5'"),
        ("1\tA\tA\t\t10\t\tP\tPPL\tXX\t\t05\t\t\t\t1\t\t1\tUTC\t2024-01-01\n", "longitude ''"),
        ("1\t\tA\t\t10\t20\tP\tPPL\tXX\t\t05\t\t\t\t1\t\t1\tUTC\t2024-01-01\n", "no name"),
        ("Paris,48.85,2.35\n", "1 columns"),
    ])
    func malformedRowIsNamedByLine(row: String, reason: String) throws {
        let good = GeoNamesSample.row(id: 9, name: "Good", latitude: 1, longitude: 1, countryCode: "XX", admin1: "01")
        let text = good + "\n" + good + row + good  // the bad row is line 4 (line 2 is empty)
        #expect {
            try Self.read(text)
        } throws: { error in
            guard let e = error as? GazetteerError else { return false }
            return e.line == 4 && e.reason.contains(reason) && e.description.hasPrefix("line 4: ")
        }
    }
}
