@testable import LocationCore
import Simulation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Bounded wander (docs/semantics.md, "Visits", "Progress, without a speed"): fixes without a
/// speed whose half-minute means wander round one point for `wanderWindow` are a stay.
@Suite struct VisitWanderTests {
    /// 1 Hz fixes without speed or accuracy: a walk north at 1.2 m/s for 5 minutes, `still`
    /// seconds at the place while an offset per axis wanders (Gauss–Markov, `sigma` m, 90 s,
    /// plus 5 m of white noise: a receiver under a roof), and a walk on. Returns the recorder
    /// and when the stay began.
    func indoorStay(still: Int, sigma: Double, seed: UInt64, parameters: VisitDetector.Parameters = .init()) -> (VisitRecorder, Double) {
        var r = VisitRecorder(parameters)
        var rng = SeededRandom(seed: seed)
        var t = 0.0
        for i in 0..<300 { r.feed(fix(at: t, offset(Double(i - 300) * 1.2, 0), accuracy: nil)); t += 1 }
        let stop = t
        var north = 0.0, east = 0.0
        let a = exp(-1.0 / 90), b = sigma * (1 - a * a).squareRoot()
        for _ in 0..<still {
            north = a * north + b * rng.gaussian(); east = a * east + b * rng.gaussian()
            r.feed(fix(at: t, offset(north + 5 * rng.gaussian(), east + 5 * rng.gaussian()), accuracy: nil)); t += 1
        }
        for i in 1...300 { r.feed(fix(at: t, offset(Double(i) * 1.2, 0), accuracy: nil)); t += 1 }
        return (r, stop)
    }

    /// Fifteen minutes under a roof whose fixes wander 30 m per axis is one visit, arrived at
    /// no earlier than the half-minute the walk in reached the place; the movement rules alone take the wander for a slow walk
    /// (with the rule off, no visit).
    @Test(arguments: [8, 9, 13] as [UInt64])
    func aWanderingReceiversStayIsAVisit(seed: UInt64) {
        let (r, stop) = indoorStay(still: 900, sigma: 30, seed: seed)
        #expect(r.arrivals.count == 1)
        if let a = r.arrivals.first { #expect(a.arrival - t0 >= stop - 30, "arrival at \(a.arrival - t0), stay from \(stop)") }
        #expect(indoorStay(still: 900, sigma: 30, seed: seed, parameters: .init(wanderWindow: .infinity)).0.arrivals.isEmpty)
    }

    /// Twenty minutes of laps round a small circle without a speed is no visit: its
    /// half-minute means stay within the core and make no progress over ten minutes, but the
    /// path goes on round the circle — from half-minute to half-minute at a walk round 40 m,
    /// from fix to fix at a jog of a lap a minute, whose half-minute means fall either side.
    @Test(arguments: [(40.0, 1.2), (31.8, 3.33)])
    func lapsOfASmallLoopAreNoVisit(radius: Double, speed: Double) {
        var r = VisitRecorder()
        var rng = SeededRandom(seed: 3)
        for i in 0..<1200 {
            let angle = Double(i) * speed / radius
            r.feed(fix(at: Double(i), offset(radius * sin(angle) + 3 * rng.gaussian(), radius * cos(angle) + 3 * rng.gaussian()), accuracy: nil))
        }
        #expect(r.arrivals.isEmpty)
    }
}
