import Glibc
import LocationCore
import Simulation
import Testing

/// The project's seeded generator (Simulation's SplitMix64), so every random test reproduces
/// from its seed; this Box–Muller draws its own uniforms, as the tests' seeds were tuned with.
struct SeededRandom: RandomNumberGenerator {
    var base: SplitMix64
    init(seed: UInt64) { base = SplitMix64(seed: seed) }
    mutating func next() -> UInt64 { base.next() }
    mutating func uniform(_ r: ClosedRange<Double>) -> Double { Double.random(in: r, using: &self) }
    /// Standard normal (Box–Muller).
    mutating func gaussian() -> Double {
        let u1 = Double.random(in: Double.ulpOfOne...1, using: &self), u2 = Double.random(in: 0...1, using: &self)
        return (-2 * log(u1)).squareRoot() * cos(2 * Double.pi * u2)
    }
}

/// Moves `c` by metres east and north (local plane; test distances are a few km).
func offset(_ c: Coordinate, east: Double, north: Double) -> Coordinate {
    let m = Geodesy.earthRadius * Double.pi / 180
    let k = cos(c.latitude * Double.pi / 180) * m
    return Coordinate(latitude: c.latitude + north / m, longitude: c.longitude + east / k)
}

func run(_ monitor: inout RegionMonitor, _ fixes: [Fix]) -> [RegionEvent] {
    var out: [RegionEvent] = []
    for f in fixes { monitor.handle(f, into: &out) }
    return out
}

@Suite struct RegionRegistrationTests {
    @Test func badRegionsAreRefusedAndNothingIsApplied() throws {
        var m = RegionMonitor(limits: .init(maxActive: 20, maxRegistered: 3))
        try m.add([Region(id: "a", center: origin, radius: 100)])
        let cases: [([Region], RegionError.Code, String)] = [
            ([Region(id: "b", center: origin, radius: 5)], .invalidRegion, "radius 5 is out of range"),
            ([Region(id: "b", center: origin, radius: 200_000)], .invalidRegion, "radius 200000 is out of range"),
            ([Region(id: "b", center: Coordinate(latitude: 91, longitude: 0), radius: 100)], .invalidRegion, "region b: latitude 91 is out of range; expected -90…90 degrees"),
            ([Region(id: "b", center: Coordinate(latitude: 0, longitude: -180.5), radius: 100)], .invalidRegion, "region b: longitude -180.5 is out of range; expected -180…180 degrees"),
            // As JSON writes the number, not Swift's 604801.0.
            ([Region(id: "b", center: origin, radius: 100, dwell: 604_801)], .invalidRegion, "region b: dwell 604801 is out of range; expected 0…604800 seconds"),
            ([Region(id: "", center: origin, radius: 100)], .invalidRegion, "id must be"),
            ([Region(id: "b", center: origin, radius: 100), Region(id: "a", center: origin, radius: 100)], .duplicateRegion, "region a is already registered; remove it first (regions.remove) to change it, or give the new one another id"),
            ([Region(id: "b", center: origin, radius: 100), Region(id: "b", center: origin, radius: 100)], .duplicateRegion, "region b is given twice in this request; give each region its own id"),
            ((0..<3).map { Region(id: "n\($0)", center: origin, radius: 100) }, .tooManyRegions, "more than the limit of 3"),
        ]
        for (regions, code, text) in cases {
            do {
                try m.add(regions)
                Issue.record("accepted \(regions.map(\.id))")
            } catch {
                #expect(error.code == code)
                #expect(error.message.contains(text), "\(error.message)")
            }
            #expect(m.regions.map(\.id) == ["a"])
        }
        do { try m.remove(["a", "zzz"]); Issue.record("removed an unknown id") } catch { #expect(error.code == .unknownRegion) }
        #expect(m.regions.map(\.id) == ["a"])
        try m.remove(["a"])
        #expect(m.count == 0)
    }

    /// A program restored over a registration limit lowered since (`[regions] max_registered`)
    /// may still send an empty add (`regions import` sends one to learn the count): it registers
    /// nothing, so the limit has nothing to refuse. One region more is refused.
    @Test func anEmptyAddIsNotRefusedOverALoweredLimit() throws {
        var m = RegionMonitor(limits: .init(maxActive: 20, maxRegistered: 2))
        try m.restore((0..<3).map { RegionRecord(region: Region(id: "r\($0)", center: origin, radius: 100), state: .unknown) })
        try m.add([])
        #expect(m.count == 3)
        do { try m.add([Region(id: "a", center: origin, radius: 100)]); Issue.record("limit ignored") } catch {
            #expect(error.code == .tooManyRegions)
        }
    }

    @Test func initialStateIsReportedOnlyWhenAskedAndOnlyByADecidingFix() throws {
        var m = RegionMonitor()
        try m.add([Region(id: "asked", center: origin, radius: 200, notifyInitialState: true),
                   Region(id: "quiet", center: origin, radius: 200)])
        // 150 m accuracy cannot decide a 200 m region from 100 m inside (needs 0.75 × 150 ≤ 100).
        #expect(run(&m, [fix(at: 0, north(of: origin, metres: 100), accuracy: 150)]).isEmpty)
        #expect(m.state(of: "asked") == .unknown)
        let events = run(&m, [fix(at: 1, north(of: origin, metres: 100), accuracy: 10)])
        #expect(events.map(\.kind) == [.inside])
        #expect(events.map(\.region) == ["asked"])
        #expect(m.state(of: "quiet") == .inside)
    }

    @Test func dwellAfterItsSecondsInside() throws {
        var m = RegionMonitor()
        try m.add([Region(id: "d", center: origin, radius: 100, dwell: 30)])
        var fixes = [fix(at: 0, north(of: origin, metres: 500))]
        for s in 10...60 { fixes.append(fix(at: Double(s), north(of: origin, metres: 20))) }
        let events = run(&m, fixes)
        #expect(events.map(\.kind) == [.enter, .dwell])
        #expect(events[1].time == t0.adding(seconds: 40))
    }

    /// Leaving 1 s before the dwell's mark: the fixes of the exit are no dwell (which would be
    /// sent at the exit's second fix, timed after the exit, for a stay of 599 s). A single fix
    /// outside (noise) only holds the dwell back to the fix after it.
    @Test func noDwellFromTheFixesOfAnExit() throws {
        var m = RegionMonitor()
        try m.add([Region(id: "d", center: origin, radius: 200, dwell: 600)])
        var fixes = (0..<10).map { fix(at: Double($0), north(of: origin, metres: 400)) }
        fixes += (10..<609).map { fix(at: Double($0), origin) }
        fixes += (609..<640).map { fix(at: Double($0), north(of: origin, metres: 400)) }
        let events = run(&m, fixes)
        #expect(events.map(\.kind) == [.enter, .exit], "\(events)")
        #expect(events.map(\.time) == [t0.adding(seconds: 10), t0.adding(seconds: 609)])

        var noisy = RegionMonitor()
        try noisy.add([Region(id: "d", center: origin, radius: 200, dwell: 600)])
        var stay = (0..<10).map { fix(at: Double($0), north(of: origin, metres: 400)) }
        stay += (10..<700).map { fix(at: Double($0), $0 == 610 ? north(of: origin, metres: 400) : origin) }
        let held = run(&noisy, stay)
        #expect(held.map(\.kind) == [.enter, .dwell], "\(held)")
        #expect(held.last?.time == t0.adding(seconds: 611))
    }
}

@Suite struct RegionHysteresisTests {
    /// A device standing on the boundary of a 300 m region, i.i.d. Gaussian noise (the worst
    /// case: real receivers' errors are correlated, which only helps), honest 95 % accuracy
    /// (2.45 σ), 1 h at 1 Hz: at most one transition after the initial state.
    @Test(arguments: [5.0, 15.0, 30.0]) func stationaryAtTheBoundaryFlapsAtMostOnce(sigma: Double) throws {
        for seed: UInt64 in [1, 2, 3] {
            var rng = SeededRandom(seed: seed &* 1000 &+ UInt64(sigma))
            var m = RegionMonitor()
            try m.add([Region(id: "r", center: origin, radius: 300, notifyInitialState: true)])
            let spot = north(of: origin, metres: 300)
            var events: [RegionEvent] = []
            for s in 0..<3600 {
                let c = offset(spot, east: sigma * rng.gaussian(), north: sigma * rng.gaussian())
                m.handle(fix(at: Double(s), c, accuracy: 2.45 * sigma), into: &events)
            }
            let transitions = events.filter { $0.kind == .enter || $0.kind == .exit }
            #expect(transitions.count <= 1, "σ \(sigma) seed \(seed): \(events.map(\.kind))")
        }
    }

    /// The same at slower fix rates: the confirmation needed shrinks with the rate
    /// (`RegionRules.confirms`), the false transitions an hour must not grow. A single fix
    /// deciding whenever it comes more than 3 s after the previous would make 12–38 transitions
    /// an hour at 4–10 s.
    @Test(arguments: [2.0, 4.0, 5.0, 10.0, 30.0, 60.0, 180.0])
    func stationaryAtTheBoundaryFlapsAtMostOnceAtSlowerRates(interval: Double) throws {
        for sigma in [5.0, 15.0, 30.0] {
            for seed: UInt64 in [1, 2, 3] {
                var rng = SeededRandom(seed: seed &* 7919 &+ UInt64(sigma) &* 31 &+ UInt64(interval))
                var m = RegionMonitor()
                try m.add([Region(id: "r", center: origin, radius: 300, notifyInitialState: true)])
                let spot = north(of: origin, metres: 300)
                var events: [RegionEvent] = []
                for k in 0..<Int(3600 / interval) {
                    let c = offset(spot, east: sigma * rng.gaussian(), north: sigma * rng.gaussian())
                    m.handle(fix(at: Double(k) * interval, c, accuracy: 2.45 * sigma), into: &events)
                }
                let transitions = events.filter { $0.kind == .enter || $0.kind == .exit }
                #expect(transitions.count <= 1, "every \(interval) s, σ \(sigma) seed \(seed): \(events.map(\.kind))")
            }
        }
    }

    /// Sparse fixes still decide: two fixes inside, half a minute or more apart, are a stay
    /// (entered and left, not inferred), and after a gap of more than 2 minutes one fix is.
    @Test(arguments: [30.0, 60.0, 90.0, 150.0]) func sparseFixesStillDecide(interval: Double) throws {
        var m = RegionMonitor()
        try m.add([Region(id: "r", center: origin, radius: 200)])
        let far = north(of: origin, metres: 1000), here = north(of: origin, metres: 20)
        let places = [far, far, here, here, far, far, far]
        var events: [RegionEvent] = []
        for (k, p) in places.enumerated() {
            m.handle(fix(at: Double(k) * interval, p, accuracy: 10), into: &events)
        }
        #expect(events.map(\.kind) == [.enter, .exit], "every \(interval) s: \(events)")
        #expect(events.allSatisfy { !$0.inferred })
        #expect(events.map(\.time) == [t0.adding(seconds: 2 * interval), t0.adding(seconds: 4 * interval)])
    }

    /// At 5 s, two fixes inside are too few to confirm, but the way between the sure-outside
    /// fixes either side passed through: the stay is inferred, not lost.
    @Test func aShortStayBetweenFixesFiveSecondsApartIsInferred() throws {
        var m = RegionMonitor()
        try m.add([Region(id: "r", center: origin, radius: 100)])
        let places = [-400.0, -200, 0, 50, 200, 400].map { north(of: origin, metres: $0) }
        var events: [RegionEvent] = []
        for (k, p) in places.enumerated() {
            m.handle(fix(at: Double(k) * 5, p, accuracy: 10), into: &events)
        }
        #expect(events.map(\.kind) == [.enter, .exit])
        #expect(events.allSatisfy { $0.inferred })
    }

    @Test(arguments: [5.0, 15.0, 30.0]) func slowWalkAcrossEntersOnceAndExitsOnce(sigma: Double) throws {
        var rng = SeededRandom(seed: 77 &+ UInt64(sigma))
        var m = RegionMonitor()
        try m.add([Region(id: "r", center: origin, radius: 300)])
        var events: [RegionEvent] = []
        // From 600 m south to 600 m north at 1.2 m/s.
        for s in 0..<1000 {
            let c = offset(origin, east: sigma * rng.gaussian(), north: -600 + 1.2 * Double(s) + sigma * rng.gaussian())
            m.handle(fix(at: Double(s), c, accuracy: 2.45 * sigma), into: &events)
        }
        #expect(events.map(\.kind) == [.enter, .exit], "σ \(sigma)")
        #expect(events.allSatisfy { !$0.inferred })
    }

    @Test func aFixTooInaccurateChangesNothing() throws {
        var m = RegionMonitor()
        try m.add([Region(id: "r", center: origin, radius: 100)])
        var events = run(&m, [fix(at: 0, north(of: origin, metres: 0), accuracy: 5)])
        #expect(m.state(of: "r") == .inside)
        // 2 km away but ±5 km: no exit; unknown accuracy: no exit.
        events += run(&m, [fix(at: 10, north(of: origin, metres: 2000), accuracy: 5000),
                           fix(at: 20, north(of: origin, metres: 2000), accuracy: nil)])
        #expect(events.isEmpty)
        #expect(m.state(of: "r") == .inside)
    }
}

@Suite struct RegionCrossingTests {
    @Test func twoFixesEitherSideOfASmallRegionSixtySecondsApartInferEnterAndExit() throws {
        var m = RegionMonitor()
        try m.add([Region(id: "small", center: origin, radius: 50)])
        let events = run(&m, [fix(at: 0, north(of: origin, metres: -600)), fix(at: 60, north(of: origin, metres: 600))])
        #expect(events.map(\.kind) == [.enter, .exit])
        #expect(events.allSatisfy { $0.inferred })
        // 1200 m in 60 s: the boundary at -50 m is reached after 550 m (27.5 s), left at 32.5 s.
        #expect(abs(events[0].time - t0.adding(seconds: 27.5)) < 0.01)
        #expect(abs(events[1].time - t0.adding(seconds: 32.5)) < 0.01)
        #expect(m.state(of: "small") == .outside)
    }

    @Test func noInferenceAcrossLongGapsOrImplausibleSpeeds() throws {
        var m = RegionMonitor()
        try m.add([Region(id: "small", center: origin, radius: 50)])
        #expect(run(&m, [fix(at: 0, north(of: origin, metres: -600)), fix(at: 300, north(of: origin, metres: 600))]).isEmpty)
        // 20 km in 100 s is 200 m/s.
        #expect(run(&m, [fix(at: 400, north(of: origin, metres: -10_000)), fix(at: 500, north(of: origin, metres: 10_000))]).isEmpty)
    }

    @Test func aFastPassWithOneFixInsideIsNotLost() throws {
        var m = RegionMonitor()
        try m.add([Region(id: "r", center: origin, radius: 40)])
        // 30 m/s at 1 Hz: one fix inside, too few to confirm, then out again.
        let fixes = (0..<10).map { fix(at: Double($0), north(of: origin, metres: -150 + 30 * Double($0))) }
        let events = run(&m, fixes)
        #expect(events.map(\.kind) == [.enter, .exit])
    }
}
