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

    /// `isCertainlyCloser` lets filters skip the trigonometry; it must never say "closer" where
    /// `distance` says otherwise (or a filter would decide differently), and should say it for
    /// the common case, a fix metres from the last one against a threshold of tens of metres.
    /// Pairs everywhere on the globe, poles and antimeridian included, at every scale, each
    /// tried against limits just above and below its own distance.
    @Test func certainlyCloserNeverContradictsDistance() {
        var state: UInt64 = 0x9e37_79b9_7f4a_7c15
        func unit() -> Double {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Double(state >> 11) / Double(1 << 53)
        }
        var claimed = 0
        for i in 0..<200_000 {
            let a = Coordinate(latitude: unit() * 180 - 90, longitude: unit() * 360 - 180)
            let scale = [1e-7, 1e-5, 1e-3, 0.1, 10][i % 5]  // degrees: centimetres to 1,000 km
            let b = Coordinate(latitude: max(-90, min(90, a.latitude + (unit() - 0.5) * scale)),
                               longitude: a.longitude + (unit() - 0.5) * scale)
            let d = Geodesy.distance(a, b)
            for limit in [d, d.nextUp, d * (1 + 1e-12), d * 1.001, d * 1.5, d * 3, d * 0.999] where limit > 0 {
                if Geodesy.isCertainlyCloser(a, b, than: limit) {
                    claimed += 1
                    #expect(d < limit, "\(a) → \(b): \(d) m, claimed closer than \(limit)")
                }
            }
        }
        #expect(claimed > 100_000, "the bound should decide most pairs well inside the limit")
        // 1 m apart at 48° N against a 10 m filter: decided without trigonometry.
        let a = Coordinate(latitude: 48.1, longitude: 11.5), b = Coordinate(latitude: 48.100009, longitude: 11.5)
        #expect(Geodesy.isCertainlyCloser(a, b, than: 10))
        #expect(!Geodesy.isCertainlyCloser(a, b, than: 0.5))
    }

    /// `distanceBounds` lets filters and regions compare distances without the trigonometry;
    /// `distance` must never fall outside them (or a comparison they decide would come out
    /// otherwise), and they should be tight: well under a millimetre at the distances filters
    /// and regions compare (up to tens of kilometres). Pairs everywhere, poles and antimeridian
    /// included, at every scale.
    @Test func distanceBoundsHoldDistance() {
        var state: UInt64 = 0x2545_f491_4f6c_dd1d
        func unit() -> Double {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Double(state >> 11) / Double(1 << 53)
        }
        var unbounded = 0
        for i in 0..<200_000 {
            let a = Coordinate(latitude: unit() * 180 - 90, longitude: unit() * 360 - 180)
            let scale = [1e-8, 1e-6, 1e-4, 1e-2, 0.3, 30][i % 6]  // degrees: a millimetre to 3,000 km
            let b = Coordinate(latitude: max(-90, min(90, a.latitude + (unit() - 0.5) * scale)),
                               longitude: a.longitude + (unit() - 0.5) * scale)
            let d = Geodesy.distance(a, b)
            let bounds = Geodesy.distanceBounds(Geodesy.unitVector(a), Geodesy.unitVector(b))
            #expect(bounds.low <= d && d <= bounds.high, "\(a) → \(b): \(d) m outside \(bounds)")
            if bounds.high == .infinity { unbounded += 1; continue }
            if d < 50_000 { #expect(bounds.high - bounds.low < 0.001, "\(a) → \(b): \(d) m, bounds \(bounds)") }
        }
        #expect(unbounded < 20_000, "only chords beyond half the radius go without an upper bound")
        // Antipodes: no upper bound, a lower one.
        let far = Geodesy.distanceBounds(Geodesy.unitVector(Coordinate(latitude: 10, longitude: 20)),
                                         Geodesy.unitVector(Coordinate(latitude: -10, longitude: -160)))
        #expect(far.high == .infinity && far.low == 0)
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
