@testable import LocationCore
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Movement judged without a speed, and the dwell counted to fixes known to be still
/// (docs/semantics.md, "Visits": known to be still, progress without a speed, sparse loggers).
@Suite struct VisitStillnessTests {
    /// A fix without speed or accuracy (a GPX track).
    func gpx(at seconds: Double, _ north: Double, _ east: Double = 0) -> Fix {
        fix(at: seconds, offset(north, east), accuracy: nil)
    }

    /// 1 Hz: a walk north at 1.2 m/s, 60 s at 0.4 m/s, `still` seconds at the place (±2 m),
    /// 60 s at 0.4 m/s and a walk on. Returns the recorder and when the stop began.
    func slowStop(still: Int) -> (VisitRecorder, Double) {
        var r = VisitRecorder()
        var t = 0.0, north = -96.0 - 24
        func step(_ speed: Double, _ seconds: Int) {
            for _ in 0..<seconds { north += speed; r.feed(gpx(at: t, north)); t += 1 }
        }
        step(1.2, 80); step(0.4, 60)
        let stop = t
        for i in 0..<still { let (n, e) = jitter(i, 2); r.feed(gpx(at: t, north + n, e)); t += 1 }
        step(0.4, 60); step(1.2, 300)
        return (r, stop)
    }

    /// A 4-minute stop entered and left at 0.4 m/s has its own fixes within 50 m for over five
    /// minutes, the slow approach and departure included; it is no visit. Six minutes is, once
    /// five minutes of it are still.
    @Test func aShortStopWithASlowApproachIsNoVisit() {
        #expect(slowStop(still: 240).0.arrivals.isEmpty)
        let (r, stop) = slowStop(still: 360)
        #expect(r.arrivals.count == 1)
        if let at = r.events.first?.at { #expect(at - t0 >= stop + 300, "emitted at \(at - t0), stop at \(stop)") }
    }

    /// A fix every 10 s: a walk at 1 m/s, then a stop of `still` seconds at which the track
    /// ends. The walk's last fixes are moving (half a minute, three minutes), not the stop's.
    func walkThenStop(still: Double) -> (VisitRecorder, Double) {
        var r = VisitRecorder()
        var t = 0.0
        while t < 300 { r.feed(gpx(at: t, t - 300)); t += 10 }
        let stop = t
        while t - stop <= still { let (n, e) = jitter(Int(t), 2); r.feed(gpx(at: t, n, e)); t += 10 }
        return (r, stop)
    }

    /// Four minutes 45 at a stop after a walk is no visit, though the fixes within 50 m of it
    /// (the walk's last 50 m included) span more than five minutes; seven minutes is a visit,
    /// its dwell counted from the stop, not from the walk.
    @Test func theWalkBeforeAStopIsNotPartOfItsDwell() {
        #expect(walkThenStop(still: 285).0.arrivals.isEmpty)
        let (r, stop) = walkThenStop(still: 420)
        #expect(r.arrivals.count == 1)
        if let at = r.events.first?.at { #expect(at - t0 >= stop + 300, "emitted at \(at - t0), stop at \(stop)") }
    }

    /// A logger that writes a fix a minute while walking and sleeps while still: a stay known
    /// from four fixes minutes apart that scatter 65 m is a visit; without the sparse rule it
    /// is not (its last fix is beyond the 50 m core).
    @Test(arguments: [true, false])
    func aSparseLoggersStayIsAVisit(rule: Bool) {
        var r = VisitRecorder(.init(sparseGap: rule ? 120 : .infinity))
        for (k, north) in [-240.0, -180, -120, -60].enumerated() { r.feed(gpx(at: Double(k) * 60, north)) }
        r.feed(gpx(at: 240, 0))
        r.feed(gpx(at: 270, 10, -15))
        r.feed(gpx(at: 430, -20, 10))
        r.feed(gpx(at: 690, 60, 30))
        for k in 1...6 { r.feed(gpx(at: 690 + Double(k) * 60, 60 + Double(k) * 60, 30)) }
        if rule {
            #expect(r.arrivals.count == 1)
            #expect(r.events.first.map { $0.at - t0 } == 690)
            if let a = r.arrivals.first { #expect(a.arrival - t0 >= 240 && a.arrival - t0 <= 270) }
        } else {
            #expect(r.arrivals.isEmpty)
        }
    }
}

/// Sparse loggers (docs/semantics.md, "Visits": sparse loggers; progress, without a speed).
@Suite struct VisitSparseTests {
    func gpx(at seconds: Double, _ north: Double, _ east: Double = 0) -> Fix {
        fix(at: seconds, offset(north, east), accuracy: nil)
    }

    /// A logger that writes a fix about once a minute while walking and sleeps while still
    /// (the offsets, metres north and east, of a stay on the real track vanoise-day-1): a stay
    /// of 5 min 22 s known from five fixes, left at a walk. Its last still fix is judged only
    /// when the walk on brings it and the walk's first fix of age together, and the walk's
    /// fixes are outside the stay by then; it is a visit from the fix at 504 s.
    @Test func aSparseLoggersShortStayIsAVisit() {
        var r = VisitRecorder()
        let track: [(Double, Double, Double)] = [
            (0, 219, 137), (38, 258, 142), (82, 221, 118), (118, 239, 116), (141, 221, 106), (212, 180, 115),
            (266, 128, 102), (335, 63, 103), (444, 35, 26), (504, -21, 11), (545, 0, 0), (749, -3, 15),
            (826, 9, -2), (853, -14, -6), (894, -17, -50), (955, -55, -98), (1050, -71, -190), (1152, -158, -233),
        ]
        for (t, n, e) in track { r.feed(gpx(at: t, n, e)) }
        #expect(r.arrivals.count == 1)
        #expect(r.arrivals.first.map { $0.arrival - t0 } == 504)
    }

    /// 1 Hz: 100 s still at a place, a walk 60 m north, fixes lost for 200 s, then 200 s still
    /// at `north` and a walk off east. Back 105 m from where the fixes were lost (within the
    /// radius of the stay's centre), the device moved in the silence, which is no still time:
    /// 200 s still after it are no visit. Back 15 m from there, the silence counts.
    @Test(arguments: [(-45.0, false), (45, true)])
    func aSilenceTheDeviceMovedInIsNoStillTime(north: Double, visit: Bool) {
        var r = VisitRecorder()
        var t = 0.0
        for i in 0..<100 { let (n, e) = jitter(i, 2); r.feed(gpx(at: t, n, e)); t += 1 }
        for k in 1...60 { r.feed(gpx(at: t, Double(k))); t += 1 }
        t += 200
        for i in 0..<200 { let (n, e) = jitter(i, 2); r.feed(gpx(at: t, north + n, e)); t += 1 }
        for k in 1...300 { r.feed(gpx(at: t, north, 1.4 * Double(k))); t += 1 }
        #expect(r.arrivals.count == (visit ? 1 : 0))
    }

    /// A watch that pauses while still (1 Hz on the move, as collioure-walk's auto-paused
    /// track): a walk in at 1 m/s, a stop known from a few fixes either side of silences of
    /// 158 s and 101 s whose ends are metres apart, and the walk on. The stop spans 5 min 21 s
    /// from the walk's last fix, but the three-minute rule takes its first 90 s and last 20 s
    /// for the walk in and out (4 min 10 s still): no visit. Two minutes longer, it is one.
    @Test(arguments: [(0.0, false), (120, true)])
    func aPausedWatchsShortStopIsNoVisit(longer: Double, visit: Bool) {
        var r = VisitRecorder()
        var t = 0.0
        for i in 0...200 { let (n, e) = jitter(i, 1); r.feed(gpx(at: t, Double(i) - 200 + n, e)); t += 1 }
        let stop: [(Double, Double, Double)] = [(210, 1, 1), (245, 2, 0), (403, -2, 3), (408, -1, 2), (420, 0, 1), (521, 1, 2)]
        for (s, n, e) in stop { r.feed(gpx(at: s >= 403 ? s + longer : s, n, e)) }
        for i in 1...300 { let (n, e) = jitter(i, 1); r.feed(gpx(at: 521 + longer + Double(i), Double(i) + n, 2 + e)) }
        #expect(r.arrivals.count == (visit ? 1 : 0))
    }

    /// A logger that writes a point every 10–60 s on the move and none while still (the
    /// offsets, metres north and east, of a stop on the real track alps-tour-c2c): a ride in,
    /// whose last point (189 s) comes 12 s before the first at the stop, a short walk about,
    /// 3 min 48 s of silence and the ride on. The ride's last point is followed by a short step
    /// and a long one, so it is never the newest point half a minute back; judged all the same,
    /// it is moving, and the stop, still from 253 s to 536 s, is no visit. Two minutes longer,
    /// it is one.
    @Test(arguments: [(0.0, false), (120, true)])
    func theRideInIsNotPartOfASparseLoggersStop(longer: Double, visit: Bool) {
        var r = VisitRecorder()
        let track: [(Double, Double, Double)] = [
            (0, 151, 1361), (33, -103, 1178), (48, -195, 1068), (100, -311, 635), (117, -262, 483), (131, -301, 391),
            (157, -272, 217), (189, -36, 33), (201, 2, -4), (253, -1, -34), (308, -17, -28), (536, 0, 0),
            (549, 45, -7), (589, 165, -131), (615, 101, -225), (636, 139, -330), (669, 63, -445), (712, 29, -560),
        ]
        for (t, n, e) in track { r.feed(gpx(at: t >= 536 ? t + longer : t, n, e)) }
        #expect(r.arrivals.count == (visit ? 1 : 0))
    }

    /// A logger that writes nothing while still (the offsets, metres north and east, of a
    /// stay on the real track alps-tour-c2c): a walk, its last point at 708 s, 17 minutes of
    /// silence, and a point 65 m on as the logger resumes late on the walk on. The silence
    /// is the stay: a visit from the last point before it. Cut to 4 minutes, it is none.
    @Test(arguments: [(0.0, true), (-763, false)])
    func aSilenceAtAPlaceIsAVisit(shift: Double, visit: Bool) {
        var r = VisitRecorder()
        let track: [(Double, Double, Double)] = [
            (0, 292, -144), (33, 354, -106), (50, 325, -81), (68, 281, -83), (80, 258, -102), (188, 254, -156),
            (264, 236, -151), (315, 227, -28), (481, 322, 77), (498, 310, 96), (574, 138, 49), (595, 123, 7),
            (617, 149, -36), (627, 139, -57), (663, 82, 12), (708, 0, 0), (1711, 5, 65), (1766, 50, 101),
            (1884, 95, 207), (2037, 199, 250), (2173, 295, 353), (2363, 291, 507),
        ]
        for (t, n, e) in track { r.feed(gpx(at: t > 708 ? t + shift : t, n, e)) }
        #expect(r.arrivals.count == (visit ? 1 : 0))
        if visit { #expect(r.arrivals.first.map { $0.arrival - t0 } == 708) }
    }

    /// A logger that writes nothing while still, resuming late on a bike (the offsets, metres
    /// north and east, of a stay on the real track alps-tour-c2c): its last point before 34
    /// minutes of silence at 459 s, the first after 245 m on, beyond the radius. The silence
    /// made no progress (0.12 m/s): a visit from the point before it to the point after.
    /// Shortened to 9 minutes (0.44 m/s, a walk with the fix lost), it is none.
    @Test(arguments: [(0.0, true), (-1500, false)])
    func aSilenceEndingBeyondTheRadiusIsAVisit(shift: Double, visit: Bool) {
        var r = VisitRecorder()
        let track: [(Double, Double, Double)] = [
            (0, -1002, 2025), (37, -896, 1821), (54, -794, 1761), (90, -664, 1519), (141, -623, 1186),
            (157, -551, 1095), (199, -334, 953), (226, -244, 771), (246, -134, 721), (267, -111, 593),
            (286, -136, 471), (336, -42, 247), (395, -127, 51), (428, -31, 34), (459, 0, 0), (2520, -219, -110),
            (2576, -217, -228), (2585, -258, -263), (2677, -815, -495), (2709, -1042, -501), (2747, -1274, -595),
            (2782, -1417, -696), (2820, -1616, -735), (2852, -1801, -809), (2902, -2010, -1010),
        ]
        for (t, n, e) in track { r.feed(gpx(at: t > 459 ? t + shift : t, n, e)) }
        #expect(r.arrivals.count == (visit ? 1 : 0))
        if visit {
            #expect(r.arrivals.first.map { $0.arrival - t0 } == 459)
            #expect(r.departures.first?.departure.map { $0 - t0 } == 2520)
        }
    }

    /// The same logger: a ride, its last point at 313 s 131 m past the one before, 32 minutes
    /// of silence, a point 49 m from it and the ride on. The point before the silence begins a
    /// tentative next stay (outside the ride's), which the silence ends at once as the place
    /// the device stood: a visit from 313 s to 2257 s. Without it the ride's next point starts
    /// the tentative stay afresh and the stay is lost.
    @Test func aSilenceAtATentativeStayIsAVisit() {
        var r = VisitRecorder()
        let track: [(Double, Double, Double)] = [
            (0, -923, 538), (25, -794, 420), (48, -818, 522), (77, -658, 415), (95, -601, 297), (118, -470, 192),
            (146, -343, 46), (174, -382, -151), (195, -503, -208), (218, -357, -201), (230, -279, -154),
            (243, -224, -219), (254, -175, -156), (264, -157, -72), (270, -126, -35), (313, 0, 0), (2257, 26, -42),
            (2284, 22, -173), (2292, -10, -230), (2304, -23, -330), (2314, -84, -385), (2330, -155, -502),
            (2370, -162, -729), (2394, -92, -904), (2415, -61, -1107), (2424, -18, -1166), (2437, 80, -1152),
            (2446, 89, -1210), (2455, 33, -1201), (2468, -40, -1282), (2477, -112, -1293), (2483, -139, -1340),
        ]
        for (t, n, e) in track { r.feed(gpx(at: t, n, e)) }
        #expect(r.arrivals.count == 1)
        #expect(r.arrivals.first.map { $0.arrival - t0 } == 313)
        #expect(r.departures.first?.departure.map { $0 - t0 } == 2257)
    }

    /// The same logger in the evening: a visit from 433 s, a walk of 142 m in 63 s at 2466 s
    /// (the device moving), and 11.8 hours of silence ending 92 m from the walk's last point.
    /// The night is a visit of its own, from 2529 s; the evening's ends at 2466 s. Stepped
    /// over five minutes (0.47 m/s: the position may have drifted), it stays one visit.
    @Test(arguments: [(2529.0, 2), (2766, 1)])
    func aSilenceAtTheNextPlaceEndsAVisit(step: Double, visits: Int) {
        var r = VisitRecorder()
        let track: [(Double, Double, Double)] = [
            (0, -850, 734), (35, -732, 551), (122, -369, 210), (274, -77, 60), (342, -23, 62), (362, -30, 14),
            (433, 5, 6), (520, -10, -41), (536, -2, -1), (586, -43, -8), (724, -11, -49), (2448, 0, 0),
            (2466, -35, 8), (step, -27, 150), (44898, -107, 196), (44938, -34, 146), (44948, -21, 113),
            (44975, -44, 9), (45025, -152, -120), (45050, -319, -132), (45075, -534, -63), (45092, -678, -46),
            (45102, -733, -68),
        ]
        for (t, n, e) in track { r.feed(gpx(at: t, n, e)) }
        #expect(r.arrivals.count == visits)
        if visits == 2 {
            #expect(r.arrivals.map { $0.arrival - t0 } == [433, 2529])
            #expect(r.departures.first?.departure.map { $0 - t0 } == 2466)
        }
    }
}

/// Fixes lost mid-walk are no sparse logger asleep (docs/semantics.md, "Visits": sparse loggers).
extension VisitSparseTests {
    /// A fix a second: a walk north at 1 m/s, 45 s at 0.2 m/s, 280 s without a fix, the next
    /// `resumed` metres on, and the walk on for ten minutes (the shape of a dropout on
    /// anjou-gnss-log). After fixes every second the silence is fixes lost: 76 m on (0.27 m/s,
    /// a slow walk) it is no stay; 40 m on (0.14 m/s) the device may have stood there: a visit.
    @Test(arguments: [(76.0, false), (40, true)])
    func fixesLostMidWalkAreNoStay(resumed: Double, visit: Bool) {
        var r = VisitRecorder()
        var t = 0.0, north = -300.0
        while t < 300 { r.feed(gpx(at: t, north)); t += 1; north += 1 }
        while t < 345 { r.feed(gpx(at: t, north)); t += 1; north += 0.2 }
        t += 279; north += resumed
        let back = t
        while t < back + 600 { r.feed(gpx(at: t, north)); t += 1; north += 1 }
        #expect(r.arrivals.count == (visit ? 1 : 0))
    }
}

/// A sparse logger's creep beyond the far departure distance (docs/semantics.md, "Visits":
/// departure of a reported visit).
extension VisitSparseTests {
    /// A logger at a place (a fix every 150 s within 20 m) for half an hour, then a fix
    /// 100 m on every `interval` s for 900 m, then a walk at 1.2 m/s with a fix every 30 s.
    /// Every 10 minutes (0.17 m/s, a creep) the visit goes on until the walk; every 4 minutes
    /// (0.42 m/s, a walk with the fix lost) the fourth fix 200 m out ends it.
    @Test(arguments: [(600.0, true), (240, false)])
    func aSparseLoggersCreepIsNoDeparture(interval: Double, creep: Bool) {
        var r = VisitRecorder()
        var t = 0.0, north = 0.0
        for k in 0..<13 {
            let (dn, de) = jitter(k, 20)
            r.feed(gpx(at: t, dn, de)); t += 150
        }
        #expect(r.arrivals.count == 1)
        for _ in 0..<9 { t += interval; north += 100; r.feed(gpx(at: t, north)) }
        let walk = t
        for _ in 0..<20 { t += 30; north += 36; r.feed(gpx(at: t, north)) }
        #expect(creep ? r.departures.count == 1 : r.departures.count >= 1)
        if let d = r.events.first(where: { $0.visit.kind == .departure }) {
            #expect((d.at - t0 > walk) == creep, "departure emitted at \(d.at - t0), walk at \(walk)")
        }
    }

    /// The same on a real track (the offsets, metres north and east, of alps-tour-c2c's second
    /// morning): three and a half hours round a summit, drifting 600 m at 0.1–0.27 m/s a step
    /// with a fix every 2–45 minutes, then the walk down at 0.5–1 m/s. One visit, left on the
    /// walk down; without the rule its fixes 200 m out ended it at 11:04 and began another.
    @Test func aSparseLoggersDriftRoundASummitIsOneVisit() {
        var r = VisitRecorder()
        let track: [(Double, Double, Double)] = [
            (0, 15, -655), (302, 63, -499), (789, 36, -310), (943, 8, -285), (1494, -28, -140), (2255, 0, 0),
            (2449, 20, 11), (2810, -3, 77), (2974, 25, 96), (3345, 32, 198), (3679, 95, 210), (4076, 151, 272),
            (4149, 174, 254), (4983, 240, 300), (5514, 283, 267), (7953, 166, 275), (8472, 100, 236),
            (8571, 106, 214), (8977, 34, 198), (9290, 18, 115), (9525, 37, 64), (9799, 18, 44), (9879, 39, 45),
            (10004, 9, 51), (10269, 46, 19), (10532, -5, -26), (11283, -32, -146), (13967, -8, -251),
            (14136, 27, -280), (14639, 66, -513), (14904, 33, -637), (15187, -97, -791), (15753, -225, -1230),
            (16391, -37, -1860), (16644, 12, -2134), (16894, 135, -2410), (17041, 78, -2551), (17304, 115, -2853),
            (17579, 358, -3132), (17759, 422, -3269), (17830, 476, -3297),
        ]
        for (t, n, e) in track { r.feed(gpx(at: t, n, e)) }
        #expect(r.arrivals.count == 1)
        #expect(r.departures.count == 1)
        if let d = r.departures.first { #expect(d.departure.map { $0 - t0 >= 13967 } == true) }
    }
}

/// Laps round a small loop (docs/semantics.md, "Visits": progress, without a speed).
@Suite struct VisitLapTests {
    /// `minutes` of laps round a circle of `circumference` metres at `speed` m/s, a fix every
    /// `interval` s with ±3 m jitter, no speed and no accuracy (a GPX track), after a walk in
    /// and before a walk out.
    func laps(circumference: Double, speed: Double, interval: Double, minutes: Double,
              doppler: Bool = false) -> VisitRecorder {
        var r = VisitRecorder()
        let radius = circumference / (2 * Double.pi)
        var t = 0.0, k = 0
        func feed(_ north: Double, _ east: Double, _ v: Double) {
            let (dn, de) = jitter(k, 3)
            var f = fix(at: t, offset(north + dn, east + de), accuracy: nil)
            if doppler { f.speed = v }
            r.feed(f); t += interval; k += 1
        }
        while t < 300 { feed(-radius - 400 + 1.4 * t, 0, 1.4) }
        let start = t
        while t - start < minutes * 60 {
            let a = speed * (t - start) / radius
            feed(-radius * cos(a), radius * sin(a), speed)
        }
        let end = t
        while t - end < 300 { feed(-radius, -1.4 * (t - end), 1.4) }
        return r
    }

    /// Jogging (2–3 m/s) round a 120–540 m loop, or walking (1.2–1.4 m/s) round a 170–400 m
    /// one, for 12–20 minutes is moving, not a visit, whatever the lap time and the fix
    /// interval — a lap of about a minute included (the fix a minute back is where the device
    /// is now; the fix 15 s back is not), with a speed in the fixes or without.
    @Test(arguments: [(180.0, 3.0, 4.0, 12.0), (180, 3, 1, 12), (200, 3, 4, 12), (120, 2, 2, 15), (360, 3, 4, 12),
                      (540, 3, 4, 12), (300, 2.5, 5, 15), (168, 1.4, 1, 20), (250, 1.2, 2, 20), (400, 1.3, 1, 20)])
    func lapsAreNoVisit(circumference: Double, speed: Double, interval: Double, minutes: Double) {
        for doppler in [false, true] {
            let r = laps(circumference: circumference, speed: speed, interval: interval, minutes: minutes, doppler: doppler)
            #expect(r.arrivals.isEmpty, "doppler: \(doppler)")
        }
    }
}

/// A phone that re-reports its last position while it has no new fix (docs/semantics.md,
/// "Visits": progress, without a speed).
@Suite struct VisitHeldPositionTests {
    func gpx(at seconds: Double, _ north: Double, _ east: Double = 0) -> Fix {
        fix(at: seconds, offset(north, east), accuracy: nil)
    }

    /// A point every 2 s: a walk in at 1.2 m/s, the last position held 55 m short of the
    /// place for 20 s, then 7 minutes at the place (±4 m) during which the phone holds a
    /// position 38 m off for 10 s and one 34 m off for 34 s, and a walk on. Each held position
    /// left by a jump is no progress: one visit. Taken as measured, the jumps after them are
    /// a walk and the stay is stop-and-go.
    @Test func aHeldPositionIsNoMovement() {
        var r = VisitRecorder()
        var t = 0.0
        func feed(_ north: Double, _ east: Double = 0) { r.feed(gpx(at: t, north, east)); t += 2 }
        var north = -300.0
        while north < -55 { feed(north); north += 2.4 }
        for _ in 0..<10 { feed(-55) }
        let stop = t
        func stay(_ seconds: Double) {
            let end = t + seconds
            while t < end { let (n, e) = jitter(Int(t), 4); feed(n, e) }
        }
        stay(200)
        for _ in 0..<5 { feed(-38, 5) }
        stay(180)
        for _ in 0..<17 { feed(30, 17) }
        stay(40)
        north = 0
        while north < 300 { north += 2.4; feed(north) }
        #expect(r.arrivals.count == 1)
        if let a = r.arrivals.first { #expect(a.arrival - t0 >= stop - 30 && a.arrival - t0 <= stop + 30) }
        #expect(r.departures.count == 1)
    }

    /// A walk at 1.2 m/s whose phone holds its position for 10 s every 30 s (a jump of 12 m
    /// when it lets go) is no visit, nor is one holding it for 30 s every minute (36 m).
    @Test(arguments: [(10.0, 30.0), (30, 60)])
    func aWalkWithHeldPositionsIsNoVisit(hold: Double, every: Double) {
        var r = VisitRecorder()
        var t = 0.0, held = 0.0
        while t < 900 {
            let north = 1.2 * t
            if t.truncatingRemainder(dividingBy: every) < hold {
                if t.truncatingRemainder(dividingBy: every) == 0 { held = north }
                r.feed(gpx(at: t, held))
            } else {
                r.feed(gpx(at: t, north))
            }
            t += 2
        }
        #expect(r.arrivals.isEmpty)
    }
}

/// A receiver whose fixes jump tens of metres from second to second while it stands
/// (docs/semantics.md, "Visits": known to be still).
@Suite struct VisitJitteryReceiverTests {
    /// 1 Hz, no speed or accuracy, fixes scattered up to `scatter` m round the true position
    /// (jumping up to twice that from one second to the next, as an RTKLIB solution of a poor
    /// receiver on the real track anjou-gnss-log does): a walk in at 1.2 m/s, `still`
    /// seconds at the place, then a slow walk away at 0.35 m/s for 6 minutes and on at 1.2 m/s.
    /// Returns the recorder and when the stop began.
    func stop(still: Int, scatter: Double = 15) -> (VisitRecorder, Double) {
        var r = VisitRecorder()
        var t = 0.0, north = -360.0
        func feed() {
            let (dn, de) = jitter(Int(t), scatter)
            r.feed(fix(at: t, offset(north + dn, de), accuracy: nil)); t += 1
        }
        while north < 0 { feed(); north += 1.2 }
        north = 0
        let stop = t
        for _ in 0..<still { feed() }
        for _ in 0..<360 { feed(); north += 0.35 }
        for _ in 0..<300 { feed(); north += 1.2 }
        return (r, stop)
    }

    /// Four minutes at the place, left at a slow walk, is no visit: a fix of the walk that
    /// lands by chance where the receiver was a minute before is no evidence that it is still
    /// there. Six minutes is a visit, back-dated to the stop.
    @Test func aJitteryReceiversShortStopIsNoVisit() {
        #expect(stop(still: 240).0.arrivals.isEmpty)
        let (r, stop) = stop(still: 360)
        #expect(r.arrivals.count == 1)
        if let a = r.arrivals.first { #expect(abs(a.arrival - t0 - stop) <= 30, "arrival at \(a.arrival - t0), stop at \(stop)") }
    }
}

/// A logger that pauses while still (docs/semantics.md, "Visits": sparse loggers).
extension VisitSparseTests {
    /// A bike computer with auto-pause (the offsets, metres north and east, of
    /// galicia-ride-2022-07-23's stop, every 10 s on the ride, every second near the stop): a
    /// ride south past the place and back, a stop at 0 s, 475 s without a fix, the next 71 m
    /// away (0.15 m/s: the bike walked off) and the ride on. The silence is the stay: a visit
    /// from the ride in to the fix after it. Ending 60 m farther (0.28 m/s, a walk) it is none.
    @Test(arguments: [(0.0, true), (60, false)])
    func aPausedLoggersSilenceIsTheStay(farther: Double, visit: Bool) {
        var r = VisitRecorder()
        let ride: [(Double, Double, Double)] = [
            (-243, 517, -426), (-233, 475, -417), (-223, 433, -413), (-213, 393, -411), (-203, 357, -405),
            (-193, 330, -376), (-183, 335, -332), (-173, 345, -283), (-163, 342, -236), (-153, 334, -192),
            (-143, 316, -151), (-133, 285, -121), (-123, 250, -100), (-113, 210, -85), (-103, 169, -72),
            (-93, 129, -54), (-83, 90, -33), (-73, 50, -12), (-63, 0, -1), (-53, -58, 3), (-43, -103, 6),
            (-33, -86, 9), (-23, -60, 7), (-22, -57, 6), (-21, -54, 4), (-20, -51, 3), (-19, -47, 3),
            (-18, -45, 3), (-17, -42, 4), (-16, -38, 3), (-15, -35, 3), (-14, -32, 2), (-13, -29, 2),
            (-12, -26, 2), (-11, -23, 1), (-10, -20, 1), (-9, -17, 1), (-8, -15, 1), (-7, -11, 1), (-6, -9, 1),
            (-5, -6, 1), (-4, -4, 1), (-3, -2, 0), (-2, -1, 0), (-1, 0, 0), (0, 0, 0),
        ]
        let on: [(Double, Double, Double)] = [
            (475, 70, -15), (476, 72, -17), (477, 75, -19), (478, 78, -21), (479, 82, -24), (480, 87, -26),
            (481, 90, -29), (482, 95, -31), (487, 124, -48), (497, 214, -83), (507, 313, -142),
            (517, 348, -257), (527, 338, -378), (537, 444, -410), (547, 560, -450), (557, 680, -480),
        ]
        for (t, n, e) in ride { r.feed(gpx(at: t + 300, n, e)) }
        for (t, n, e) in on { r.feed(gpx(at: t + 300, n + farther, e)) }
        #expect(r.arrivals.count == (visit ? 1 : 0))
        if visit {
            let arrival: Double = r.arrivals.first.map { $0.arrival - t0 } ?? -1
            #expect(arrival >= 237 && arrival <= 300, "arrival at \(arrival)")
            let departure: Double? = r.departures.first?.departure.map { $0 - t0 }
            #expect(departure == 775)
        }
    }
}
