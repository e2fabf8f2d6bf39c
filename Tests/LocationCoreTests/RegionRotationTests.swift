import Glibc
import LocationCore
import Testing

/// Rotation must be invisible: with at most 20 regions evaluated per fix, a program receives
/// exactly the events it would receive if every region were evaluated on every fix.
@Suite struct RegionRotationTests {
    /// Random regions: half uniform over a 40 km square, half in dense clusters; radii
    /// 50 m – 5 km, log-uniform.
    static func regions(_ rng: inout SeededRandom, count: Int) -> [Region] {
        var out: [Region] = []
        let clusters = (0..<6).map { _ in offset(origin, east: rng.uniform(-15_000...15_000), north: rng.uniform(-15_000...15_000)) }
        for i in 0..<count {
            let c: Coordinate
            if i % 2 == 0 {
                c = offset(origin, east: rng.uniform(-20_000...20_000), north: rng.uniform(-20_000...20_000))
            } else {
                c = offset(clusters[i % clusters.count], east: 400 * rng.gaussian(), north: 400 * rng.gaussian())
            }
            let radius = exp(rng.uniform(log(50)...log(5000)))
            out.append(Region(id: "r\(i)", center: c, radius: radius, notifyInitialState: i % 3 == 0,
                              dwell: i % 5 == 0 ? rng.uniform(0...300) : nil))
        }
        return out
    }

    /// A random trajectory: walking (1.4 m/s) or driving (30 m/s) legs, 1 Hz fixes with 3–8 m
    /// noise, and gaps of 5–200 s without fixes (the device keeps moving).
    static func trajectory(_ rng: inout SeededRandom, fixes count: Int) -> [Fix] {
        var out: [Fix] = []
        var position = offset(origin, east: rng.uniform(-8000...8000), north: rng.uniform(-8000...8000))
        var heading = rng.uniform(0...(2 * Double.pi))
        var t = 0.0
        var speed = 30.0
        while out.count < count {
            if rng.uniform(0...1) < 0.02 { speed = rng.uniform(0...1) < 0.5 ? 1.4 : 30 }
            heading += 0.15 * rng.gaussian()
            let step = rng.uniform(0...1) < 0.03 ? rng.uniform(5...200) : 1
            position = offset(position, east: speed * step * sin(heading), north: speed * step * cos(heading))
            t += step
            let sigma = rng.uniform(3...8)
            let noisy = offset(position, east: sigma * rng.gaussian(), north: sigma * rng.gaussian())
            out.append(fix(at: t, noisy, accuracy: 2.45 * sigma))
        }
        return out
    }

    @Test(arguments: [(UInt64(11), 1500, 1200), (UInt64(12), 1000, 2000), (UInt64(13), 2500, 600)])
    func cappedStreamEqualsUncappedStream(seed: UInt64, regionCount: Int, fixCount: Int) throws {
        var rng = SeededRandom(seed: seed)
        let regions = Self.regions(&rng, count: regionCount)
        let fixes = Self.trajectory(&rng, fixes: fixCount)
        var all = RegionMonitor(limits: .init(maxActive: nil, maxRegistered: 100_000))
        var capped = RegionMonitor(limits: .init(maxActive: 20, maxRegistered: 100_000))
        try all.add(regions)
        try capped.add(regions)
        var a: [RegionEvent] = [], b: [RegionEvent] = []
        var evaluated = 0
        for (i, f) in fixes.enumerated() {
            all.handle(f, into: &a)
            capped.handle(f, into: &b)
            evaluated += capped.evaluatedLastFix
            if a.count != b.count || a.last != b.last {
                Issue.record("seed \(seed): streams differ at fix \(i) (\(f.time.nanoseconds)): \(a.suffix(3)) vs \(b.suffix(3))")
                return
            }
        }
        #expect(a == b, "seed \(seed)")
        let transitions = a.filter { $0.kind == .enter || $0.kind == .exit }
        #expect(transitions.count >= 20, "seed \(seed): the trajectory should cross many boundaries, got \(transitions.count)")
        // Rotation must actually save work: on average far fewer than all regions per fix.
        let mean = Double(evaluated - regionCount) / Double(fixes.count)
        #expect(mean < Double(regionCount) / 10, "seed \(seed): \(mean) regions evaluated per fix on average")
        print("rotation seed \(seed): \(a.count) events (\(a.filter(\.inferred).count) inferred), \(capped.reranks) re-ranks, \(mean) regions evaluated per fix")
    }

    /// Fixes of unknown accuracy (an RMC-only receiver; here the first 300, then every tenth)
    /// decide no region's side, so a region whose state is unknown is not evaluated at them:
    /// all 2,000 were, at every such fix. The events stay those of the unlimited monitor.
    @Test func fixesOfUnknownAccuracySkipUndecidedRegions() throws {
        var rng = SeededRandom(seed: 21)
        let regions = Self.regions(&rng, count: 2000)
        var fixes = Self.trajectory(&rng, fixes: 1500)
        for i in fixes.indices where i < 300 || i % 10 == 0 { fixes[i].horizontalAccuracy = nil }
        var all = RegionMonitor(limits: .init(maxActive: nil, maxRegistered: 100_000))
        var capped = RegionMonitor(limits: .init(maxActive: 20, maxRegistered: 100_000))
        try all.add(regions)
        try capped.add(regions)
        var a: [RegionEvent] = [], b: [RegionEvent] = []
        var mostBeforeAnAccuracy = 0
        for (i, f) in fixes.enumerated() {
            all.handle(f, into: &a)
            capped.handle(f, into: &b)
            // The first fix ranks (it evaluates the regions its segment could cross: none).
            if i > 0 && i < 300 { mostBeforeAnAccuracy = max(mostBeforeAnAccuracy, capped.evaluatedLastFix) }
        }
        #expect(a == b)
        #expect(a.contains { $0.kind == .enter || $0.kind == .exit })
        #expect(mostBeforeAnAccuracy < 200, "\(mostBeforeAnAccuracy) regions evaluated at a fix of unknown accuracy")
    }

    @Test func indexFindsTheSameNearestBoundariesAsBruteForce() {
        var rng = SeededRandom(seed: 21)
        let regions = Self.regions(&rng, count: 3000)
        let index = RegionIndex(centers: regions.map(\.center), radii: regions.map(\.radius))
        for _ in 0..<200 {
            let p = offset(origin, east: rng.uniform(-25_000...25_000), north: rng.uniform(-25_000...25_000))
            let within = rng.uniform(0...2000)
            let brute = regions.enumerated().map { (abs(Geodesy.distance(p, $0.element.center) - $0.element.radius), $0.offset) }
                .sorted { $0.0 != $1.0 ? $0.0 < $1.0 : $0.1 < $1.1 }
            let found = index.nearest(to: p, k: 21, within: within)
            let expected = brute.enumerated().filter { $0.offset < 21 || $0.element.0 <= within }.map(\.element.1)
            // Keys agree to rounding; compare the sets (ties may order differently by a ulp).
            #expect(Set(found.map(\.slot)).symmetricDifference(expected).allSatisfy { s in
                let k = abs(Geodesy.distance(p, regions[s].center) - regions[s].radius)
                return abs(k - brute[20].0) < 1e-6 || abs(k - within) < 1e-6
            })
            #expect(abs(found[20].key - brute[20].0) < 1e-6)
        }
    }

    /// A place outside a big region and one 2 km on inside it, each amid 25 small regions
    /// nearer than the big one's boundary: the big one is active at neither.
    static func bigRegionBehindSmallOnes() -> (outside: Coordinate, inside: Coordinate, regions: [Region]) {
        let outside = offset(origin, east: -1000, north: 0)
        let inside = offset(origin, east: 1000, north: 0)
        var regions = [Region(id: "big", center: offset(origin, east: 5000, north: 0), radius: 5000)]
        for (name, place) in [("here", outside), ("there", inside)] {
            for i in 0..<25 {
                regions.append(Region(id: "\(name)\(i)", center: offset(place, east: Double(i % 5) * 150 - 300, north: Double(i / 5) * 150 - 300), radius: 50))
            }
        }
        return (outside, inside, regions)
    }

    /// The receiver's clock jumps back while the device moves into a large region past many
    /// small ones: the time gap does not shrink the search for crossed boundaries, and the
    /// capped monitor still enters.
    @Test func aBackwardsClockJumpDoesNotHideACrossedRegion() throws {
        let (outside, inside, regions) = Self.bigRegionBehindSmallOnes()
        var all = RegionMonitor(limits: .init(maxActive: nil))
        var capped = RegionMonitor(limits: .init(maxActive: 20))
        try all.add(regions); try capped.add(regions)
        var fixes = (0..<60).map { fix(at: Double($0), outside) }
        fixes += (-30..<30).map { fix(at: Double($0), inside) }  // 89 s back in time, 2 km on
        let a = run(&all, fixes), b = run(&capped, fixes)
        #expect(a.contains { $0.region == "big" && $0.kind == .enter })
        #expect(a == b)
    }

    @Test func regionsLeavingAndReturningToTheActiveSetKeepTheirState() throws {
        // 30 regions along a line; the device drives past all of them and back.
        var regions: [Region] = []
        for i in 0..<30 { regions.append(Region(id: "r\(i)", center: offset(origin, east: Double(i) * 1000, north: 0), radius: 200)) }
        var all = RegionMonitor(limits: .init(maxActive: nil))
        var capped = RegionMonitor(limits: .init(maxActive: 3))
        try all.add(regions); try capped.add(regions)
        var fixes: [Fix] = []
        for s in 0..<2000 { fixes.append(fix(at: Double(s), offset(origin, east: -500 + 15 * Double(s), north: 50))) }
        for s in 0..<2000 { fixes.append(fix(at: Double(2000 + s), offset(origin, east: 29_500 - 15 * Double(s), north: 50))) }
        let a = run(&all, fixes), b = run(&capped, fixes)
        #expect(a == b)
        #expect(a.filter { $0.kind == .enter }.count == 60)
    }
}
