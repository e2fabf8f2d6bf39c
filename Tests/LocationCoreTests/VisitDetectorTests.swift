@testable import LocationCore
import Testing

/// A point `north`/`east` metres from `origin` (small offsets).
func offset(_ north: Double, _ east: Double) -> Coordinate {
    let m = Geodesy.earthRadius * Double.pi / 180
    return Coordinate(latitude: origin.latitude + north / m,
                      longitude: origin.longitude + east / (m * cos(Geodesy.radians(origin.latitude))))
}

/// Deterministic ±amplitude jitter that does not repeat with a short period.
func jitter(_ i: Int, _ amplitude: Double) -> (Double, Double) {
    let a = Double(i) * 2.399963  // golden angle
    let r = amplitude * Double((i * 7919) % 101) / 100
    return (r * cos(a), r * sin(a))
}

struct VisitRecorder {
    var detector: VisitDetector
    var events: [(at: Timestamp, visit: Visit)] = []
    init(_ p: VisitDetector.Parameters = .init()) { detector = VisitDetector(parameters: p) }
    mutating func feed(_ f: Fix) {
        var got: [Visit] = []
        detector.offer(f) { got.append($0) }
        for v in got { events.append((f.time, v)) }
    }
    /// 1 Hz fixes at a place (with small jitter) for `seconds`, starting at `from`.
    mutating func stay(at north: Double, _ east: Double, from: Double, seconds: Int, jitterMetres: Double = 4, accuracy: Double = 8) {
        for i in 0..<seconds {
            let (dn, de) = jitter(i + Int(from), jitterMetres)
            feed(fix(at: from + Double(i), offset(north + dn, east + de), accuracy: accuracy))
        }
    }
    var arrivals: [Visit] { events.map(\.visit).filter { $0.kind == .arrival } }
    var departures: [Visit] { events.map(\.visit).filter { $0.kind == .departure } }
}

@Suite struct VisitDetectorTests {
    @Test func arrivalIsEmittedAfterTheDwellAndBackDatedToTheFirstFix() {
        var r = VisitRecorder()
        r.stay(at: 0, 0, from: 0, seconds: 300)     // fixes at 0…299: spans 299 s
        #expect(r.events.isEmpty, "not certain before the dwell")
        r.stay(at: 0, 0, from: 300, seconds: 5)
        #expect(r.arrivals.count == 1)
        #expect(r.events.first?.at == t0.adding(seconds: 300))
        #expect(r.arrivals.first?.arrival == t0)
        #expect(r.arrivals.first?.departure == nil)
        let centre = r.arrivals.first!.coordinate
        #expect(Geodesy.distance(centre, origin) < 3)
    }

    /// 200 s at one spot, a slow 250 m walk the unconfirmed stay follows, then an hour at the
    /// destination: the early-fix buffer filled with the spot and the walk must make room for the
    /// destination's fixes, or the visit there is never reported.
    @Test func aVisitAfterASlowWalkFromAShortStopIsReported() {
        for walk in [120.0, 250, 280] {
            var r = VisitRecorder()
            r.stay(at: 0, 0, from: 0, seconds: 200)
            let steps = Int(walk / 1.4)
            for i in 0..<steps { r.feed(fix(at: 200 + Double(i), offset(1.4 * Double(i), 0))) }
            let reached = 200 + Double(steps)
            r.stay(at: walk, 0, from: reached, seconds: 3600)
            #expect(r.arrivals.count == 1, "walk \(walk) m")
            guard let visit = r.arrivals.first else { continue }
            #expect(Geodesy.distance(visit.coordinate, offset(walk, 0)) < 10, "walk \(walk) m")
            // Back-dated to the stay's first fix near the destination: the last 50 m of the walk
            // (36 s) plus one 4.7 s step at most.
            let arrival = visit.arrival - t0
            #expect(arrival >= reached - 50 && arrival <= reached + 5, "walk \(walk) m: arrival at \(arrival), reached at \(reached)")
        }
    }

    /// Six minutes pacing to and fro within 30 m of a spot (the receiver reports a walking
    /// speed at every fix, or at one in twelve), then an hour sitting there: the early-fix
    /// buffer, filled with the pacing, must make room for the still fixes — its oldest gives
    /// way when it moved, or when more than a tenth of them did — or the visit is never
    /// reported. It is back-dated to the pacing's last minute and a half at most (since the
    /// arrival, at most a tenth of the fixes moved).
    @Test(arguments: [1, 12])
    func aVisitAfterPacingAboutTheSpotIsReported(every: Int) {
        var r = VisitRecorder()
        for i in 0..<360 {
            var f = fix(at: Double(i), offset(30 * sin(Double(i) * 2 * Double.pi / 120), 0))
            f.speed = i % every == 0 ? 1.5 : 0.2
            r.feed(f)
        }
        for i in 360..<3960 {
            let (dn, de) = jitter(i, 4)
            var f = fix(at: Double(i), offset(dn, de))
            f.speed = 0.1
            r.feed(f)
        }
        #expect(r.arrivals.count == 1)
        if let a = r.arrivals.first { #expect(a.arrival - t0 >= 270 && a.arrival - t0 <= 365, "arrival at \(a.arrival - t0)") }
    }

    /// A one-hour visit, then the receiver's clock jumps back 52 minutes (gpsd's bt451 log) while
    /// the device goes 3 km away for 40 minutes: the departure and the next arrival are
    /// reported, and every event's times stay in order.
    @Test func aBackwardsClockJumpDoesNotSilenceVisits() {
        var r = VisitRecorder()
        r.stay(at: 0, 0, from: 0, seconds: 3600)
        r.stay(at: 3000, 0, from: 3600 - 3120, seconds: 2400)
        #expect(r.arrivals.count == 2)
        #expect(r.departures.count == 1)
        let times = r.events.flatMap { [$0.visit.arrival] + ($0.visit.departure.map { [$0] } ?? []) }
        #expect(r.departures.first.map { $0.departure! >= $0.arrival } == true)
        #expect(r.arrivals.count == 2 && r.arrivals[1].arrival > r.departures[0].departure!, "\(times)")
    }

    /// gpsd reports an epoch several times while it fills in: repeated copies of one outside
    /// fix count once towards the three a departure needs.
    @Test func copiesOfOneEpochCountOnceTowardsADeparture() {
        var p = VisitDetector.Parameters()
        p.farDepartureSeconds = 10
        var r = VisitRecorder(p)
        r.stay(at: 0, 0, from: 0, seconds: 400)
        #expect(r.arrivals.count == 1)
        let far = offset(500, 0)
        for t in [500.0, 500, 500, 510] { r.feed(fix(at: t, far)) }
        #expect(r.departures.isEmpty, "two copies of the fix at 500 s counted as two outside fixes")
        r.feed(fix(at: 511, far))
        #expect(r.departures.count == 1)
    }

    /// Two receivers behind one gpsd, one's epochs 0.1 s behind the other's: the older fixes are
    /// out of order, not clock jumps; the detector's clock does not run ahead, and a 143 s stop
    /// is no visit.
    @Test func interleavedReceiversDoNotMoveTheClock() {
        var r = VisitRecorder()
        for i in 0..<143 {
            r.feed(fix(at: Double(i), origin))
            r.feed(fix(at: Double(i) - 0.1, origin))
        }
        for i in 143..<300 { r.feed(fix(at: Double(i), offset(3000, 0))) }
        #expect(r.arrivals.isEmpty)
        #expect(r.detector.clockShift == 0)
    }

    @Test func arrivalAfterAnApproachIsBackDatedToNearThePlace() {
        var r = VisitRecorder()
        // Walk 1.4 m/s from 400 m south to the place, arriving at t = 286 s, then stay 10 min.
        for i in 0..<286 { r.feed(fix(at: Double(i), offset(-400 + 1.4 * Double(i), 0))) }
        r.stay(at: 0, 0, from: 286, seconds: 600)
        #expect(r.arrivals.count == 1)
        let arrival = r.arrivals[0].arrival - t0
        // The stay's first fix: within the 50 m core of a centre that settles within metres of
        // the place (36 s of walking), plus one 4.7 s sample step and the centre's offset: ≤ 50 s.
        #expect(arrival <= 286 && arrival >= 286 - 50, "arrival \(arrival) s after the walk began")
        // Emitted once five minutes of the stay are known still: the fixes of the last minute of
        // the walk, which the three-minute rule marks only as creeping, and up to a minute at
        // the place after it, do not count.
        #expect(r.events[0].at - t0 <= 286 + 300 + 65)
    }

    @Test func aShortStopBelowTheDwellIsNoVisit() {
        var r = VisitRecorder()
        r.stay(at: 0, 0, from: 0, seconds: 290)
        for i in 1...120 { r.feed(fix(at: 290 + Double(i), offset(Double(i) * 10, 0))) }  // drive away
        r.stay(at: 1200, 0, from: 411, seconds: 200)
        #expect(r.events.isEmpty)
    }

    @Test func aGapInsideKeepsTheVisit() {
        var r = VisitRecorder()
        r.stay(at: 0, 0, from: 0, seconds: 400)
        #expect(r.arrivals.count == 1)
        // 40 minutes without fixes (indoors), then fixes resume at the place for a minute.
        r.stay(at: 5, 5, from: 2800, seconds: 60)
        #expect(r.departures.isEmpty)
        for i in 1...50 { r.feed(fix(at: 2860 + Double(i), offset(0, 20 * Double(i)))) }
        #expect(r.arrivals.count == 1)
        #expect(r.departures.count == 1)
        let d = r.departures[0]
        #expect(d.arrival == t0)
        // Departure: the last fix of the stay (within the 50 m core: 2 fixes into the drive-off).
        #expect(d.departure == t0.adding(seconds: 2862))
    }

    @Test func aGapEndingFarAwayEndsTheVisitAtTheLastFixInside() {
        var r = VisitRecorder()
        r.stay(at: 0, 0, from: 0, seconds: 400)
        // Fixes lost at 399; they resume 3 km away 30 minutes later (30 s of them are certain).
        r.stay(at: 3000, 0, from: 2200, seconds: 30)
        #expect(r.departures.isEmpty)
        r.stay(at: 3000, 0, from: 2230, seconds: 1)
        #expect(r.departures.count == 1)
        #expect(r.departures.first?.departure == t0.adding(seconds: 399))
        #expect(r.departures.first?.arrival == t0)
    }

    @Test func aLongGapThatEndsFarFromWhereItBeganIsNoVisit() {
        var r = VisitRecorder()
        r.stay(at: 0, 0, from: 0, seconds: 60)
        r.stay(at: 2000, 500, from: 3600, seconds: 60)
        #expect(r.events.isEmpty)
    }

    @Test func aGapInsideBeforeTheDwellCompletesTheStay() {
        var r = VisitRecorder()
        r.stay(at: 0, 0, from: 0, seconds: 60)
        r.stay(at: 0, 0, from: 1800, seconds: 3)
        #expect(r.arrivals.count == 1)
        #expect(r.arrivals.first?.arrival == t0)
        #expect(r.events.first?.at == t0.adding(seconds: 1800))
    }

    @Test func singleOutliersDoNotEndAVisit() {
        var r = VisitRecorder()
        for i in 0..<1200 {
            let wild = i % 60 == 30 || i % 97 == 50 || i % 97 == 51  // single and paired outliers
            let p = wild ? offset(800, -300) : offset(jitter(i, 4).0, jitter(i, 4).1)
            r.feed(fix(at: Double(i), p, accuracy: 8))
        }
        #expect(r.arrivals.count == 1)
        #expect(r.departures.isEmpty)
        #expect(Geodesy.distance(r.arrivals[0].coordinate, origin) < 5, "outliers do not drag the centre")
    }

    @Test func outsideFixesMustLastBeforeADeparture() {
        var r = VisitRecorder()
        r.stay(at: 0, 0, from: 0, seconds: 400)
        // Thirty consecutive fixes 500 m away (spanning 29 s < 30 s), then back.
        for i in 0..<30 { r.feed(fix(at: 400 + Double(i), offset(500, 0))) }
        r.stay(at: 0, 0, from: 430, seconds: 30)
        #expect(r.departures.isEmpty)
        // Thirty-one (spanning 30 s) end it.
        for i in 0..<31 { r.feed(fix(at: 460 + Double(i), offset(500, 0))) }
        #expect(r.departures.count == 1)
        #expect(r.departures[0].departure == t0.adding(seconds: 459))
        #expect(r.events.last?.at == t0.adding(seconds: 490))
    }

    @Test func heavyJitterIndoorsKeepsOneVisit() {
        var r = VisitRecorder()
        r.stay(at: 0, 0, from: 0, seconds: 3600, jitterMetres: 70, accuracy: 60)
        #expect(r.arrivals.count == 1)
        #expect(r.departures.isEmpty)
        #expect(Geodesy.distance(r.arrivals[0].coordinate, origin) < 15)
        #expect(r.arrivals[0].horizontalAccuracy > 20 && r.arrivals[0].horizontalAccuracy < 150)
    }

    @Test func veryInaccurateFixesAreIgnored() {
        var r = VisitRecorder()
        r.stay(at: 0, 0, from: 0, seconds: 400)
        for i in 0..<60 { r.feed(fix(at: 400 + Double(i), offset(1000, 0), accuracy: 500)) }
        r.stay(at: 0, 0, from: 460, seconds: 10)
        #expect(r.departures.isEmpty)
    }

    @Test func parametersAreHonoured() {
        var p = VisitDetector.Parameters()
        p.dwell = 60
        var r = VisitRecorder(p)
        r.stay(at: 0, 0, from: 0, seconds: 61)
        #expect(r.arrivals.count == 1)
        #expect(r.events.first?.at == t0.adding(seconds: 60))
    }
}

@Suite struct SignificantChangeTests {
    @Test func firstFixIsDeliveredAtOnce() {
        var s = SignificantChange()
        #expect(s.offer(fix(at: 0, origin)) != nil)
        #expect(s.offer(fix(at: 1, origin)) == nil)
    }

    @Test func needsBothDistanceAndTime() {
        var s = SignificantChange()
        _ = s.offer(fix(at: 0, origin))
        // 600 m away after 100 s: too soon.
        #expect(s.offer(fix(at: 100, offset(600, 0))) == nil)
        #expect(s.offer(fix(at: 101, offset(601, 0))) == nil)
        // 499 m after 10 minutes: too close.
        #expect(s.offer(fix(at: 600, offset(499, 0))) == nil)
        #expect(s.offer(fix(at: 601, offset(499, 0))) == nil)
        // 510 m after 5 minutes: the candidate, confirmed by the next fix.
        #expect(s.offer(fix(at: 700, offset(510, 0))) == nil)
        let delivered = s.offer(fix(at: 701, offset(512, 0)))
        #expect(delivered?.time == t0.adding(seconds: 701))
        #expect(s.lastDelivered?.time == t0.adding(seconds: 701))
    }

    @Test func oneWildFixDoesNotTrigger() {
        var s = SignificantChange()
        _ = s.offer(fix(at: 0, origin))
        for i in 1...1200 {
            let p = i == 600 || i == 900 ? offset(2000, 1000) : origin
            #expect(s.offer(fix(at: Double(i), p)) == nil)
        }
        // Two wild fixes in a row that disagree with each other do not trigger either.
        #expect(s.offer(fix(at: 1201, offset(3000, 0))) == nil)
        #expect(s.offer(fix(at: 1202, offset(-3000, 0))) == nil)
    }

    @Test func aSlowCreepIsMeasuredFromTheLastDelivered() {
        var s = SignificantChange()
        var delivered: [Fix] = []
        for i in 0...1800 {  // 1 m/s for 30 minutes
            if let f = s.offer(fix(at: Double(i), offset(Double(i), 0))) { delivered.append(f) }
        }
        #expect(delivered.count == 4)  // t = 0, then every ≈ 501 s: 501, 1002, 1503
        for (a, b) in zip(delivered, delivered.dropFirst()) {
            #expect(Geodesy.distance(a.coordinate, b.coordinate) >= 500)
            #expect(b.time - a.time >= 300 && b.time - a.time <= 502)
        }
    }

    /// The receiver's clock jumps back 52 minutes (as in gpsd's bt451 log), then the device
    /// drives 6 km: the changes come as without the jump, not only once the clock is back.
    @Test func aBackwardsClockJumpDoesNotSilenceSignificantChanges() {
        func drive(jump: Double) -> Int {
            var s = SignificantChange()
            var count = 0
            for i in 0...600 { if s.offer(fix(at: Double(i), origin)) != nil { count += 1 } }
            for i in 1...3000 {  // 2 m/s for 50 minutes, timed from 52 minutes before
                if s.offer(fix(at: 600 - jump + Double(i), offset(2 * Double(i), 0))) != nil { count += 1 }
            }
            return count
        }
        let steady = drive(jump: 0)
        #expect(steady >= 10)
        #expect(drive(jump: 3120) == steady)
    }

    @Test func inaccurateFixesAreIgnored() {
        var s = SignificantChange()
        #expect(s.offer(fix(at: 0, origin, accuracy: 900)) == nil)
        #expect(s.offer(fix(at: 1, origin, accuracy: 20)) != nil)
    }

    /// A subscription that set `desiredAccuracy` is not handed a significant change of unknown
    /// accuracy, as it is not handed such a location: it cannot be shown to meet the request.
    /// Without one, fixes of unknown accuracy pass (many receivers never say).
    @Test func unknownAccuracyFailsASetDesiredAccuracy() {
        func significant(desired: Double?) -> [Fix] {
            var engine = Engine()
            var o = SubscriptionOptions(events: [.significant])
            o.desiredAccuracy = desired
            var out: [Delivery] = []
            engine.handle(.subscribe(SubscriberID(1), o), into: &out)
            for i in 0..<5 { engine.handle(.fix(fix(at: Double(i), origin, accuracy: nil)), into: &out) }
            return out.compactMap { if case .significant(let f) = $0.event { f } else { nil } }
        }
        #expect(significant(desired: 50).isEmpty)
        #expect(significant(desired: nil).count == 1)
    }
}

@Suite struct EngineEventKindTests {
    @Test func subscriptionsGetOnlyTheKindsTheyAskFor() {
        var engine = Engine()
        let loc = SubscriberID(1), visits = SubscriberID(2), sig = SubscriberID(3)
        var out: [Delivery] = []
        engine.handle(.subscribe(loc, SubscriptionOptions()), into: &out)
        engine.handle(.subscribe(visits, SubscriptionOptions(events: .visits)), into: &out)
        // The distance filter does not apply to significant changes.
        engine.handle(.subscribe(sig, SubscriptionOptions(distanceFilter: 100_000, events: [.significant, .location])), into: &out)
        out.removeAll()
        for i in 0..<400 { engine.handle(.fix(fix(at: Double(i), origin)), into: &out) }
        for i in 0..<40 { engine.handle(.fix(fix(at: 1000 + Double(i), offset(3000, 0))), into: &out) }
        func kinds(_ id: SubscriberID) -> [String] {
            out.filter { $0.subscriber == id }.map {
                switch $0.event {
                case .location: "location"
                case .status: "status"
                case .visit(let v): v.kind.rawValue
                case .significant: "significant"
                case .region: "region"
                case .paused, .resumed: "pause"
                }
            }
        }
        #expect(Set(kinds(loc)) == ["status", "location"])
        #expect(kinds(visits).filter { $0 != "status" } == ["arrival", "departure"])
        #expect(kinds(sig).filter { $0 == "significant" }.count == 2)
        #expect(kinds(sig).filter { $0 == "location" }.count == 1)
    }

    /// Changing an option (subscribing again) mid-visit is not leaving: the open visit ends
    /// with its departure, and a stay that goes on is not announced again. The detector was
    /// replaced, and the departure never came.
    @Test(arguments: [Accuracy.precise, .approximate])
    func subscribingAgainMidVisitKeepsTheVisit(_ accuracy: Accuracy) {
        var engine = Engine()
        let id = SubscriberID(1)
        var out: [Delivery] = []
        func options(distanceFilter: Double) -> SubscriptionOptions {
            var o = SubscriptionOptions(distanceFilter: distanceFilter, events: [.location, .visits])
            o.accuracy = accuracy
            return o
        }
        engine.handle(.subscribe(id, options(distanceFilter: 0)), into: &out)
        func visits() -> [Visit] { out.compactMap { if case .visit(let v) = $0.event { v } else { nil } } }
        for i in 0..<900 {
            if i == 450 {
                engine.handle(.subscribe(id, options(distanceFilter: 25)), into: &out)
            }
            let (dn, de) = jitter(i, 4)
            engine.handle(.fix(fix(at: Double(i), offset(dn, de), accuracy: 5)), into: &out)
        }
        // Walks off north at 1.4 m/s, far enough to leave the approximate cell too, and past
        // the publications that send an approximate program its held visits.
        for i in 0..<3000 { engine.handle(.fix(fix(at: 900 + Double(i), offset(1.4 * Double(i), 0), accuracy: 5)), into: &out) }
        let v = visits()
        #expect(v.map(\.kind) == [.arrival, .departure])
        #expect(v.count == 2 && v[1].arrival == v[0].arrival)
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A stay's plane has no seam at the poles or the antimeridian: one stay at a pole is one
/// visit, centred on it, as anywhere else (docs/semantics.md, "Centre and accuracy").
@Suite struct VisitsAnywhereOnTheGlobeTests {
    /// The point `distance` metres from `c` on bearing `bearing` (radians), on the sphere (at a
    /// pole, bearings are measured from the meridian 0: the scatter stays isotropic there).
    static func destination(_ c: Coordinate, _ distance: Double, _ bearing: Double) -> Coordinate {
        let phi = Geodesy.radians(c.latitude), lambda = Geodesy.radians(c.longitude), d = distance / Geodesy.earthRadius
        let up = SIMD3(cos(phi) * cos(lambda), cos(phi) * sin(lambda), sin(phi))
        let east = SIMD3(-sin(lambda), cos(lambda), 0)
        let north = SIMD3(-sin(phi) * cos(lambda), -sin(phi) * sin(lambda), cos(phi))
        let p = up * cos(d) + (east * sin(bearing) + north * cos(bearing)) * sin(d)
        return Coordinate(latitude: atan2(p.z, (p.x * p.x + p.y * p.y).squareRoot()) * 180 / .pi,
                          longitude: atan2(p.y, p.x) * 180 / .pi)
    }

    /// An hour of 1 Hz fixes scattered (2-D normal, σ metres) around `truth`.
    static func visits(at truth: Coordinate, sigma: Double, seed: UInt64) -> [Visit] {
        var recorder = VisitRecorder()
        var s = seed
        func uniform() -> Double { Double(PrivacyGrid.splitMix(&s) >> 11) / Double(1 << 53) }
        for i in 0..<3600 {
            let r = sigma * (-2 * log(uniform() + 1e-12)).squareRoot()
            recorder.feed(fix(at: Double(i), destination(truth, r, uniform() * 2 * .pi), accuracy: 2.45 * sigma))
        }
        return recorder.events.map(\.visit)
    }

    @Test(arguments: [Coordinate(latitude: -90, longitude: 0), Coordinate(latitude: 90, longitude: 0),
                      Coordinate(latitude: -89.9995, longitude: 123), Coordinate(latitude: 0, longitude: 180),
                      Coordinate(latitude: 10, longitude: 20)])
    func aDeviceStandingStillIsOneVisitCentredWhereItStands(_ place: Coordinate) {
        for seed: UInt64 in 1...6 {
            let v = Self.visits(at: place, sigma: 20, seed: seed)
            #expect(v.map(\.kind) == [.arrival], "seed \(seed)")
            #expect(v.allSatisfy { Geodesy.distance($0.coordinate, place) < 3 }, "seed \(seed): \(v.map(\.coordinate))")
            #expect(v.allSatisfy { $0.coordinate.isValid })
        }
    }
}
