import Glibc
import LocationCore
import Testing

/// Inputs chosen to break the event rules: the poles and the antimeridian, fixes out of order,
/// invalid fixes, registration changes while the active set is capped.
@Suite struct AdversarialRegionTests {
    /// Two receivers behind one gpsd: a fix stamped half a second before the latest one is out of
    /// order, not the receiver's clock jumping back, and must not count as the single fix after a
    /// gap that decides a transition on its own (docs/regions.md, "Hysteresis").
    @Test func anOutOfOrderFixDoesNotBypassConfirmation() throws {
        var m = RegionMonitor()
        try m.add([Region(id: "r", center: origin, radius: 300)])
        var fixes = (0...10).map { fix(at: Double($0), north(of: origin, metres: 250), accuracy: 10) }
        // One wild fix 200 m outside, from the receiver that lags.
        fixes.append(fix(at: 9.5, north(of: origin, metres: 500), accuracy: 10))
        fixes += (11...20).map { fix(at: Double($0), north(of: origin, metres: 250), accuracy: 10) }
        let events = run(&m, fixes)
        #expect(events.isEmpty, "\(events.map(\.kind))")
        #expect(m.state(of: "r") == .inside)
    }

    /// The same wild fix in order changes nothing either (the reference for the test above).
    @Test func aWildFixInOrderChangesNothing() throws {
        var m = RegionMonitor()
        try m.add([Region(id: "r", center: origin, radius: 300)])
        var fixes = (0...10).map { fix(at: Double($0), north(of: origin, metres: 250), accuracy: 10) }
        fixes.append(fix(at: 10.5, north(of: origin, metres: 500), accuracy: 10))
        fixes += (11...20).map { fix(at: Double($0), north(of: origin, metres: 250), accuracy: 10) }
        #expect(run(&m, fixes).isEmpty)
    }

    /// A device standing on a boundary with two receivers whose reports interleave slightly out
    /// of order: still at most one transition an hour.
    @Test func interleavedReceiversOnTheBoundaryFlapAtMostOnce() throws {
        var rng = SeededRandom(seed: 4242)
        var m = RegionMonitor()
        try m.add([Region(id: "r", center: origin, radius: 300)])
        let spot = north(of: origin, metres: 300)
        var events: [RegionEvent] = []
        let sigma = 15.0
        for s in 0..<3600 {
            for lag in [0.0, -0.2] {  // receiver B's report of the same second arrives stamped earlier
                let c = offset(spot, east: sigma * rng.gaussian(), north: sigma * rng.gaussian())
                m.handle(fix(at: Double(s) + lag, c, accuracy: 2.45 * sigma), into: &events)
            }
        }
        let transitions = events.filter { $0.kind == .enter || $0.kind == .exit }
        #expect(transitions.count <= 1, "\(transitions.count) transitions")
    }

    /// A receiver clock that really jumps back (a minute or more) is still a gap: the next fix
    /// decides alone, as documented.
    @Test func aRealClockJumpBackIsStillAGap() throws {
        var m = RegionMonitor()
        try m.add([Region(id: "r", center: origin, radius: 300)])
        var fixes = (0...10).map { fix(at: 3600 + Double($0), north(of: origin, metres: 250), accuracy: 10) }
        fixes.append(fix(at: 100, north(of: origin, metres: 2000), accuracy: 10))
        let events = run(&m, fixes)
        #expect(events.map(\.kind) == [.exit])
    }

    /// A fix without a valid position changes nothing: the fixes either side of it still infer
    /// the pass between them.
    @Test func anInvalidFixBetweenTwoOutsideFixesDoesNotHideAPass() throws {
        var m = RegionMonitor()
        try m.add([Region(id: "small", center: origin, radius: 50)])
        let bad = Fix(time: t0.adding(seconds: 30), coordinate: Coordinate(latitude: .nan, longitude: 13),
                      horizontalAccuracy: 5)
        let events = run(&m, [fix(at: 0, north(of: origin, metres: -600)), bad, fix(at: 60, north(of: origin, metres: 600))])
        #expect(events.map(\.kind) == [.enter, .exit])
    }

    /// The capped monitor after an invalid fix: the jump from the last real position must still
    /// be searched for crossed boundaries.
    @Test func anInvalidFixDoesNotHideACrossedRegionFromTheCappedMonitor() throws {
        let (outside, inside, regions) = RegionRotationTests.bigRegionBehindSmallOnes()
        var all = RegionMonitor(limits: .init(maxActive: nil))
        var capped = RegionMonitor(limits: .init(maxActive: 20))
        try all.add(regions); try capped.add(regions)
        var fixes = (0..<30).map { fix(at: Double($0), outside) }
        fixes.append(Fix(time: t0.adding(seconds: 30), coordinate: Coordinate(latitude: 200, longitude: 0), horizontalAccuracy: 5))
        fixes += (31..<90).map { fix(at: Double($0), inside) }
        let a = run(&all, fixes), b = run(&capped, fixes)
        #expect(a.contains { $0.region == "big" && $0.kind == .enter })
        #expect(a == b)
    }

    /// A region centred on the South Pole (a station): a vehicle that crosses it between two
    /// sparse fixes on opposite meridians passes through its centre.
    @Test func aPassOverThePoleIsInferred() throws {
        let pole = Coordinate(latitude: -90, longitude: 0)
        var m = RegionMonitor()
        try m.add([Region(id: "station", center: pole, radius: 200)])
        let a = Coordinate(latitude: -90 + 400 / (Geodesy.earthRadius * .pi / 180), longitude: 0)
        let b = Coordinate(latitude: a.latitude, longitude: 180)
        #expect(abs(Geodesy.distance(a, pole) - 400) < 1)
        // 800 m in 60 s: 13 m/s.
        let events = run(&m, [fix(at: 0, a), fix(at: 60, b)])
        #expect(events.map(\.kind) == [.enter, .exit])
        for e in events {
            #expect(e.coordinate.isValid)
            #expect(Geodesy.distance(e.coordinate, pole) < 210, "\(e.coordinate)")
        }
        if events.count == 2 {
            #expect(abs(events[0].time - t0.adding(seconds: 15)) < 0.5)
            #expect(abs(events[1].time - t0.adding(seconds: 45)) < 0.5)
        }
    }

    /// A pass between two fixes near the North Pole on meridians 90° apart, off centre.
    @Test func aPassNearTheNorthPoleIsInferredWithValidPositions() throws {
        let m0 = Geodesy.earthRadius * Double.pi / 180
        let centre = Coordinate(latitude: 90 - 300 / m0, longitude: 45)   // 300 m from the pole
        var m = RegionMonitor()
        try m.add([Region(id: "camp", center: centre, radius: 150)])
        let a = Coordinate(latitude: 90 - 600 / m0, longitude: 0)
        let b = Coordinate(latitude: 90 - 600 / m0, longitude: 90)
        // The chord a→b passes 424 m from the pole along the meridian 45°, 124 m from the centre.
        let events = run(&m, [fix(at: 0, a), fix(at: 60, b)])
        #expect(events.map(\.kind) == [.enter, .exit])
        for e in events { #expect(Geodesy.distance(e.coordinate, centre) - 150 < 1, "\(e.coordinate)") }
        // Half a chord of √(150² − 124²) ≈ 84 m either side of the middle, on an 849 m segment.
        if events.count == 2 {
            #expect(abs(events[0].time - t0.adding(seconds: 24.1)) < 0.5)
            #expect(abs(events[1].time - t0.adding(seconds: 35.9)) < 0.5)
        }
    }

    /// A pass across the antimeridian: enter and exit inferred, positions valid.
    @Test func aPassAcrossTheAntimeridianIsInferred() throws {
        let centre = Coordinate(latitude: -16.8, longitude: 180)
        var m = RegionMonitor()
        try m.add([Region(id: "meridian", center: centre, radius: 50)])
        let a = offset(centre, east: -600, north: 0), b = offset(centre, east: 600, north: 0)
        let events = run(&m, [fix(at: 0, a), fix(at: 60, Coordinate(latitude: b.latitude, longitude: b.longitude - 360))])
        #expect(events.map(\.kind) == [.enter, .exit])
        for e in events { #expect(e.coordinate.isValid, "\(e.coordinate)") }
    }

    /// Walking across a region on the antimeridian, at 1 Hz.
    @Test func aWalkAcrossTheAntimeridianEntersAndExitsOnce() throws {
        let centre = Coordinate(latitude: 65.5, longitude: -180)
        var m = RegionMonitor()
        try m.add([Region(id: "r", center: centre, radius: 100)])
        var fixes: [Fix] = []
        for s in 0..<300 {
            var c = offset(centre, east: -200 + 1.4 * Double(s), north: 10)
            if c.longitude < -180 { c.longitude += 360 }
            fixes.append(fix(at: Double(s), c))
        }
        #expect(run(&m, fixes).map(\.kind) == [.enter, .exit])
    }

    /// Rotation around the antimeridian and the pole: the capped monitor equals the unlimited one.
    @Test(arguments: [Coordinate(latitude: 0, longitude: 180), Coordinate(latitude: 89.97, longitude: 0)])
    func cappedEqualsUnlimitedAtTheSeams(centre: Coordinate) throws {
        var rng = SeededRandom(seed: 99)
        var regions: [Region] = []
        for i in 0..<300 {
            var c = offset(centre, east: rng.uniform(-3000...3000), north: rng.uniform(-3000...3000))
            if c.latitude > 90 { c.latitude = 180 - c.latitude; c.longitude += 180 }
            c.longitude = c.longitude > 180 ? c.longitude - 360 : (c.longitude < -180 ? c.longitude + 360 : c.longitude)
            regions.append(Region(id: "r\(i)", center: c, radius: rng.uniform(20...400), notifyInitialState: i % 4 == 0))
        }
        var all = RegionMonitor(limits: .init(maxActive: nil))
        var capped = RegionMonitor(limits: .init(maxActive: 20))
        try all.add(regions); try capped.add(regions)
        var a: [RegionEvent] = [], b: [RegionEvent] = []
        var heading = 0.0
        var p = centre
        var t = 0.0
        for _ in 0..<1500 {
            heading += 0.2 * rng.gaussian()
            let step = rng.uniform(0...1) < 0.05 ? 40.0 : 1
            p = offset(p, east: 8 * step * sin(heading), north: 8 * step * cos(heading))
            if p.latitude > 90 { p.latitude = 180 - p.latitude; p.longitude += 180; heading += .pi }
            p.longitude = p.longitude > 180 ? p.longitude - 360 : (p.longitude < -180 ? p.longitude + 360 : p.longitude)
            // Keep within the regions' area.
            if Geodesy.distance(p, centre) > 3500 { heading += .pi }
            t += step
            let f = fix(at: t, p, accuracy: 8)
            all.handle(f, into: &a)
            capped.handle(f, into: &b)
        }
        #expect(a.count > 10)
        #expect(a == b)
    }

    /// Adding and removing regions while the device moves through a dense set: the capped
    /// monitor still equals the unlimited one.
    @Test func registrationChangesMidStreamDoNotChangeTheEvents() throws {
        var rng = SeededRandom(seed: 7)
        var all = RegionMonitor(limits: .init(maxActive: nil, maxRegistered: 100_000))
        var capped = RegionMonitor(limits: .init(maxActive: 20, maxRegistered: 100_000))
        var ids: [String] = []
        var a: [RegionEvent] = [], b: [RegionEvent] = []
        var p = origin
        var heading = 0.0
        for s in 0..<3000 {
            if s % 100 == 0 {
                var batch: [Region] = []
                for j in 0..<30 {
                    let c = offset(p, east: rng.uniform(-3000...3000), north: rng.uniform(-3000...3000))
                    batch.append(Region(id: "s\(s)-\(j)", center: c, radius: rng.uniform(30...800),
                                        notifyInitialState: j % 3 == 0, dwell: j % 5 == 0 ? 20 : nil))
                }
                try all.add(batch); try capped.add(batch)
                ids += batch.map(\.id)
            }
            if s % 100 == 50, ids.count > 40 {
                var doomed: [String] = []
                for _ in 0..<15 { doomed.append(ids.remove(at: Int(rng.next() % UInt64(ids.count)))) }
                try all.remove(doomed); try capped.remove(doomed)
            }
            heading += 0.1 * rng.gaussian()
            p = offset(p, east: 12 * sin(heading), north: 12 * cos(heading))
            let f = fix(at: Double(s), offset(p, east: 4 * rng.gaussian(), north: 4 * rng.gaussian()), accuracy: 10)
            all.handle(f, into: &a)
            capped.handle(f, into: &b)
            if a != b { Issue.record("differ at \(s): \(a.suffix(2)) vs \(b.suffix(2))"); return }
        }
        #expect(a.filter { $0.kind == .enter }.count > 10)
    }

    /// Rotation under a hostile clock: copies of an epoch, fixes out of order, clock jumps back
    /// of minutes, long gaps, fixes of unknown or poor accuracy and invalid ones, mixed into a
    /// drive through 1,000 regions: the capped monitor still equals the unlimited one.
    @Test(arguments: [UInt64(31), 32]) func cappedEqualsUnlimitedUnderAHostileClock(seed: UInt64) throws {
        var rng = SeededRandom(seed: seed)
        let regions = RegionRotationTests.regions(&rng, count: 1000)
        var all = RegionMonitor(limits: .init(maxActive: nil, maxRegistered: 100_000))
        var capped = RegionMonitor(limits: .init(maxActive: 20, maxRegistered: 100_000))
        try all.add(regions); try capped.add(regions)
        var a: [RegionEvent] = [], b: [RegionEvent] = []
        var p = offset(origin, east: rng.uniform(-8000...8000), north: rng.uniform(-8000...8000))
        var heading = rng.uniform(0...(2 * Double.pi))
        var t = 0.0, latest = 0.0
        for i in 0..<2500 {
            heading += 0.15 * rng.gaussian()
            let step = rng.uniform(0...1) < 0.05 ? rng.uniform(4...150) : 1
            p = offset(p, east: 25 * step * sin(heading), north: 25 * step * cos(heading))
            t += step
            var stamp = t
            let roll = rng.uniform(0...1)
            if roll < 0.05 { stamp = latest }                                 // a copy of the last epoch
            else if roll < 0.10 { stamp = latest - rng.uniform(0.1...30) }    // out of order
            else if roll < 0.11 { t -= rng.uniform(60...3000); stamp = t }    // the clock jumps back
            latest = max(latest, stamp)
            var f = fix(at: stamp, offset(p, east: 5 * rng.gaussian(), north: 5 * rng.gaussian()),
                        accuracy: rng.uniform(0...1) < 0.05 ? nil : rng.uniform(3...(rng.uniform(0...1) < 0.1 ? 400 : 20)))
            if rng.uniform(0...1) < 0.01 { f.coordinate.latitude = .nan }
            all.handle(f, into: &a)
            capped.handle(f, into: &b)
            if a != b { Issue.record("seed \(seed): differ at fix \(i): \(a.suffix(2)) vs \(b.suffix(2))"); return }
        }
        #expect(a.filter { $0.kind == .enter }.count >= 10)
    }

    /// Many regions with the same boundary distance (copies of one circle, and concentric
    /// rings): ties at the cap must not lose events.
    @Test func tiesAtTheCapLoseNothing() throws {
        var regions: [Region] = []
        for i in 0..<40 { regions.append(Region(id: "same\(i)", center: origin, radius: 200)) }
        for i in 0..<40 { regions.append(Region(id: "ring\(i)", center: origin, radius: 300 + Double(i % 4) * 100)) }
        var all = RegionMonitor(limits: .init(maxActive: nil))
        var capped = RegionMonitor(limits: .init(maxActive: 20))
        try all.add(regions); try capped.add(regions)
        var fixes: [Fix] = []
        for s in 0..<1000 { fixes.append(fix(at: Double(s), north(of: origin, metres: -900 + 1.8 * Double(s)))) }
        let a = run(&all, fixes), b = run(&capped, fixes)
        #expect(a.filter { $0.kind == .enter }.count == 80)
        #expect(a == b)
    }

    /// Same timestamp twice with a different position: the second copy is ignored, also by the
    /// confirmation count.
    @Test func copiesOfOneEpochCountOnceTowardsATransition() throws {
        var m = RegionMonitor()
        try m.add([Region(id: "r", center: origin, radius: 300)])
        var fixes = (0...5).map { fix(at: Double($0), north(of: origin, metres: 100)) }
        for s in 6...7 {
            fixes.append(fix(at: Double(s), north(of: origin, metres: 600)))
            fixes.append(fix(at: Double(s), north(of: origin, metres: 600)))
        }
        #expect(run(&m, fixes).isEmpty)
        #expect(run(&m, [fix(at: 8, north(of: origin, metres: 600))]).map(\.kind) == [.exit])
    }
}

@Suite struct AdversarialVisitTests {
    /// A stay on the antimeridian (Taveuni, Fiji): the visit's centre is a valid coordinate.
    @Test func aVisitOnTheAntimeridianHasAValidCentre() {
        var d = VisitDetector()
        var got: [Visit] = []
        let place = Coordinate(latitude: -16.8, longitude: 180)
        for s in 0..<600 {
            // The first fix 1 m west of the meridian, the rest spread up to 20 m east of it.
            let east = s == 0 ? -1.0 : Double(s % 21)
            var c = offset(place, east: east, north: Double(s % 7))
            if c.longitude > 180 { c.longitude -= 360 }
            d.offer(fix(at: Double(s), c)) { got.append($0) }
        }
        // Far away to end it.
        for s in 600..<640 { d.offer(fix(at: Double(s), offset(place, east: 0, north: 5000))) { got.append($0) } }
        #expect(got.map(\.kind) == [.arrival, .departure])
        for v in got {
            #expect(v.coordinate.isValid, "\(v.coordinate)")
            #expect(Geodesy.distance(v.coordinate, place) < 25)
        }
    }

    /// A stay at the South Pole station.
    @Test func aVisitAtThePoleHasAValidCentre() {
        var d = VisitDetector()
        var got: [Visit] = []
        let m = Geodesy.earthRadius * Double.pi / 180
        for s in 0..<600 {
            let c = Coordinate(latitude: -90 + Double(s % 5 + 1) / m, longitude: Double((s * 37) % 360) - 180)
            d.offer(fix(at: Double(s), c)) { got.append($0) }
        }
        #expect(got.map(\.kind) == [.arrival])
        for v in got { #expect(v.coordinate.isValid, "\(v.coordinate)") }
    }
}

@Suite struct AdversarialEngineTests {
    /// NaN and out-of-range values the shells never pass: the engine ignores the fix rather
    /// than trapping in the privacy grid, and keeps every detector's state clean.
    @Test func aFixWithoutARealPositionIsNoFix() {
        var e = Engine()
        let id = SubscriberID(1)
        _ = e.handle(.subscribe(id, SubscriptionOptions(events: [.location, .visits, .significant])))
        for c in [Coordinate(latitude: .nan, longitude: 13), Coordinate(latitude: 52, longitude: .infinity),
                  Coordinate(latitude: 91, longitude: 13), Coordinate(latitude: 52, longitude: -180.5)] {
            let out = e.handle(.fix(Fix(time: t0, coordinate: c, horizontalAccuracy: 5)))
            #expect(out.isEmpty, "\(c): \(out)")
        }
        #expect(e.sourceState == .disconnected)
        #expect(e.lastFix == nil)
        let out = e.handle(.fix(fix(at: 1, origin)))
        #expect(out.locations(for: id).count == 1)
    }

    /// A NaN accuracy is unknown: it neither passes a gate nor spoils the stay's centre.
    @Test func aNaNAccuracyIsUnknown() {
        var e = Engine()
        let id = SubscriberID(1)
        _ = e.handle(.subscribe(id, SubscriptionOptions(desiredAccuracy: 50, events: [.location, .visits])))
        var out: [Delivery] = []
        for s in 0..<400 {
            let a: Double = s % 50 == 7 ? .nan : (s % 50 == 8 ? -1 : 8)
            e.handle(.fix(fix(at: Double(s), north(of: origin, metres: Double(s % 4)), accuracy: a)), into: &out)
        }
        #expect(out.locations(for: id).count == 384)
        let visits = out.compactMap { d -> Visit? in if case .visit(let v) = d.event { return v }; return nil }
        #expect(visits.map(\.kind) == [.arrival])
        #expect(visits.allSatisfy { $0.coordinate.isValid && $0.horizontalAccuracy.isFinite })
    }
}
