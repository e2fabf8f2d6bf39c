@testable import LocationCore
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The rules that keep one stay one visit and slow movement no visit (docs/semantics.md,
/// "Visits": departure of a reported visit; still, not creeping).
@Suite struct VisitEvidenceTests {
    /// 1 Hz fixes `metres` from the place in the direction `degrees` (0 = north).
    func away(_ r: inout VisitRecorder, metres: Double, degrees: Double, from: Double, seconds: Int) {
        let a = Geodesy.radians(degrees)
        for i in 0..<seconds {
            r.feed(fix(at: from + Double(i), offset(metres * cos(a), metres * sin(a)), accuracy: 30))
        }
    }

    /// Indoor multipath carrying every fix 105–115 m out, to one side or all round, for two
    /// minutes (it ended a visit after 10 s and the next fixes began a second one there).
    @Test(arguments: [false, true])
    func jitterOf110MetresForTwoMinutesDoesNotEndAVisit(allRound: Bool) {
        var r = VisitRecorder()
        r.stay(at: 0, 0, from: 0, seconds: 600)
        #expect(r.arrivals.count == 1)
        for i in 0..<120 {
            let metres = 105 + Double(i % 11)
            let degrees = allRound ? Double(i) * 137.5 : 40 + Double(i % 7)
            away(&r, metres: metres, degrees: degrees, from: 600 + Double(i), seconds: 1)
        }
        r.stay(at: 0, 0, from: 720, seconds: 900)
        #expect(r.arrivals.count == 1)
        #expect(r.departures.isEmpty)
    }

    /// Fixes lost for five minutes come back 350 m off and converge on the place over 20 s (a
    /// receiver re-acquiring): neither a reported visit nor a stay on its way to one ends.
    @Test(arguments: [false, true])
    func aSpikeAfterADropoutDoesNotEndAStay(reported: Bool) {
        var r = VisitRecorder()
        let before = reported ? 600 : 200
        r.stay(at: 0, 0, from: 0, seconds: before)
        let back = Double(before) + 300
        for i in 0..<20 {
            away(&r, metres: 350 * (1 - Double(i) / 20), degrees: 200, from: back + Double(i), seconds: 1)
        }
        r.stay(at: 0, 0, from: back + 20, seconds: 600)
        #expect(r.arrivals.count == 1)
        #expect(r.arrivals.first.map { $0.arrival - t0 < Double(before) } == true, "one stay, begun before the dropout")
        #expect(r.departures.isEmpty)
    }

    /// Two dropouts back to back, each ending in a spike: the dropout between them counts for
    /// at most `departureSeconds` of the evidence.
    @Test func aDropoutInsideAnOutsideRunAddsLittle() {
        var r = VisitRecorder()
        r.stay(at: 0, 0, from: 0, seconds: 600)
        away(&r, metres: 300, degrees: 90, from: 900, seconds: 8)
        away(&r, metres: 300, degrees: 90, from: 1200, seconds: 8)
        r.stay(at: 0, 0, from: 1208, seconds: 60)
        #expect(r.departures.isEmpty)
    }

    /// A long stay broken by every kind of fragmenting episode stays one visit; the real
    /// departure afterwards is reported once, timed at the last fix near the place.
    @Test func aFragmentedStayIsOneVisitAndItsDepartureIsTheLastFixThere() {
        var r = VisitRecorder()
        r.stay(at: 0, 0, from: 0, seconds: 900)
        away(&r, metres: 112, degrees: 300, from: 900, seconds: 90)
        r.stay(at: 0, 0, from: 990, seconds: 600)
        away(&r, metres: 250, degrees: 10, from: 1890, seconds: 12)   // after a 5-minute dropout
        r.stay(at: 0, 0, from: 1902, seconds: 600)
        away(&r, metres: 108, degrees: 120, from: 2502, seconds: 100)
        r.stay(at: 0, 0, from: 2602, seconds: 300)
        #expect(r.arrivals.count == 1)
        #expect(r.departures.isEmpty)
        // Walk away north at 1.4 m/s: within 50 m for 36 s, 200 m out after 143 s.
        for i in 1...300 { r.feed(fix(at: 2901 + Double(i), offset(1.4 * Double(i), 0))) }
        #expect(r.departures.count == 1)
        guard let d = r.departures.first, let at = r.events.last?.at else { return }
        #expect(d.arrival == t0)
        let last = d.departure! - t0
        #expect(last >= 2901 + 30 && last <= 2901 + 40, "last fix within 50 m: \(last)")
        // Emitted once 200 m out for 30 s: about 2901 + 143 + 30.
        #expect(at - t0 >= 2901 + 170 && at - t0 <= 2901 + 180, "emitted at \(at - t0)")
    }

    /// Settling 150 m away (beyond the radius, nearer than `departureDistance`) ends the visit
    /// after `nearDepartureSeconds`, and the new place is the next visit.
    @Test func settlingNextDoorEndsTheVisitAfterFiveMinutes() {
        var r = VisitRecorder()
        r.stay(at: 0, 0, from: 0, seconds: 600)
        r.stay(at: 150, 0, from: 600, seconds: 1200)
        #expect(r.departures.count == 1)
        #expect(r.events.first { $0.visit.kind == .departure }.map { $0.at - t0 } == 900)
        #expect(r.arrivals.count == 2)
        if r.arrivals.count == 2 { #expect(Geodesy.distance(r.arrivals[1].coordinate, offset(150, 0)) < 10) }
    }

    /// A queue or a car park search: 10 m at 1 m/s, then 40 s still, for 20 minutes (net
    /// 0.2 m/s). The receiver's speed shows the moves; the stay is no visit until the device is
    /// still, and then it is back-dated no further than the last 50 m of the creep (from there
    /// on, at most 10 % of the fixes moved).
    @Test func stopAndGoIsNoVisit() {
        var r = VisitRecorder()
        var t = 0.0, north = 0.0
        while t < 1200 {
            for _ in 0..<10 {
                north += 1
                var f = fix(at: t, offset(north, 0)); f.speed = 1.0
                r.feed(f); t += 1
            }
            for _ in 0..<40 {
                var f = fix(at: t, offset(north, 0)); f.speed = 0.05
                r.feed(f); t += 1
            }
        }
        #expect(r.arrivals.isEmpty, "stop-and-go reported as a visit")
        let still = t
        for i in 0..<400 {
            var f = fix(at: still + Double(i), offset(north, 0)); f.speed = 0.05
            r.feed(f)
        }
        #expect(r.arrivals.count == 1)
        if let a = r.arrivals.first {
            #expect(a.arrival - t0 >= still - 250 && a.arrival - t0 <= still + 5, "arrival \(a.arrival - t0), still from \(still)")
            #expect(r.events[0].at - a.arrival >= 300)
        }
    }

    /// Without a reported speed a still stay is a visit as before: the progress rule sees no
    /// progress in it.
    @Test func aStillStayWithoutSpeedIsAVisit() {
        var r = VisitRecorder()
        r.stay(at: 0, 0, from: 0, seconds: 301)
        #expect(r.arrivals.count == 1)
        #expect(r.arrivals.first?.arrival == t0)
    }

    /// A slow stroll round a square of 60 m (0.35 m/s, 1 Hz, no speed in the fixes: a GPX
    /// track) stays within 50 m of its centre for 15 minutes but is no visit. Without the
    /// progress rule it is reported.
    @Test func aSlowStrollWithoutSpeedIsNoVisit() {
        /// A point `d` metres along the square's perimeter (corners at ±30 m).
        func square(_ d: Double) -> (Double, Double) {
            let s = d.truncatingRemainder(dividingBy: 240), side = Int(s / 60), u = s - Double(side) * 60 - 30
            switch side {
            case 0: return (-30, u)
            case 1: return (u, 30)
            case 2: return (30, -u)
            default: return (-u, -30)
            }
        }
        func stroll(_ p: VisitDetector.Parameters) -> VisitRecorder {
            var r = VisitRecorder(p)
            for i in 0..<900 {
                let (n, e) = square(0.35 * Double(i)), (dn, de) = jitter(i, 4)
                r.feed(fix(at: Double(i), offset(n + dn, e + de), accuracy: nil))
            }
            return r
        }
        #expect(stroll(.init()).arrivals.isEmpty)
        #expect(!stroll(.init(progressSpeed: .infinity)).arrivals.isEmpty, "the stroll alone is a visit without the rule")
    }

    /// Jitter without speed is still a visit from its first fix: a watch's ±10 m without an
    /// accuracy (no net progress), and a poor receiver's ±70 m with its accuracy of 60 m
    /// (points anywhere in its error disc; less than twice that apart is no walk).
    @Test(arguments: [(10.0, nil), (70.0, 60.0)] as [(Double, Double?)])
    func jitterWithoutSpeedIsStillAVisit(metres: Double, accuracy: Double?) {
        var r = VisitRecorder()
        for i in 0..<600 {
            let (dn, de) = jitter(i, metres)
            r.feed(fix(at: Double(i), offset(dn, de), accuracy: accuracy))
        }
        #expect(r.arrivals.count == 1)
        #expect(r.arrivals.first?.arrival == t0)
    }

    /// A logger writing a fix every 150 s (none in between): half an hour at one place, then
    /// half an hour 150 m on. The second stay ends the first visit once its fixes span ten
    /// minutes (a gap alone never would), and is a visit itself.
    @Test func aSparseLoggersStayNextDoorEndsTheVisit() {
        var r = VisitRecorder()
        var t = 0.0
        for k in 0..<13 {
            let (dn, de) = jitter(k, 20)
            r.feed(fix(at: t, offset(dn, de), accuracy: nil)); t += 150
        }
        #expect(r.arrivals.count == 1)
        let moved = t
        for k in 13..<26 {
            let (dn, de) = jitter(k, 20)
            r.feed(fix(at: t, offset(150 + dn, de), accuracy: nil)); t += 150
        }
        #expect(r.departures.count == 1)
        if let d = r.events.first(where: { $0.visit.kind == .departure }) {
            #expect(d.at - t0 >= moved + 600 && d.at - t0 <= moved + 750, "departure emitted at \(d.at - t0)")
            #expect(d.visit.departure.map { $0 - t0 } == moved - 150)
        }
        #expect(r.arrivals.count == 2)
    }

    /// A logger writing a fix every minute or 90 s (no speed, no accuracy) on a walk of half an
    /// hour at 1 m/s round a loop 100 m across: every fix is within 50 m of the loop's centre,
    /// and fixes a lap apart land near one another, but each step covers 55–80 m at walking
    /// speed, which a still receiver's jitter does not. No visit; the same cadence at a place,
    /// jittering 20 m, is one from its first fix.
    @Test(arguments: [60.0, 90.0])
    func aLoopWalkedAtASparseCadenceIsNoVisit(cadence: Double) {
        var walk = VisitRecorder()
        var t = 0.0
        while t <= 1800 {
            let a = t / 50, (dn, de) = jitter(Int(t), 5)
            walk.feed(fix(at: t, offset(50 * cos(a) + dn, 50 * sin(a) + de), accuracy: nil)); t += cadence
        }
        #expect(walk.arrivals.isEmpty)
        var still = VisitRecorder()
        t = 0
        while t <= 1800 {
            let (dn, de) = jitter(Int(t), 20)
            still.feed(fix(at: t, offset(dn, de), accuracy: nil)); t += cadence
        }
        #expect(still.arrivals.count == 1)
        #expect(still.arrivals.first?.arrival == t0)
    }

    /// A logger on a one-minute timer (no speed, no accuracy) carried to and fro along a path
    /// of 200 m (steps of 60 and 40 m by turns) loses its fixes for 314 s and comes back 69 m
    /// on: a timer writes while standing too, so a silence right after a step made at walking
    /// pace is fixes lost, not the logger asleep at a place. No visit, as without the silence.
    @Test(arguments: [false, true])
    func aTimerLoggersSilenceMidWalkIsNoVisit(silence: Bool) {
        var r = VisitRecorder()
        // Walked distance folded onto the 200 m path: steps of 60 and 40 m by turns.
        func at(_ walked: Double) -> Coordinate {
            let phase = walked.truncatingRemainder(dividingBy: 400)
            return offset(phase < 200 ? phase : 400 - phase, 0)
        }
        var t = 0.0, walked = 0.0, k = 0
        while t <= 1050 { r.feed(fix(at: t, at(walked), accuracy: nil)); t += 60; walked += k % 2 == 0 ? 60 : 40; k += 1 }
        if silence { t = 1050 + 314; walked += 251 }
        while t <= 2400 { r.feed(fix(at: t, at(walked), accuracy: nil)); t += 60; walked += k % 2 == 0 ? 60 : 40; k += 1 }
        #expect(r.arrivals.isEmpty)
    }

    /// A logger on a 30-second timer (no speed, no accuracy) carried along a path at 0.9 m/s
    /// (27 m a step) loses its fixes for 278 s, under the dwell, and comes back 34 m on from
    /// the last fix, then walks on northwards: the silence mid-walk is fixes lost, and the fix
    /// after it is no sparse logger's still fix (its 278 s would complete the dwell of the
    /// last fixes before it at once). No visit, as without the silence.
    @Test(arguments: [false, true])
    func aTimerLoggersShortSilenceMidWalkIsNoVisit(silence: Bool) {
        var r = VisitRecorder()
        var t = 0.0, north = 0.0, east = 0.0
        while t <= 600 { r.feed(fix(at: t, offset(north, east), accuracy: nil)); t += 30; east += 27 }
        if silence { t += 248; east += 34 - 27 }
        for _ in 0..<20 {
            r.feed(fix(at: t, offset(north, east), accuracy: nil)); t += 30
            if silence { north += 27 } else { east += 27 }
        }
        #expect(r.arrivals.isEmpty)
    }

    /// The same logger's carrier turns round during the silence: its fixes come back 34 m
    /// short of the last one and walk back the way it came, past the walk's last fixes before
    /// the silence. The movement rules see one side only of the fixes next to the silence, and
    /// finding no movement there is no sign the device stood: no visit. A stay that the walk
    /// reaches as the fixes are lost, and that they come back to, is still one.
    @Test(arguments: [false, true])
    func fixesNextToATimerLoggersSilenceMidWalkAreNotStillByDefault(stays: Bool) {
        var r = VisitRecorder()
        var t = 0.0, east = 0.0
        while t <= 600 { r.feed(fix(at: t, offset(0, east), accuracy: nil)); t += 30; east += 27 }
        t += 248
        if stays {
            // Back at the last fix (within a few metres) for ten minutes.
            east -= 27
            for i in 0..<20 { r.feed(fix(at: t, offset(Double(i % 3) * 2, east + Double(i % 2) * 3), accuracy: nil)); t += 30 }
            #expect(r.arrivals.count == 1)
            #expect(r.arrivals.first.map { $0.arrival - t0 <= 600 } == true, "back-dated to the walk's end")
        } else {
            east -= 27 + 34
            for _ in 0..<20 { r.feed(fix(at: t, offset(0, east), accuracy: nil)); t += 30; east -= 27 }
            #expect(r.arrivals.isEmpty)
        }
    }

    /// A phone logging every 10 s (no speed, no accuracy) carried round a loop of 40 m radius
    /// at 1.4 m/s loses its fixes for 300 s and comes back on the far side of the loop, 80 m
    /// from the last fix, walking on: after fixes every few seconds a silence is fixes lost,
    /// and the fixes next to it, seen from one side only, are not still for want of movement.
    /// No visit, as without the silence; a stay the walk reaches as the fixes are lost, and
    /// that they come back to, is one.
    @Test(arguments: [0, 1, 2])
    func fixesNextToAFrequentLoggersSilenceAreNotStillByDefault(silence: Int) {
        var r = VisitRecorder()
        // 14 m (0.35 rad) round the loop a fix.
        func loop(_ a: Double) -> Coordinate { offset(40 * sin(a), 40 * cos(a)) }
        var t = 0.0, a = 0.0
        while t <= 600 { r.feed(fix(at: t, loop(a), accuracy: nil)); t += 10; a += 0.35 }
        a -= 0.35
        if silence == 2 {
            t += 290
            for i in 0..<60 { r.feed(fix(at: t, offset(40 * sin(a) + Double(i % 3) * 2, 40 * cos(a)), accuracy: nil)); t += 10 }
            #expect(r.arrivals.count == 1)
            return
        }
        if silence == 1 { t += 290; a += Double.pi }
        for _ in 0..<60 { a += 0.35; r.feed(fix(at: t, loop(a), accuracy: nil)); t += 10 }
        #expect(r.arrivals.isEmpty)
    }

    /// A logger writing a fix every two minutes while its carrier goes to and fro between two
    /// stalls 100 m apart for half an hour (140 s at each, 100 s walking between): its steps
    /// alternate between 0 and 100 m, so no two walked steps follow one another, but a still
    /// receiver's jitter never makes 100 m in two minutes, and the carrier walked 40 % of the
    /// time. No visit.
    @Test func goingToAndFroAtATwoMinuteCadenceIsNoVisit() {
        var r = VisitRecorder()
        var t = 0.0
        while t <= 1800 {
            let phase = t.truncatingRemainder(dividingBy: 480)
            let along = phase < 140 ? 0 : phase < 240 ? phase - 140 : phase < 380 ? 100 : 480 - phase
            let (dn, de) = jitter(Int(t), 5)
            r.feed(fix(at: t, offset(dn, along - 50 + de), accuracy: nil)); t += 120
        }
        #expect(r.arrivals.isEmpty)
    }

    /// 1 Hz positions (no speed): 3 minutes at `speed` m/s, 5.5 minutes still, 3 minutes on.
    func stop(between speed: Double) -> VisitRecorder {
        var r = VisitRecorder()
        var t = 0.0, east = 0.0
        func feed() {
            let (dn, de) = jitter(Int(t), 3)
            r.feed(fix(at: t, offset(dn, east + de), accuracy: nil)); t += 1
        }
        for _ in 0..<180 { feed(); east += speed }
        for _ in 0..<330 { feed() }
        for _ in 0..<180 { east += speed; feed() }
        return r
    }

    /// A stop of 5.5 minutes between rides at 5 m/s is a visit: the three-minute progress of
    /// its first and last 90 s is the ride in and out, not a slow walk through it.
    @Test func aStopBetweenRidesIsAVisit() {
        let r = stop(between: 5)
        #expect(r.arrivals.count == 1)
        #expect(r.departures.count == 1)
        if let a = r.arrivals.first { #expect(abs((a.arrival - t0) - 180) <= 15, "arrival at \(a.arrival - t0)") }
    }

    /// The same stop between walks at 1.2 m/s is none: a walk in may slow to a stroll, and the
    /// first and last 90 s there are not known to be still.
    @Test func theSameStopBetweenWalksIsNoVisit() {
        #expect(stop(between: 1.2).arrivals.isEmpty)
    }
}

/// A position that drifts while the device stays (docs/semantics.md, "Visits": drift).
@Suite struct VisitDriftTests {
    /// 1 Hz: ten minutes at the place, the fixes drifting 150 m north over 40 minutes and
    /// staying there 20 minutes (a receiver's slow drift; Doppler says still when `doppler`),
    /// then a walk 600 m on at 1.4 m/s and ten minutes there. Returns the recorder and when
    /// the walk began.
    func drift(doppler: Bool, accuracy: Double? = nil) -> (VisitRecorder, Double) {
        var r = VisitRecorder()
        var t = 0.0
        func feed(_ north: Double, speed: Double) {
            let (dn, de) = jitter(Int(t), 4)
            var f = fix(at: t, offset(north + dn, de), accuracy: accuracy)
            if doppler { f.speed = speed }
            r.feed(f); t += 1
        }
        for _ in 0..<600 { feed(0, speed: 0.1) }
        for i in 0..<2400 { feed(150 * Double(i) / 2400, speed: 0.1) }
        for _ in 0..<1200 { feed(150, speed: 0.1) }
        let walk = t
        for i in 0..<430 { feed(150 + 1.4 * Double(i), speed: 1.4) }
        for _ in 0..<600 { feed(752, speed: 0.1) }
        return (r, walk)
    }

    /// The drift is one visit: no departure until the walk, which ends it (once it is 200 m
    /// from the centre and 30 s on) and starts the next.
    @Test(arguments: [true, false])
    func aSlowDriftOf150MetresIsOneVisit(doppler: Bool) {
        let (r, walk) = drift(doppler: doppler)
        #expect(r.arrivals.count == 2)
        #expect(r.departures.count == 1)
        if let d = r.events.first(where: { $0.visit.kind == .departure }) {
            #expect(d.at - t0 >= walk && d.at - t0 <= walk + 200, "departure emitted at \(d.at - t0), walk at \(walk)")
            #expect(d.visit.arrival == t0)
            #expect(d.visit.departure.map { $0 - t0 >= walk - 60 && $0 - t0 <= walk + 60 } == true)
        }
    }

    /// The same place reached by walking (1.4 m/s) and stayed at for 20 minutes is a new
    /// visit: the walk is the movement the drift lacks.
    @Test(arguments: [true, false])
    func aWalkToThePlaceNextDoorEndsTheVisit(doppler: Bool) {
        var r = VisitRecorder()
        var t = 0.0
        func feed(_ north: Double, speed: Double) {
            let (dn, de) = jitter(Int(t), 4)
            var f = fix(at: t, offset(north + dn, de), accuracy: nil)
            if doppler { f.speed = speed }
            r.feed(f); t += 1
        }
        for _ in 0..<600 { feed(0, speed: 0.1) }
        for i in 0..<107 { feed(1.4 * Double(i), speed: 1.4) }
        for _ in 0..<1200 { feed(150, speed: 0.1) }
        #expect(r.departures.count == 1)
        #expect(r.arrivals.count == 2)
    }
}

extension VisitDriftTests {
    /// Fixes lost for two minutes while the device walks 150 m out of a building, then twenty
    /// minutes there: the jump across the gap is movement (a drift gets a few metres in that
    /// time), so the visit ends and the next begins.
    @Test(arguments: [true, false])
    func movementUnseenDuringFixLossEndsTheVisit(doppler: Bool) {
        var r = VisitRecorder()
        var t = 0.0
        func feed(_ north: Double) {
            let (dn, de) = jitter(Int(t), 4)
            var f = fix(at: t, offset(north + dn, de), accuracy: nil)
            if doppler { f.speed = 0.1 }
            r.feed(f); t += 1
        }
        for _ in 0..<600 { feed(0) }
        t += 120
        for _ in 0..<1200 { feed(150) }
        #expect(r.departures.count == 1)
        #expect(r.arrivals.count == 2)
    }
}
