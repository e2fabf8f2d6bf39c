import Testing
import LocationCore

@Suite struct GeodesyTests {
    @Test func oneDegreeOfLatitude() {
        let d = Geodesy.distance(Coordinate(latitude: 0, longitude: 0), Coordinate(latitude: 1, longitude: 0))
        #expect(abs(d - 111_195.08) < 0.1)
    }

    @Test func longitudeShrinksWithLatitude() {
        let d = Geodesy.distance(Coordinate(latitude: 60, longitude: 0), Coordinate(latitude: 60, longitude: 1))
        #expect(abs(d - 111_195.08 * 0.5) < 20)  // cos 60° = 0.5 (great circle slightly shorter)
    }

    @Test func symmetricAndZero() {
        let a = Coordinate(latitude: 52.5, longitude: 13.4), b = Coordinate(latitude: -33.9, longitude: 151.2)
        #expect(Geodesy.distance(a, b) == Geodesy.distance(b, a))
        #expect(Geodesy.distance(a, a) == 0)
    }

    @Test func acrossTheAntimeridian() {
        let d = Geodesy.distance(Coordinate(latitude: 0, longitude: 179.999), Coordinate(latitude: 0, longitude: -179.999))
        #expect(abs(d - 222.39) < 0.1)
    }
}
