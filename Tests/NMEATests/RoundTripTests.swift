import LocationCore
import NMEA
import Testing

/// NMEAWriter → NMEADecoder: what the writer says must come back, within the writer's
/// precision (5 decimals of minutes ≈ 2 cm, centiseconds, 3-decimal knots, 2-decimal course).
@Suite("Writer round trip")
struct RoundTripTests {
    struct Case: Sendable, CustomStringConvertible {
        var name: String
        var fix: Fix
        var quality: NMEAWriter.Quality
        var description: String { name }
    }

    static func time(_ y: Int, _ mo: Int, _ d: Int, _ h: Int, _ mi: Int, _ s: Int, _ cs: Int = 0) -> Timestamp {
        CivilTime(year: y, month: mo, day: d, hour: h, minute: mi, second: s, nanosecond: cs * 10_000_000).timestamp
    }

    static func fix(_ t: Timestamp, _ lat: Double, _ lon: Double, _ mode: FixMode,
                    alt: Double? = nil, speed: Double? = nil, course: Double? = nil) -> Fix {
        var f = Fix(time: t, coordinate: Coordinate(latitude: lat, longitude: lon), mode: mode)
        f.altitudeMSL = alt; f.speed = speed; f.course = course
        return f
    }

    static var gst: NMEAWriter.Quality {
        var q = NMEAWriter.Quality()
        q.sigmaLatitude = 1.5; q.sigmaLongitude = 2.5; q.sigmaAltitude = 3.0
        return q
    }

    static var dops: NMEAWriter.Quality {
        var q = NMEAWriter.Quality()
        q.hdop = 1.3; q.vdop = 2.1; q.geoidSeparation = 47.5
        return q
    }

    static let cases: [Case] = [
        Case(name: "north-east 3D, GST", fix: fix(time(2024, 5, 17, 12, 34, 56, 78), 48.1173, 11.516666, .threeD,
                                                  alt: 545.4, speed: 12.5, course: 84.4), quality: gst),
        Case(name: "south-west 3D, HDOP", fix: fix(time(2024, 5, 17, 8, 0, 1, 50), -33.868820, -151.209296, .threeD,
                                                   alt: -12.3, speed: 0.0, course: 359.99), quality: dops),
        Case(name: "south-east 2D", fix: fix(time(2019, 12, 31, 23, 59, 59, 99), -0.000001, 0.0000004, .twoD,
                                             speed: 3.2, course: 180), quality: dops),
        Case(name: "north-west 2D, GST", fix: fix(time(2020, 2, 29, 0, 0, 0), 89.999999, -179.999999, .twoD), quality: gst),
        Case(name: "midnight 3D", fix: fix(time(2021, 1, 1, 0, 0, 0), 52.0, -0.5, .threeD, alt: 10), quality: dops),
    ]

    @Test("A written epoch decodes to the same fix", arguments: cases)
    func roundTrip(_ c: Case) throws {
        let text = NMEAWriter().epoch(c.fix, quality: c.quality)
        var d = NMEADecoder()
        var epochs: [NMEAEpoch] = []
        d.feed(Array(text.utf8)) { epochs.append($0) }
        d.finish { epochs.append($0) }
        #expect(d.statistics.checksumFailures == 0 && d.statistics.malformed == 0)
        try #require(epochs.count == 1)
        let got = try #require(epochs[0].fix)
        Self.expectSame(got, c.fix, c.quality)
    }

    /// GSA lists at most 12 satellites and at least none: any count the writer is given makes a
    /// well-formed epoch (a count below 1 must not trap on an empty range).
    @Test(arguments: [-1, 0, 1, 12, 40])
    func anySatelliteCountWritesAWellFormedEpoch(_ satellites: Int) throws {
        var q = Self.dops
        q.satellites = satellites
        let want = Self.fix(Self.time(2024, 5, 17, 12, 0, 0), 48.1, 11.5, .threeD, alt: 500)
        var d = NMEADecoder()
        var epochs: [NMEAEpoch] = []
        d.feed(Array(NMEAWriter().epoch(want, quality: q).utf8)) { epochs.append($0) }
        d.finish { epochs.append($0) }
        #expect(d.statistics.checksumFailures == 0 && d.statistics.malformed == 0)
        try #require(epochs.count == 1)
        let got = try #require(epochs[0].fix)
        #expect(got.time == want.time && abs(got.coordinate.latitude - 48.1) < 1e-7 && abs(got.coordinate.longitude - 11.5) < 1e-7)
        if satellites >= 1 { Self.expectSame(got, want, q) }
    }

    static func expectSame(_ got: Fix, _ want: Fix, _ q: NMEAWriter.Quality) {
        // 1e-5 minute / 2 = 8.3e-8°.
        #expect(abs(got.coordinate.latitude - want.coordinate.latitude) < 1e-7)
        #expect(abs(got.coordinate.longitude - want.coordinate.longitude) < 1e-7)
        #expect(got.time == want.time)
        #expect(got.mode == want.mode)
        if let s = want.speed { #expect(abs(got.speed! - s) < 1e-3) } else { #expect(got.speed == nil) }
        if let c = want.course {
            let diff = abs(got.course! - c)
            #expect(min(diff, 360 - diff) < 0.006)
        } else { #expect(got.course == nil) }
        if let sLat = q.sigmaLatitude, let sLon = q.sigmaLongitude {
            #expect(abs(got.horizontalAccuracy! - 2.4477 * max(sLat, sLon)) < 1e-9)
        } else {
            #expect(abs(got.horizontalAccuracy! - q.hdop * 19.0) < 1e-9)
        }
        if want.mode == .threeD {
            #expect(abs(got.altitudeMSL! - want.altitudeMSL!) < 0.051)
            #expect(abs(got.altitudeHAE! - (want.altitudeMSL! + q.geoidSeparation)) < 0.11)
            if let sAlt = q.sigmaAltitude {
                #expect(abs(got.verticalAccuracy! - 1.96 * sAlt) < 1e-9)
            } else {
                #expect(abs(got.verticalAccuracy! - q.vdop * 23.0) < 1e-9)
            }
        } else {
            #expect(got.altitudeMSL == nil && got.verticalAccuracy == nil)
        }
    }

    @Test("Consecutive epochs across midnight keep their dates")
    func acrossMidnight() throws {
        let w = NMEAWriter(talker: "GN")
        let fixes = [
            Self.fix(Self.time(2023, 12, 31, 23, 59, 59, 50), -45.5, -70.25, .threeD, alt: 100, speed: 1, course: 270),
            Self.fix(Self.time(2024, 1, 1, 0, 0, 0, 0), -45.50001, -70.25002, .threeD, alt: 100.4, speed: 1, course: 271),
            Self.fix(Self.time(2024, 1, 1, 0, 0, 0, 50), -45.50002, -70.25004, .twoD, speed: 1.1, course: 272),
        ]
        let text = fixes.map { w.epoch($0, quality: Self.dops) }.joined()
        var d = NMEADecoder()
        var got: [Fix] = []
        d.feed(Array(text.utf8)) { if let f = $0.fix { got.append(f) } }
        d.finish { if let f = $0.fix { got.append(f) } }
        try #require(got.count == fixes.count)
        for (g, f) in zip(got, fixes) { Self.expectSame(g, f, Self.dops) }
    }

    @Test("A no-fix epoch decodes as no fix at its time")
    func noFix() {
        let t = Self.time(2024, 3, 1, 6, 7, 8, 90)
        var d = NMEADecoder()
        var epochs: [NMEAEpoch] = []
        d.feed(Array(NMEAWriter().noFixEpoch(at: t).utf8)) { epochs.append($0) }
        d.finish { epochs.append($0) }
        #expect(epochs.count == 1)
        #expect(epochs.first?.fix == nil && epochs.first?.time == t)
    }
}
