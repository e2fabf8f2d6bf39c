import LocationCore
import Simulation
import Testing

/// The gazetteer's index file (docs/places.md, "Gazetteer"): what it holds is the index it was
/// made from, and a damaged or foreign file is refused with the reason, never read past its end.
@Suite struct GazetteerIndexTests {
    static let source = GazetteerIndex.Source(size: 123_456, modified: 1_700_000_000_123_456_789)

    static func index(_ g: Gazetteer) -> [UInt8] { GazetteerIndex.bytes(of: g, source: source) }

    static func load(_ bytes: [UInt8]) throws -> Gazetteer {
        try bytes.withUnsafeBytes { try GazetteerIndex.gazetteer(from: $0) }
    }

    static func problem(_ bytes: [UInt8]) -> String? {
        do { _ = try load(bytes); return nil } catch { return (error as? GazetteerIndex.Problem)?.reason ?? "\(error)" }
    }

    @Test func anIndexAnswersAsTheGazetteerItWasMadeFrom() throws {
        let g = try GeoNamesReader.read(GeoNamesSample.synthetic(count: 5000, seed: 11)
                                        + Array(GeoNamesSample.row(id: 9, name: "Saint-Étienne", latitude: 45.43389, longitude: 4.39,
                                                                   countryCode: "FR", admin1: "84").utf8))
        let bytes = Self.index(g)
        #expect(bytes.withUnsafeBytes { try? GazetteerIndex.source(of: $0) } == Self.source)
        let loaded = try Self.load(bytes)
        #expect(loaded.count == g.count && loaded.byteSize == g.byteSize)
        var rng = SplitMix64(seed: 5)
        for _ in 0..<2000 {
            let q = Coordinate(latitude: Double.random(in: -90...90, using: &rng), longitude: Double.random(in: -180...180, using: &rng))
            #expect(loaded.nearest(q) == g.nearest(q))
        }
        #expect(loaded.nearest(Coordinate(latitude: 45.43, longitude: 4.39))?.name == "Saint-Étienne")
        // Built again from the same places: the same bytes.
        #expect(Self.index(try GeoNamesReader.read(GeoNamesSample.synthetic(count: 5000, seed: 11)
                                                   + Array(GeoNamesSample.row(id: 9, name: "Saint-Étienne", latitude: 45.43389, longitude: 4.39,
                                                                              countryCode: "FR", admin1: "84").utf8))) == bytes)
    }

    @Test func anEmptyGazetteerHasAnIndexToo() throws {
        let loaded = try Self.load(Self.index(Gazetteer(places: [])))
        #expect(loaded.count == 0 && loaded.nearest(Coordinate(latitude: 0, longitude: 0)) == nil)
    }

    @Test func aDamagedOrForeignFileIsRefusedWithItsReason() throws {
        let bytes = Self.index(try GeoNamesReader.read(GeoNamesSample.synthetic(count: 100, seed: 2)))
        #expect(Self.problem([]) == "is no gazetteer index of this version")
        #expect(Self.problem(Array("geonameid\tname\n".utf8)) == "is no gazetteer index of this version")
        #expect(Self.problem(Array(bytes.dropLast(7)))?.hasSuffix("(truncated or damaged)") == true)
        #expect(Self.problem(bytes + [0])?.hasSuffix("(truncated or damaged)") == true)
        var swapped = bytes
        swapped[8...11].reverse()
        #expect(Self.problem(swapped) == "was built on a machine of another byte order")
        // The first name offset (after the header and five columns of 100 floats) made 5.
        var names = bytes
        names[44 + 5 * 400] = 5
        #expect(Self.problem(names) == "has name offsets out of order (damaged)")
        // The first place's region made 0xFFFF.
        var region = bytes
        region[44 + 5 * 400 + 101 * 4] = 0xFF; region[44 + 5 * 400 + 101 * 4 + 1] = 0xFF
        #expect(Self.problem(region) == "has a place of a region it does not hold (damaged)")
    }
}
