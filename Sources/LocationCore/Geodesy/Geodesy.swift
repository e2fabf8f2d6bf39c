/// Distances on the Earth. Spherical (haversine) with the IUGG mean radius: error ≤ 0.5 %,
/// far below GNSS error at the distances filters and regions work with.
public enum Geodesy {
    public static let earthRadius = 6_371_008.8  // metres, IUGG mean radius

    @inlinable public static func radians(_ degrees: Double) -> Double { degrees * (Double.pi / 180) }

    /// Great-circle distance in metres.
    @inlinable public static func distance(_ a: Coordinate, _ b: Coordinate) -> Double {
        let phi1 = radians(a.latitude), phi2 = radians(b.latitude)
        let dPhi = phi2 - phi1
        let dLambda = radians(b.longitude - a.longitude)
        let s1 = sin(dPhi / 2), s2 = sin(dLambda / 2)
        let h = s1 * s1 + cos(phi1) * cos(phi2) * s2 * s2
        return 2 * earthRadius * asin(min(1, h.squareRoot()))
    }

    /// The straight-line distance in metres between two points as `unitVector`s: never longer
    /// than the great circle, and shorter by θ²/24 of it (0.1 % at 1,000 km); no trigonometry,
    /// for rules that run on every fix and already have the unit vectors.
    @inlinable public static func chordDistance(_ a: SIMD3<Double>, _ b: SIMD3<Double>) -> Double {
        let d = a - b
        return (d * d).sum().squareRoot() * earthRadius
    }

    /// Whether `distance(a, b) < limit` is certain without the trigonometry, for filters that
    /// compare a distance with a threshold on every fix (most of them far below it): from `a`
    /// along its meridian to `b`'s latitude, then along `b`'s parallel, is a path, so no shorter
    /// than the great circle, and cos φ ≤ 1 − φ²/2 + φ⁴/24. The margin (10⁻⁹, relative) covers
    /// the rounding of both computations, so `true` never contradicts `distance`: a caller that
    /// skips `distance` when it is `true` decides exactly as one that computes it.
    @inlinable public static func isCertainlyCloser(_ a: Coordinate, _ b: Coordinate, than limit: Double) -> Bool {
        let phi2 = radians(b.latitude)
        let dPhi = abs(phi2 - radians(a.latitude))
        let dLambda = abs(radians(b.longitude - a.longitude))
        let p2 = phi2 * phi2
        let cosBound = 1 - p2 / 2 + p2 * p2 / 24
        return earthRadius * (dPhi + cosBound * dLambda) * (1 + 1e-9) < limit
    }

    /// Bounds on `distance` between two points given as `unitVector`s, from their chord (no
    /// trigonometry), for rules that compare distances with limits on every fix and have the
    /// unit vectors already. The great circle over a chord k is 2·asin(k/2) = k + k³/24 +
    /// 3k⁵/640 + … (all terms positive), so between k(1 + k²/24) and, for chords up to half
    /// the radius (≈ 3,200 km; longer ones get no upper bound), k(1 + k²/24 + k⁴/200). The
    /// margins (10⁻¹² relative and 1 µm, against rounding errors of about 10⁻¹⁵ and 10⁻⁸ m in
    /// both computations) make a comparison the bounds decide come out as it would with
    /// `distance`.
    @inlinable public static func distanceBounds(_ a: SIMD3<Double>, _ b: SIMD3<Double>) -> (low: Double, high: Double) {
        let d = a - b
        let k2 = (d * d).sum()
        guard k2 <= 0.25 else { return (0, .infinity) }
        let chord = k2.squareRoot() * earthRadius
        let low = chord * (1 + k2 / 24)
        return (low * (1 - 1e-12) - 1e-6, (low + chord * (k2 * k2 / 200)) * (1 + 1e-12) + 1e-6)
    }

    /// The point on the unit sphere (x towards 0°N 0°E, z towards the North Pole): the region
    /// index, region crossings and visits' planes work on these, with no seam at the
    /// antimeridian or the poles.
    public static func unitVector(_ c: Coordinate) -> SIMD3<Double> {
        let phi = radians(c.latitude), lambda = radians(c.longitude)
        let cp = cos(phi)
        return SIMD3(cp * cos(lambda), cp * sin(lambda), sin(phi))
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
