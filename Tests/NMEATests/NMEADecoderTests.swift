import LocationCore
import NMEA
import Testing

/// "$" + body + "*HH\r\n" with the checksum computed here, independently of the decoder.
func sentence(_ body: String) -> String {
    let x = body.utf8.reduce(UInt8(0)) { $0 ^ $1 }
    let hex = Array("0123456789ABCDEF")
    return "$\(body)*\(hex[Int(x >> 4)])\(hex[Int(x & 15)])\r\n"
}

func run(_ text: String, _ options: NMEADecoder.Options = .init()) -> (epochs: [NMEAEpoch], stats: NMEAStatistics) {
    run(Array(text.utf8), options)
}

func run(_ bytes: [UInt8], _ options: NMEADecoder.Options = .init()) -> (epochs: [NMEAEpoch], stats: NMEAStatistics) {
    var d = NMEADecoder(options: options)
    var out: [NMEAEpoch] = []
    d.feed(bytes) { out.append($0) }
    d.finish { out.append($0) }
    return (out, d.statistics)
}

func ts(_ y: Int, _ mo: Int, _ d: Int, _ h: Int, _ mi: Int, _ s: Int, ms: Int = 0) -> Timestamp {
    CivilTime(year: y, month: mo, day: d, hour: h, minute: mi, second: s, nanosecond: ms * 1_000_000).timestamp
}

let rmcBody = "GPRMC,123519,A,4807.038,N,01131.000,E,022.4,084.4,230394,003.1,W"

@Suite struct SentenceTests {
    @Test func rmcFields() throws {
        let r = run(sentence(rmcBody))
        #expect(r.epochs.count == 1)
        let f = try #require(r.epochs[0].fix)
        #expect(f.time == ts(1994, 3, 23, 12, 35, 19))
        #expect(abs(f.coordinate.latitude - (48 + 7.038 / 60)) < 1e-12)
        #expect(abs(f.coordinate.longitude - (11 + 31.0 / 60)) < 1e-12)
        #expect(abs(f.speed! - 22.4 * 1852 / 3600) < 1e-12)
        #expect(f.course == 84.4)
        #expect(f.mode == .twoD)
        #expect(f.altitudeMSL == nil && f.horizontalAccuracy == nil)
    }

    @Test func southWestHemispheres() throws {
        let r = run(sentence("GPRMC,000001,A,3351.000,S,15112.600,W,0,0,010120,,"))
        let f = try #require(r.epochs.first?.fix)
        #expect(abs(f.coordinate.latitude + 33.85) < 1e-12)
        #expect(abs(f.coordinate.longitude + 151.21) < 1e-12)
    }

    @Test func ggaWithGSAIn3D() throws {
        let text = sentence(rmcBody)
            + sentence("GPGGA,123519,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,")
            + sentence("GPGSA,A,3,04,05,,09,12,,,24,,,,,2.5,1.3,2.1")
        let f = try #require(run(text).epochs.first?.fix)
        #expect(f.mode == .threeD)
        #expect(f.altitudeMSL == 545.4)
        #expect(abs(f.altitudeHAE! - (545.4 + 46.9)) < 1e-9)
        // GSA's HDOP 1.3 (not GGA's 0.9) × gpsd's P_UERE 19.0; VDOP 2.1 × V_UERE 23.0.
        #expect(abs(f.horizontalAccuracy! - 1.3 * 19.0) < 1e-9)
        #expect(abs(f.verticalAccuracy! - 2.1 * 23.0) < 1e-9)
    }

    @Test func ggaAloneHDOPAndDGPSFactor() throws {
        let text = sentence("GPZDA,101010.00,02,01,2020,00,00")
            + sentence("GPGGA,101010.00,0100.000,N,00200.000,E,2,08,1.5,10.0,M,,M,,")
        let f = try #require(run(text).epochs.first?.fix)
        #expect(f.mode == .threeD)  // GGA with altitude, no GSA
        #expect(f.altitudeHAE == nil)  // no geoid separation: we do not model the geoid
        #expect(abs(f.horizontalAccuracy! - 1.5 * 4.75) < 1e-9)  // quality 2 = DGPS
        #expect(f.time == ts(2020, 1, 2, 10, 10, 10))
    }

    @Test func gstBeatsHDOP() throws {
        let text = sentence(rmcBody)
            + sentence("GPGGA,123519,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,")
            + sentence("GPGST,123519,2.0,3.0,1.0,45.0,1.5,2.5,4.0")
        let f = try #require(run(text).epochs.first?.fix)
        #expect(abs(f.horizontalAccuracy! - 2.4477 * 2.5) < 1e-9)
        #expect(abs(f.verticalAccuracy! - 1.96 * 4.0) < 1e-9)
    }

    /// `gpsdAccuracy`: gpsd's error model, the DOPs alone, a GST's σ ignored.
    @Test func gpsdAccuracyIgnoresGST() throws {
        let text = sentence(rmcBody)
            + sentence("GPGGA,123519,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,")
            + sentence("GPGSA,A,3,04,05,,09,12,,,24,,,,,2.5,1.3,2.1")
            + sentence("GPGST,123519,2.0,3.0,1.0,45.0,1.5,2.5,4.0")
        var o = NMEADecoder.Options(); o.gpsdAccuracy = true
        let f = try #require(run(text, o).epochs.first?.fix)
        #expect(abs(f.horizontalAccuracy! - 1.3 * 19.0) < 1e-9)
        #expect(abs(f.verticalAccuracy! - 2.1 * 23.0) < 1e-9)
        var both = NMEADecoder.Options(); both.asGPSD = true
        #expect(both.gpsdAccuracy && both.gpsdWeekRolloverCompatibility)
    }

    /// Receivers that do not compute a GST field write 0 there: no measurement, so the DOPs
    /// give the accuracy (an accuracy of 0 m passed every accuracy gate). σlat alone measured is
    /// still no horizontal σ; σalt alone still is a vertical one.
    @Test(arguments: [("0.0,0.0,0.0", 1.3 * 19.0, 2.1 * 23.0), ("1.5,0.0,4.0", 1.3 * 19.0, 1.96 * 4.0)])
    func gstSigmasOfZeroAreAbsent(sigmas: String, horizontal: Double, vertical: Double) throws {
        let text = sentence(rmcBody)
            + sentence("GPGGA,123519,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,")
            + sentence("GPGSA,A,3,04,05,,09,12,,,24,,,,,2.5,1.3,2.1")
            + sentence("GPGST,123519,2.0,3.0,1.0,45.0,\(sigmas)")
        let f = try #require(run(text).epochs.first?.fix)
        #expect(abs(f.horizontalAccuracy! - horizontal) < 1e-9)
        #expect(abs(f.verticalAccuracy! - vertical) < 1e-9)
    }

    /// NovAtel receivers report their WAAS/SBAS solution as GGA quality 9 (by default with SBAS
    /// on): a measured fix, as gpsd takes it, with GGA's altitude.
    @Test func ggaQualityNineIsAFix() throws {
        let text = sentence("GPZDA,120000.00,01,06,2025,00,00")
            + sentence("GPGGA,120000.00,4807.038,N,01131.000,E,9,08,1.0,545.4,M,46.9,M,,")
        let f = try #require(run(text).epochs.first?.fix)
        #expect(f.mode == .threeD)
        #expect(f.altitudeMSL == 545.4)
        #expect(abs(f.horizontalAccuracy! - 1.0 * 19.0) < 1e-9)  // gpsd's eph for it: 19
    }

    @Test func vtgKnotsToMetresPerSecond() throws {
        let text = sentence(rmcBody) + sentence("GPVTG,270.0,T,268.0,M,10.0,N,18.5,K,A")
        let f = try #require(run(text).epochs.first?.fix)
        #expect(abs(f.speed! - 10.0 * 0.514444444) < 1e-6)
        #expect(f.course == 270.0)
    }

    @Test func gnsAndGLL() throws {
        let gns = sentence("GNZDA,120000.00,05,06,2021,,") + sentence("GNGNS,120000.00,5000.000,N,00100.000,W,AN,10,0.8,100.0,47.0,,")
        let f = try #require(run(gns).epochs.first?.fix)
        #expect(abs(f.coordinate.latitude - 50) < 1e-12 && abs(f.coordinate.longitude + 1) < 1e-12)
        #expect(f.altitudeHAE == 147.0)
        let gnsInvalid = sentence("GNZDA,120000.00,05,06,2021,,") + sentence("GNGNS,120000.00,5000.000,N,00100.000,W,NN,10,0.8,100.0,47.0,,")
        #expect(run(gnsInvalid).epochs.first?.fix == nil)
        let gllV = sentence("GPZDA,120000.00,05,06,2021,,") + sentence("GPGLL,5000.000,N,00100.000,W,120000.00,V,N")
        let e = try #require(run(gllV).epochs.first)
        #expect(e.fix == nil && e.time == ts(2021, 6, 5, 12, 0, 0))
    }

    /// Mode E (dead reckoning), M (manual) and S (simulator) are not measurements, in every
    /// sentence with a mode indicator, as GGA's quality 6–8 are not; A, D and the RTK modes are.
    @Test(arguments: ["E", "M", "S", "N"])
    func modeIndicatorsThatAreNotMeasurementsGiveNoFix(_ mode: String) throws {
        let zda = sentence("GPZDA,120000.00,05,06,2021,,")
        let rmc = sentence("GPRMC,120000.00,A,5000.000,N,00100.000,W,1.0,90.0,050621,,,\(mode)")
        let gll = sentence("GPGLL,5000.000,N,00100.000,W,120000.00,A,\(mode)")
        let gns = sentence("GNGNS,120000.00,5000.000,N,00100.000,W,\(mode)\(mode),10,0.8,100.0,47.0,,")
        for text in [rmc, zda + gll, zda + gns] {
            let e = try #require(run(text).epochs.first, "\(text)")
            #expect(e.fix == nil && e.time == ts(2021, 6, 5, 12, 0, 0), "\(text)")
        }
        for measured in ["A", "D", "R", "F", "P"] {
            let text = sentence("GPRMC,120000.00,A,5000.000,N,00100.000,W,1.0,90.0,050621,,,\(measured)")
            #expect(run(text).epochs.first?.fix != nil, "mode \(measured)")
        }
    }

    @Test func noFixEpochs() {
        let r = run(sentence("GPRMC,120000,V,,,,,,,010120,,") + sentence("GPGGA,120001,,,,,0,00,,,M,,M,,"))
        #expect(r.epochs.map(\.fix) == [nil, nil])
        #expect(r.epochs.map(\.time) == [ts(2020, 1, 1, 12, 0, 0), ts(2020, 1, 1, 12, 0, 1)])
        #expect(r.epochs[1].engineInput == .noFix(ts(2020, 1, 1, 12, 0, 1)))
        #expect(r.stats.epochs == 2 && r.stats.fixes == 0)
    }

    /// After a reset receivers write garbage into a status-V RMC's date (gp-320fw's cold boot:
    /// 2006-12-16 in a 2019 log). One that would take the log's date back is not taken (nor a
    /// stale one at midnight, nor one a day behind); one that goes on from it is (the next day,
    /// days later in a log appended to), and so is one with nothing to check it against
    /// (`noFixEpochs`, or only `--date`'s). A ZDA's date in the same epoch stays.
    @Test func aVoidRMCsDateDoesNotTakeTheLogsDateBack() {
        func times(_ text: String, _ options: NMEADecoder.Options = .init()) -> [Timestamp?] { run(text, options).epochs.map(\.time) }
        let fix = sentence("GPRMC,235959,A,4808.9993,N,01135.0798,E,0.1,0.0,070419,,,A")
        #expect(times(fix + sentence("GPRMC,000001,V,,,,,,,161206,,,N")) == [ts(2019, 4, 7, 23, 59, 59), ts(2019, 4, 8, 0, 0, 1)])
        #expect(times(fix + sentence("GPRMC,000001,V,,,,,,,070419,,,N")) == [ts(2019, 4, 7, 23, 59, 59), ts(2019, 4, 8, 0, 0, 1)])
        #expect(times(fix + sentence("GPRMC,000001,V,,,,,,,080419,,,N") + sentence("GPRMC,000002,V,,,,,,,080419,,,N"))
                == [ts(2019, 4, 7, 23, 59, 59), ts(2019, 4, 8, 0, 0, 1), ts(2019, 4, 8, 0, 0, 2)])
        let noon = sentence("GPRMC,120000,A,4808.9993,N,01135.0798,E,0.1,0.0,070419,,,A")
        #expect(times(noon + sentence("GPRMC,120001,V,,,,,,,060419,,,N")) == [ts(2019, 4, 7, 12, 0, 0), ts(2019, 4, 7, 12, 0, 1)])
        #expect(times(noon + sentence("GPRMC,080000,V,,,,,,,100419,,,N")) == [ts(2019, 4, 7, 12, 0, 0), ts(2019, 4, 10, 8, 0, 0)])
        #expect(times(sentence("GPZDA,000001.00,07,04,2019,,") + sentence("GPRMC,000001.00,V,,,,,,,161206,,,N")) == [ts(2019, 4, 7, 0, 0, 1)])
        var assumed = NMEADecoder.Options()
        assumed.assumedDate = CivilTime(year: 2024, month: 1, day: 1)
        #expect(times(sentence("GPRMC,120000,V,,,,,,,070419,,,N"), assumed) == [ts(2019, 4, 7, 12, 0, 0)])
    }

    @Test(arguments: ["GP", "GN", "GL", "GA", "GB", "BD", "QZ", "IN", "II", "XY"])
    func anyTalker(_ talker: String) throws {
        let body = talker + String(rmcBody.dropFirst(2))
        let f = try #require(run(sentence(body)).epochs.first?.fix)
        #expect(f.time == ts(1994, 3, 23, 12, 35, 19))
    }
}

@Suite struct RobustnessTests {
    @Test func wrongChecksumDropped() {
        let bad = "$" + rmcBody + "*00\r\n"
        let r = run(bad)
        #expect(r.epochs.isEmpty)
        #expect(r.stats.checksumFailures == 1)
    }

    @Test func missingChecksumAcceptedUnlessRequired() {
        let text = "$" + rmcBody + "\r\n"
        let r = run(text)
        #expect(r.epochs.first?.fix != nil)
        #expect(r.stats.missingChecksum == 1)
        var o = NMEADecoder.Options(); o.requireChecksum = true
        #expect(run(text, o).epochs.isEmpty)
    }

    @Test func truncatedWithoutChecksumRejected() {
        let r = run("$GPRMC,123519,A,4807.0\r\n")
        #expect(r.epochs.isEmpty)
        #expect(r.stats.malformed == 1)
    }

    @Test func junkNULsCommentsEscapesAndLineEndings() throws {
        var bytes: [UInt8] = Array("# a gpsd comment $GPRMC,not,a,sentence\n".utf8)
        bytes += Array("garbage line\r".utf8)
        bytes += [0, 0, 0, 0x0A]
        bytes += Array("$GPGSV,3,1,12,28,14,150,41*00\n".utf8)  // unsupported (and wrong ck)
        bytes += Array("$PGRME,1.7,M,2.4,M,3.0,M*2D\n".utf8)
        let s = sentence(rmcBody)
        // Escape codes in the middle of the checksum, as et-332's capture has them.
        let star = s.firstIndex(of: "*")!
        let withEsc = String(s[..<s.index(star, offsetBy: 2)]) + "\u{1B}[H\u{1B}[J" + String(s[s.index(star, offsetBy: 2)...])
        bytes += Array(withEsc.utf8)
        let r = run(bytes)
        let f = try #require(r.epochs.first?.fix)
        #expect(f.time == ts(1994, 3, 23, 12, 35, 19))
        #expect(r.epochs.count == 1)
        #expect(r.stats.junkLines == 1)
    }

    @Test func gluedSentencesOnOneLine() throws {
        let text = sentence("GPGSA,A,3,04,05,,09,12,,,24,,,,,2.5,1.3,2.1").dropLast(1) + sentence(rmcBody)  // "\r\n" is one Character
        let f = try #require(run(String(text)).epochs.first?.fix)
        #expect(f.mode == .threeD)
    }

    @Test func chunkedFeedingIsIdentical() {
        let text = sentence(rmcBody)
            + sentence("GPGGA,123519,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,")
            + "junk\n"
            + sentence("GPRMC,123520,A,4807.040,N,01131.002,E,022.4,084.4,230394,003.1,W")
        let bytes = Array(text.utf8)
        let whole = run(bytes)
        #expect(whole.epochs.count == 2)
        for cut in 0...bytes.count {
            var d = NMEADecoder()
            var out: [NMEAEpoch] = []
            d.feed(Array(bytes[..<cut])) { out.append($0) }
            d.feed(Array(bytes[cut...])) { out.append($0) }
            d.finish { out.append($0) }
            #expect(out == whole.epochs, "split at \(cut)")
            #expect(d.statistics == whole.stats, "split at \(cut)")
        }
    }
}

@Suite struct DateTests {
    @Test func epochAssemblyByTimeOfDay() {
        let text = sentence("GPGGA,010203.50,0100.000,N,00100.000,E,1,08,1.0,1.0,M,,M,,")
            + sentence("GPRMC,010203.50,A,0100.000,N,00100.000,E,0,0,020304,,")
            + sentence("GPGGA,010204.50,0100.000,N,00100.000,E,1,08,1.0,1.0,M,,M,,")
        let r = run(text)
        #expect(r.epochs.map(\.time) == [ts(2004, 3, 2, 1, 2, 3, ms: 500), ts(2004, 3, 2, 1, 2, 4, ms: 500)])
        #expect(r.stats.fixes == 2)
    }

    @Test func midnightRolloverWithoutNewDate() {
        let text = sentence("GPRMC,235959,A,0100.000,N,00100.000,E,0,0,311299,,")
            + sentence("GPGGA,000000,0100.000,N,00100.000,E,1,08,1.0,1.0,M,,M,,")
        let r = run(text)
        #expect(r.epochs.map(\.time) == [ts(1999, 12, 31, 23, 59, 59), ts(2000, 1, 1, 0, 0, 0)])
    }

    /// A leap second (23:59:60, as a receiver prints it at the end of 2016-12-31) is the day's last
    /// nanosecond: its fix comes after 23:59:59 and before the next day's 00:00:00, each once. Read
    /// as 00:00:00 of the next day, it would have the next second's time, and the engine would drop
    /// that second's fix as the same epoch. A GGA-only log's carried date stays the day.
    @Test func aLeapSecondIsTheDaysLastInstant() throws {
        let last = ts(2016, 12, 31, 23, 59, 59).adding(seconds: 0.999_999_999)
        var text = ""
        for (t, date) in [("235959.0", "311216"), ("235960.0", "311216"), ("235960.5", "311216"), ("000000.0", "010117")] {
            text += sentence("GPRMC,\(t),A,0100.000,N,00100.000,E,0,0,\(date),,")
        }
        let r = run(text)
        #expect(r.epochs.map(\.time) == [ts(2016, 12, 31, 23, 59, 59), last, ts(2017, 1, 1, 0, 0, 0)])
        var engine = Engine()
        _ = engine.handle(.subscribe(SubscriberID(1), SubscriptionOptions()))
        let delivered = r.epochs.compactMap(\.engineInput).flatMap { engine.handle($0) }.compactMap { d -> Timestamp? in
            if case .location(let f) = d.event { f.time } else { nil }
        }
        #expect(delivered == r.epochs.map(\.time))
        var o = NMEADecoder.Options(); o.assumedDate = CivilTime(year: 2016, month: 12, day: 31)
        let gga = ["235959", "235960", "000000"].map { sentence("GPGGA,\($0),0100.000,N,00100.000,E,1,08,1.0,1.0,M,,M,,") }.joined()
        #expect(run(gga, o).epochs.map(\.time) == [ts(2016, 12, 31, 23, 59, 59), last, ts(2017, 1, 1, 0, 0, 0)])
    }

    @Test func missingDate() throws {
        let text = sentence("GPGLL,5119.881,N,00125.169,E,164326,A,D")
        let r = run(text)
        let e = try #require(r.epochs.first)
        #expect(e.time == nil && e.fix == nil)
        #expect(e.undatedCoordinate == Coordinate(latitude: 51 + 19.881 / 60, longitude: 1 + 25.169 / 60))
        #expect(e.timeOfDay == (16 * 3600 + 43 * 60 + 26) * 1_000_000_000)
        // A position, only undated: not "no fix" (that told subscribers of a GGA/GLL-only log
        // the receiver had none at every position), so no input at all.
        #expect(e.engineInput == nil)
        #expect(r.stats.undatedFixes == 1)
        // An undated epoch that says there is no fix still says so.
        let noFix = try #require(run(sentence("GPGGA,164326,,,,,0,00,,,M,,M,,")).epochs.first)
        #expect(noFix.engineInput == .noFix(nil))
        var o = NMEADecoder.Options(); o.assumedDate = CivilTime(year: 2012, month: 1, day: 19)
        #expect(run(text, o).epochs.first?.fix?.time == ts(2012, 1, 19, 16, 43, 26))
    }

    @Test func zdaDatesTheEpoch() {
        let text = sentence("GPZDA,051134.000,04,07,2012,,")
            + sentence("GPGGA,051134.000,4744.6980,N,12206.7275,W,1,05,1.9,135.4,M,-17.1,M,18.8,0000")
        #expect(run(text).epochs.first?.fix?.time == ts(2012, 7, 4, 5, 11, 34))
    }

    /// A ZDA still saying the old day for a second after midnight dated that second's fix a day
    /// back (a jump of a day back, and one forward at the next). Now the carried date dates it,
    /// and in an epoch with a status-A RMC that RMC's date does (the first of a log too). A ZDA
    /// date that goes back and stays (a log spliced from an older one) is taken from the next.
    @Test func aZDAThatTakesTheDateBackDatesNothingAlone() {
        func epoch(_ t: String, _ date: String) -> String {
            sentence("GPGGA,\(t),4744.6980,N,12206.7275,W,1,05,1.9,135.4,M,-17.1,M,,") + sentence("GPZDA,\(t),\(date),,")
        }
        let stale = epoch("235959.00", "31,12,2020") + epoch("000000.00", "31,12,2020") + epoch("000001.00", "01,01,2021")
        #expect(run(stale).epochs.map(\.time) == [ts(2020, 12, 31, 23, 59, 59), ts(2021, 1, 1, 0, 0, 0), ts(2021, 1, 1, 0, 0, 1)])
        let withRMC = sentence("GPRMC,000000.00,A,4744.6980,N,12206.7275,W,0.1,0.0,010121,,,A") + sentence("GPZDA,000000.00,31,12,2020,,")
        #expect(run(withRMC).epochs.map(\.time) == [ts(2021, 1, 1, 0, 0, 0)])
        let spliced = epoch("120000.00", "05,03,2021") + epoch("120001.00", "01,02,2021") + epoch("120002.00", "01,02,2021")
        #expect(run(spliced).epochs.map(\.time) == [ts(2021, 3, 5, 12, 0, 0), ts(2021, 3, 5, 12, 0, 1), ts(2021, 2, 1, 12, 0, 2)])
        // At 10 Hz the stale second's own ZDAs confirm nothing.
        let tenHertz = epoch("235959.90", "31,12,2020") + epoch("000000.00", "31,12,2020") + epoch("000000.10", "31,12,2020")
            + epoch("000000.20", "01,01,2021")
        #expect(run(tenHertz).epochs.map(\.time).dropFirst().allSatisfy { $0.map { $0 >= ts(2021, 1, 1, 0, 0, 0) } ?? false },
                "\(run(tenHertz).epochs.map(\.time))")
    }

    /// After a reset a receiver's status-V RMCs tell a garbage time of day (gp-320fw's cold
    /// boot: 00:03:46, then 23:59:48, 19:35:15, 23:59:55, …). Each jump of less than 12 h moved
    /// the date carried to later epochs on, and two of them (23:59:48, then 04:00) dated the next
    /// GGA-only fix a day ahead. An epoch without a fix or a date of its own whose time does not
    /// go on from the epoch before (later by less than an hour) moves nothing; a receiver
    /// without a fix overnight still carries the date across midnight.
    @Test func aVoidRMCsGarbageTimeDoesNotMisdateTheFixesAfterIt() {
        let gga = { (t: String) in sentence("GPGGA,\(t),4808.9993,N,01135.0798,E,1,05,1.9,535.4,M,47.1,M,,") }
        let text = sentence("GPRMC,120000,A,4808.9993,N,01135.0798,E,0.1,0.0,070419,,,A")
            + sentence("GPRMC,235948,V,,,,,,,161206,,,N") + sentence("GPRMC,040000,V,,,,,,,161206,,,N") + gga("120005")
        #expect(run(text).epochs.last?.fix?.time == ts(2019, 4, 7, 12, 0, 5))
        var o = NMEADecoder.Options(); o.assumedDate = CivilTime(year: 2019, month: 4, day: 7)
        var night = gga("180000")
        for k in 1...28 {  // no fix every half hour, 18:30 to 08:00
            let minutes = 18 * 60 + 30 * k, h = minutes / 60 % 24, mi = minutes % 60
            night += sentence("GPGGA,\(h < 10 ? "0" : "")\(h)\(mi < 10 ? "0" : "")\(mi)00,,,,,0,00,,,M,,M,,")
        }
        night += gga("080030")
        #expect(run(night, o).epochs.last?.fix?.time == ts(2019, 4, 8, 8, 0, 30))
    }

    /// A year past what a Timestamp holds (it would trap on Int64 overflow) is malformed, like
    /// one before 1980, and leaves the epoch undated.
    @Test(arguments: ["99999999", "2262", "1979"])
    func zdaYearsOutOfRangeAreMalformed(_ year: String) {
        let r = run(sentence("GPZDA,051134.000,04,07,\(year),,")
                    + sentence("GPGGA,051134.000,4744.6980,N,12206.7275,W,1,05,1.9,135.4,M,-17.1,M,18.8,0000"))
        #expect(r.stats.malformed == 1)
        #expect(r.epochs.first?.time == nil)
        let last = run(sentence("GPZDA,051134.000,31,12,2261,,")
                       + sentence("GPGGA,051134.000,4744.6980,N,12206.7275,W,1,05,1.9,135.4,M,-17.1,M,18.8,0000"))
        #expect(last.epochs.first?.time == ts(2261, 12, 31, 5, 11, 34))
    }

    /// A receiver whose ZDA runs ahead of its fixes (ac12's by 2 s): an epoch of ZDA alone is
    /// no report of a lost fix, only a date for the epochs after it.
    @Test func anEpochOfZDAAloneDatesTheNextOnesAndIsNoEpochItself() {
        var text = sentence("GPZDA,120012.00,31,12,2020,,")
        for s in 12...15 {
            text += sentence("GPGGA,1200\(s).00,4744.6980,N,12206.7275,W,1,05,1.9,135.4,M,-17.1,M,,")
            text += sentence("GPZDA,1200\(s + 2).00,31,12,2020,,")
        }
        let r = run(text)
        #expect(r.epochs.map(\.time) == (12...15).map { ts(2020, 12, 31, 12, 0, $0) })
        #expect(r.epochs.allSatisfy { $0.fix != nil } && r.stats.epochs == 4)
    }

    @Test(arguments: [("99", 1999), ("80", 1980), ("79", 2079), ("00", 2000), ("19", 2019)])
    func twoDigitYears(_ yy: String, _ year: Int) {
        let r = run(sentence("GPRMC,120000,A,0100.000,N,00100.000,E,0,0,0101\(yy),,"))
        #expect(r.epochs.first?.fix?.time == ts(year, 1, 1, 12, 0, 0))
    }

    @Test func gpsdWeekRolloverCompatibility() {
        var o = NMEADecoder.Options(); o.gpsdWeekRolloverCompatibility = true
        let old = sentence("GPRMC,120000,A,0100.000,N,00100.000,E,0,0,220899,,")
        #expect(run(old, o).epochs.first?.fix?.time == ts(2019, 4, 7, 12, 0, 0))
        let new = sentence("GPRMC,120000,A,0100.000,N,00100.000,E,0,0,010117,,")
        #expect(run(new, o).epochs.first?.fix?.time == ts(2017, 1, 1, 12, 0, 0))
    }
}
