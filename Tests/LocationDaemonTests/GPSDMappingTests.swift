import CGPS
import LocationCore
import Testing
@testable import LocationDaemon

@Suite("gpsd TPV → Fix mapping")
struct GPSDMappingTests {
    let t = Timestamp(seconds: 1_730_281_082, nanoseconds: 123_456_789)

    @Test func fullThreeDFix() {
        let tpv = GPSDTPV(mode: 3, time: t, latitude: 52.219065, longitude: 21.010851667,
                          altHAE: 173.4, altMSL: 137.2, eph: 4.275, epv: 7.475,
                          speed: 1.5, track: 226)
        let expected = Fix(time: t, coordinate: Coordinate(latitude: 52.219065, longitude: 21.010851667),
                           mode: .threeD, altitudeHAE: 173.4, altitudeMSL: 137.2,
                           horizontalAccuracy: 4.275, verticalAccuracy: 7.475, speed: 1.5, course: 226)
        #expect(tpv.engineInput == .fix(expected))
    }

    @Test func nanFieldsBecomeNil() {
        let tpv = GPSDTPV(mode: 2, time: t, latitude: -33.5, longitude: 151.25)
        #expect(tpv.engineInput == .fix(Fix(time: t, coordinate: Coordinate(latitude: -33.5, longitude: 151.25), mode: .twoD)))
        let inf = GPSDTPV(mode: 3, time: t, latitude: 1, longitude: 2, altHAE: .infinity, eph: .nan)
        guard case .fix(let f)? = inf.engineInput else { Issue.record("no fix"); return }
        #expect(f.altitudeHAE == nil && f.horizontalAccuracy == nil && f.mode == .threeD)
    }

    /// An `eph`/`epv` of 0 is none: gpsd writes 0.000 from a no-fix GSA's VDOP of 0
    /// (haicom-305N), and an accuracy of 0 m would pass every accuracy gate. The NMEA decoder
    /// reads a σ or DOP of 0 the same way (docs/nmea.md, "Accuracy").
    @Test func aZeroAccuracyIsNone() {
        let tpv = GPSDTPV(mode: 3, time: t, latitude: 1, longitude: 2, eph: 0, epv: 0)
        guard case .fix(let f)? = tpv.engineInput else { Issue.record("no fix"); return }
        #expect(f.horizontalAccuracy == nil && f.verticalAccuracy == nil)
        let negative = GPSDTPV(mode: 3, time: t, latitude: 1, longitude: 2, eph: -1, epv: 7)
        guard case .fix(let g)? = negative.engineInput else { Issue.record("no fix"); return }
        #expect(g.horizontalAccuracy == nil && g.verticalAccuracy == 7)
    }

    @Test func noFixModes() {
        #expect(GPSDTPV(mode: 1, time: t).engineInput == .noFix(t))
        #expect(GPSDTPV(mode: 1, time: nil).engineInput == .noFix(nil))
        #expect(GPSDTPV(mode: 0, time: nil).engineInput == .noFix(nil))
        // A no-fix TPV with a stale position is still no fix.
        #expect(GPSDTPV(mode: 1, time: t, latitude: 1, longitude: 2).engineInput == .noFix(t))
    }

    @Test func positionTPVsThatCannotBeFixes() {
        // First-epoch partial TPV: position, no time.
        #expect(GPSDTPV(mode: 2, time: nil, latitude: 1, longitude: 2).engineInput == nil)
        #expect(GPSDTPV(mode: 3, time: t, latitude: .nan, longitude: 2).engineInput == nil)
        #expect(GPSDTPV(mode: 3, time: t, latitude: 1, longitude: .nan).engineInput == nil)
        #expect(GPSDTPV(mode: 2, time: t, latitude: 91, longitude: 2).engineInput == nil)
    }

    @Test func fromLibGPSFix() {
        var fix = gps_fix_t()
        fix.mode = 3
        fix.time = timespec(tv_sec: 1_730_281_082, tv_nsec: 5)
        fix.latitude = 48.1; fix.longitude = 11.5
        fix.altHAE = 500; fix.altMSL = .nan
        fix.eph = 3; fix.epv = .nan; fix.speed = 0.25; fix.track = .nan
        let tpv = GPSDTPV(fix)
        #expect(tpv.mode == 3 && tpv.altMSL.isNaN && tpv.epv.isNaN && tpv.track.isNaN)
        #expect(tpv.engineInput == .fix(Fix(
            time: Timestamp(nanoseconds: 1_730_281_082_000_000_005),
            coordinate: Coordinate(latitude: 48.1, longitude: 11.5), mode: .threeD,
            altitudeHAE: 500, horizontalAccuracy: 3, speed: 0.25)))

        var zero = gps_fix_t()
        zero.mode = 1
        #expect(GPSDTPV(zero).time == nil)
        #expect(GPSDTPV(zero).engineInput == .noFix(nil))
    }

    /// gpsd's `status` 5 (dead reckoning), 7 (surveyed-in or manual) and 8 (simulator, as
    /// garmin-geko201 in its demo mode reports) are no measurement: no fix, as NMEA's GGA
    /// quality 6–8 are not; a 2D fix carries no altitude (gpsd prints stale ones on some).
    /// Decoded by libgps from gpsd's own lines, so the status it fills in is what is tested.
    @Test func statusesThatAreNoMeasurementAndTwoDimensionalAltitudes() throws {
        let decoder = GPSDLineDecoder()
        func input(_ line: String) -> EngineInput? {
            var bytes = Array(line.utf8)
            guard case .tpv(let tpv) = bytes.withUnsafeMutableBytes({ decoder.decode(UnsafeRawBufferPointer($0)) }) else { return nil }
            return tpv.engineInput
        }
        let time = #""time":"2026-05-01T12:00:00.000Z","#
        for status in [5, 7, 8] {
            #expect(input(#"{"class":"TPV","status":\#(status),"mode":3,\#(time)"lat":40.4,"lon":-3.65,"altHAE":747.3,"eph":38.0}"#)
                    == .noFix(CivilTime(year: 2026, month: 5, day: 1, hour: 12).timestamp), "status \(status)")
        }
        // After a status 8, a TPV without one (gpsd omits 1) is a plain fix again.
        guard case .fix(let fix)? = input(#"{"class":"TPV","mode":3,\#(time)"lat":40.4,"lon":-3.65,"altHAE":747.3,"eph":38.0}"#) else {
            Issue.record("a TPV without status is no fix")
            return
        }
        #expect(fix.altitudeHAE == 747.3)
        for status in [2, 6] {
            #expect(input(#"{"class":"TPV","status":\#(status),"mode":3,\#(time)"lat":40.4,"lon":-3.65,"eph":38.0}"#)?.isFix == true, "status \(status)")
        }
        guard case .fix(let flat)? = input(#"{"class":"TPV","mode":2,\#(time)"lat":40.4,"lon":-3.65,"altHAE":747.3,"altMSL":695.7,"epv":69.0,"eph":38.0}"#) else {
            Issue.record("no 2D fix")
            return
        }
        #expect(flat.mode == .twoD && flat.altitudeHAE == nil && flat.altitudeMSL == nil && flat.verticalAccuracy == nil)
        #expect(flat.horizontalAccuracy == 38.0)
    }

    /// gpsd's times have no leap second (its clock is POSIX time; it never prints 23:59:60), and
    /// libgps reads one as the next day's first second: the fix of the second after it then has
    /// the same time, and is dropped as the same epoch (docs/semantics.md, "Time").
    @Test func aLeapSecondFromGPSDIsTheNextDaysFirstSecond() {
        let decoder = GPSDLineDecoder()
        var bytes = Array(#"{"class":"TPV","mode":2,"time":"2016-12-31T23:59:60.500Z","lat":1.0,"lon":2.0}"#.utf8)
        let message = bytes.withUnsafeMutableBytes { decoder.decode(UnsafeRawBufferPointer($0)) }
        guard case .tpv(let tpv) = message else { Issue.record("no TPV: \(message)"); return }
        #expect(tpv.time == CivilTime(year: 2017, month: 1, day: 1).timestamp.adding(seconds: 0.5))
    }

    @Test func deviceDeactivatedMarker() {
        #expect(GPSDMessage.deactivatedDevicePath(in: #"{"class":"DEVICE","path":"tcp://127.0.0.1:4000","activated":0}"#) == "tcp://127.0.0.1:4000")
        #expect(GPSDMessage.deactivatedDevicePath(in: #"{"class":"DEVICE","activated":0}"#) == "")
        #expect(GPSDMessage.deactivatedDevicePath(in: #"{"class":"DEVICE","path":"/dev/ttyS0","driver":"NMEA0183","activated":"2026-11-21T07:05:00.116Z"}"#) == nil)
        #expect(GPSDMessage.deactivatedDevicePath(in: #"{"class":"DEVICE","path":"x","activated":0.5}"#) == nil)
        #expect(GPSDMessage.deactivatedDevicePath(in: #"{"class":"TPV","activated":0}"#) == nil)
        #expect(GPSDMessage.hasClass("TPV", #"{"class":"TPV","mode":1}"#))
        #expect(!GPSDMessage.hasClass("TPV", #"{"class":"SKY"}"#))
    }

    @Test func backoffDoublesToCapAndResets() {
        var b = Backoff(initial: 0.1, maximum: 1.0)
        let seq = (0..<7).map { _ in b.next() }
        #expect(zip(seq, [0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0]).allSatisfy { abs($0 - $1) < 1e-12 })
        b.reset()
        #expect(b.next() == 0.1)
    }

    /// The daemon's defaults keep every wait between attempts ≤ 1 s, so once gpsd is back the
    /// next attempt comes within 1 s: the "≤ 2 s" promise of docs/gpsd.md (an attempt on a
    /// host that drops packets gives up after `connectTimeout`).
    @Test func defaultPolicyRetriesWithinOneSecond() {
        let c = GPSDSource.Configuration()
        #expect(c.maximumBackoff <= 1.0 && c.connectTimeout <= 2)
        var b = Backoff(initial: c.initialBackoff, maximum: c.maximumBackoff)
        #expect((0..<50).map { _ in b.next() }.allSatisfy { $0 <= 1.0 })
    }
}

extension EngineInput {
    var isFix: Bool { if case .fix = self { true } else { false } }
}
