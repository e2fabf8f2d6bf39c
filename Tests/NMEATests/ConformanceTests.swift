import Foundation
import LocationCore
import NMEA
import Testing

/// Compares our decoder with gpsd 3.22 on the gpsd regression logs in ../shared/corpus/gpsd.
/// Every allowance here is written down in docs/nmea.md, "Differences from gpsd".
enum Corpus {
    static let directory: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent()  // NMEATests
        .deletingLastPathComponent()  // Tests
        .deletingLastPathComponent()  // package root
        .appendingPathComponent("../shared/corpus/gpsd").standardizedFileURL

    static let logs: [String] = {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return names.filter { $0.hasSuffix(".log") }.sorted()
    }()

    static var available: Bool {
        let ok = !logs.isEmpty
        if !ok { print("ConformanceTests skipped: no gpsd corpus (*.log) at \(directory.path)") }
        return ok
    }

    /// gpsd 3.20–3.22 moves dates before 2017-01-01 forward by exactly 1024 GPS weeks.
    static let weekShift: Int64 = 619_315_200 * 1_000_000_000
    static let cutoff2017: Int64 = 1_483_228_800 * 1_000_000_000
}

struct GPSDFix {
    var time: Int64?
    var lat: Double
    var lon: Double
    var mode: Int
}

/// TPVs with a position from a `.chk` (JSON lines, echoed NMEA lines ignored).
func gpsdFixes(_ chk: Data) -> [GPSDFix] {
    var out: [GPSDFix] = []
    for line in chk.split(separator: UInt8(ascii: "\n")) where line.first == UInt8(ascii: "{") {
        guard let obj = try? JSONSerialization.jsonObject(with: Data(line)) as? [String: Any],
              obj["class"] as? String == "TPV",
              let lat = obj["lat"] as? Double, let lon = obj["lon"] as? Double,
              let mode = obj["mode"] as? Int, mode >= 2 else { continue }
        out.append(GPSDFix(time: (obj["time"] as? String).flatMap(parseISOTime), lat: lat, lon: lon, mode: mode))
    }
    return out
}

/// "2027-08-08T19:32:21.000Z" → ns since 1970, by hand (no Foundation date parsing quirks).
func parseISOTime(_ s: String) -> Int64? {
    let u = Array(s.utf8)
    func num(_ a: Int, _ b: Int) -> Int? {
        var v = 0
        for i in a..<b { guard i < u.count, u[i] >= 48, u[i] <= 57 else { return nil }; v = v * 10 + Int(u[i] - 48) }
        return v
    }
    guard u.count >= 20, let y = num(0, 4), let mo = num(5, 7), let d = num(8, 10),
          let h = num(11, 13), let mi = num(14, 16), let sec = num(17, 19) else { return nil }
    var ns = 0
    if u[19] == UInt8(ascii: "."), let z = u.firstIndex(of: UInt8(ascii: "Z")), z > 20, let f = num(20, z) {
        ns = f
        for _ in 0..<(9 - (z - 20)) { ns *= 10 }
    }
    return CivilTime(year: y, month: mo, day: d, hour: h, minute: mi, second: sec, nanosecond: ns).timestamp.nanoseconds
}

/// gpsfake strips a log's declared delay cookie (`# Delay-Cookie: | 0.01`) before writing;
/// the `.chk` reflects that, so we do the same.
func gpsfakeBytes(_ data: Data) -> [UInt8] {
    var bytes = [UInt8](data)
    if let text = String(data: data.prefix(2000), encoding: .isoLatin1),
       let r = text.range(of: "# Delay-Cookie: ") {
        let cookie = text[r.upperBound].asciiValue!
        bytes.removeAll { $0 == cookie }
    }
    return bytes
}

struct OurResult {
    var fixes: [Fix] = []
    var undated: [Coordinate] = []
    var stats = NMEAStatistics()
}

func decode(_ bytes: [UInt8], options: NMEADecoder.Options = .init()) -> OurResult {
    var d = NMEADecoder(options: options)
    var r = OurResult()
    let sink: (NMEAEpoch) -> Void = { e in
        if let f = e.fix { r.fixes.append(f) }
        if let c = e.undatedCoordinate { r.undated.append(c) }
    }
    d.feed(bytes, onEpoch: sink)
    d.finish(onEpoch: sink)
    r.stats = d.statistics
    return r
}

@Suite("Conformance with gpsd 3.22")
struct ConformanceTests {
    @Test("Distinct fixes match gpsd's TPVs", .enabled(if: Corpus.available, "gpsd corpus not found at ../shared/corpus/gpsd"),
          arguments: Corpus.logs)
    func log(_ name: String) throws {
        let problems = try conformanceDifferences(name)
        let allowed = Allowances.forLog[name] ?? []
        let prefixes = allowed.flatMap { a in a.epochs.map { a.kind.rawValue + $0 } }
        let unexpected = problems.filter { p in !prefixes.contains { p.hasPrefix($0) } }
        let unused = prefixes.filter { a in !problems.contains { $0.hasPrefix(a) } }
        #expect(unexpected.isEmpty, Comment(rawValue: "\(name): \(unexpected.count) differences:\n" + unexpected.prefix(20).joined(separator: "\n")))
        #expect(unused.isEmpty, "\(name): documented allowances no longer needed: \(unused)")
    }
}

/// Every difference between our fixes and gpsd's TPVs for one log, as messages.
func conformanceDifferences(_ name: String) throws -> [String] {
    let log = try Data(contentsOf: Corpus.directory.appendingPathComponent(name))
    let chk = try Data(contentsOf: Corpus.directory.appendingPathComponent(name + ".chk"))
    let ours = decode(gpsfakeBytes(log))
    let theirs = gpsdFixes(chk)

    // gpsd's last TPV for a time is its completed epoch; earlier ones are partial.
    // Times are compared modulo 1024 GPS weeks: gpsd shifts pre-2017 NMEA dates, except
    // when a proprietary sentence gave it the GPS week (garmin17n's PGRMF).
    var gpsdByTime: [Int64: GPSDFix] = [:]
    for f in theirs { if let t = f.time { gpsdByTime[weekKey(t)] = f } }
    let ourByTime = Dictionary(ours.fixes.map { (weekKey($0.time.nanoseconds), $0) },
                               uniquingKeysWith: { _, last in last })
    let lastKey = ours.fixes.last.map { weekKey($0.time.nanoseconds) }

    var problems: [String] = []
    for (t, g) in gpsdByTime.sorted(by: { $0.key < $1.key }) {
        guard let f = ourByTime[t] else {
            problems.append("gpsd fix at \(iso(g.time!)) (\(g.lat), \(g.lon)) missing from ours")
            continue
        }
        if abs(f.coordinate.latitude - g.lat) > 1e-6 || abs(f.coordinate.longitude - g.lon) > 1e-6 {
            problems.append("\(iso(f.time.nanoseconds)): ours (\(f.coordinate.latitude), \(f.coordinate.longitude)) gpsd (\(g.lat), \(g.lon))")
        }
        if Int(f.mode.rawValue) != g.mode {
            problems.append("mode ours \(f.mode.rawValue) gpsd \(g.mode) at \(iso(f.time.nanoseconds))")
        }
    }
    // gpsd reports an epoch when the next one starts; the log's last epoch never
    // completes there, so our last fix may be missing from gpsd (documented).
    // gpsd reports its first epoch before the sentence with the date arrives, i.e.
    // without time; our first fix may then be absent from gpsd's timed TPVs.
    let firstKey = ours.fixes.first.map { weekKey($0.time.nanoseconds) }
    let gpsdUndated = theirs.filter { $0.time == nil }
    func gpsdUndatedNear(_ c: Coordinate) -> Bool {
        gpsdUndated.contains { abs($0.lat - c.latitude) <= 1e-6 && abs($0.lon - c.longitude) <= 1e-6 }
    }
    for (t, f) in ourByTime.sorted(by: { $0.key < $1.key }) where gpsdByTime[t] == nil && t != lastKey {
        if t == firstKey && gpsdUndatedNear(f.coordinate) { continue }
        problems.append("our fix at \(iso(f.time.nanoseconds)) (\(f.coordinate.latitude), \(f.coordinate.longitude)) not in gpsd")
    }
    // gpsd's time-less TPVs come from epochs it could not date yet; each must be one of
    // our undated epochs' positions, or the first dated epoch's (gpsd reports the partial
    // epoch before the sentence carrying the date arrives).
    let firstDated = ours.fixes.first?.coordinate
    for g in theirs where g.time == nil {
        let near: (Coordinate) -> Bool = { abs($0.latitude - g.lat) <= 1e-6 && abs($0.longitude - g.lon) <= 1e-6 }
        if !(ours.undated.contains(where: near) || firstDated.map(near) == true) {
            problems.append("gpsd undated fix (\(g.lat), \(g.lon)) matches none of ours")
        }
    }
    return problems
}

func weekKey(_ ns: Int64) -> Int64 {
    let r = ns % Corpus.weekShift
    return r < 0 ? r + Corpus.weekShift : r
}

func iso(_ ns: Int64) -> String {
    let c = CivilTime(Timestamp(nanoseconds: ns))
    func p(_ v: Int, _ w: Int) -> String { let s = String(v); return String(repeating: "0", count: max(0, w - s.count)) + s }
    return "\(p(c.year, 4))-\(p(c.month, 2))-\(p(c.day, 2))T\(p(c.hour, 2)):\(p(c.minute, 2)):\(p(c.second, 2)).\(p(c.nanosecond / 1_000_000, 3))Z"
}

/// Exact, documented differences (docs/nmea.md, "Differences from gpsd"). Each allowance is
/// one log × one kind × the epochs it covers: a difference is allowed when its message starts
/// with `kind.rawValue + epoch`, and every such prefix must match at least one difference, so
/// the test fails as soon as an allowance is no longer needed.
struct Allowance {
    enum Kind: String {
        /// The epoch's GSA says 2D; gpsd 3.22 reports 3D (docs: "Fix mode").
        case gsaSays2D = "mode ours 2 gpsd 3 at "
        /// A fix we report that gpsd 3.22 does not.
        case extraFix = "our fix at "
        /// A timed gpsd fix we report at another time (bt451's date).
        case gpsdFixElsewhere = "gpsd fix at "
        /// gpsd's time-less partial TPV matching none of our positions; epoch = its position.
        case gpsdPartial = "gpsd undated fix ("
        /// Same epoch, different position; epoch = its time.
        case position = ""
    }
    var kind: Kind
    /// Time (ISO 8601, ours; gpsd's for gpsdFixElsewhere) or position prefixes.
    var epochs: [String]
    var reason: String
}

/// `prefix` followed by each two-digit number, e.g. seconds of one minute.
private func each(_ prefix: String, _ values: [Int]) -> [String] {
    values.map { prefix + ($0 < 10 ? "0" : "") + String($0) + "." }
}

enum Allowances {
    static let gsaReason = "GSA says 2D (GGA carries an altitude, mostly from 3 satellites); gpsd's sticky 3D"
    static let startupReason = "start-up: gpsd's end-of-cycle detector has not yet learnt this receiver's cycle"
    static let partialReason = "gpsd's partial TPV from the first cycle (not analysed further)"
    static let ggaNoSatellitesReason = "GGA quality 1 with 00 satellites used: gpsd sets no fix, we trust the quality field"

    static let forLog: [String: [Allowance]] = [
        "april6_2019.log": [
            Allowance(kind: .gpsdPartial, epochs: ["48.483341667, 0.366691667"],
                      reason: "RMC with a malformed date (`2208-1`): gpsd keeps its position without time, we drop the malformed sentence"),
        ],
        "bt451.log": [
            Allowance(kind: .extraFix, epochs: ["2009-12-09T14:33:06."], reason: "time jumps back 52 min: gpsd advances the date, we keep it"),
            Allowance(kind: .gpsdFixElsewhere, epochs: ["2029-07-26T14:33:06."], reason: "same epoch, gpsd's date one day later"),
            Allowance(kind: .extraFix, epochs: ["2009-12-09T15:25:08.500"], reason: "epoch cut short before its ZDA (gpsd's cycle ender) by the splice"),
        ],
        "bundg_zeus_9.log": [
            Allowance(kind: .position,
                      epochs: each("2018-08-20T09:48:", [16, 17, 21, 22, 23, 25, 26, 27, 28, 33, 34, 35, 36, 37, 38, 39,
                                                         43, 44, 45, 46, 47, 50, 51, 52, 53]),
                      reason: "RMC/GLL and GGA from two devices disagree by ~1.5e-5°: gpsd reports RMC's (GLL's at :34), we the last (GGA)"),
            Allowance(kind: .gpsdPartial, epochs: ["52.850156667, 5.31362"], reason: partialReason),
        ],
        "ch-4711.log": [Allowance(kind: .gsaSays2D, epochs: each("2009-12-05T13:56:", Array(51...57)), reason: gsaReason)],
        "foretrex-201.log": [Allowance(kind: .gsaSays2D, epochs: each("2010-08-26T20:00:", [4, 6, 8, 10, 12, 14]), reason: gsaReason)],
        "garmin-10x.log": [Allowance(kind: .gsaSays2D, epochs: each("2010-07-18T16:50:", [9, 44]), reason: gsaReason)],
        "garmin-geko201.log": [
            Allowance(kind: .gpsdPartial, epochs: ["40.397666667, -3.652716667"],
                      reason: "simulator (GGA quality 8, RMC V): gpsd reports its position as status 8, we report no fix"),
        ],
        "garmin25lp.log": [
            Allowance(kind: .gsaSays2D, epochs: each("2005-03-15T12:03:", Array(27...35)), reason: gsaReason),
            Allowance(kind: .extraFix, epochs: ["2005-03-15T12:03:26."], reason: ggaNoSatellitesReason),
        ],
        "gp-320fw-2019-04-06-overflow.log": [Allowance(kind: .extraFix, epochs: ["2019-04-06T23:57:26.020"], reason: startupReason)],
        "haicom-305N.log": [
            Allowance(kind: .gsaSays2D, epochs: ["2007-04-08T09:53:07.801"], reason: gsaReason),
            Allowance(kind: .extraFix, epochs: ["2007-04-08T09:53:04.802"], reason: ggaNoSatellitesReason),
        ],
        "hemi.log": [
            Allowance(kind: .extraFix,
                      epochs: (50...57).flatMap { s in ["2018-09-07T19:40:\(s).000", "2018-09-07T19:40:\(s).500"] }.dropLast(),
                      reason: ggaNoSatellitesReason + " (GGA-only receiver, 10 Hz)"),
        ],
        "humminbird-M37.log": [Allowance(kind: .extraFix, epochs: ["2006-09-16T19:41:02.", "2006-09-16T19:41:04."], reason: startupReason)],
        "mtk-3301.log": [
            Allowance(kind: .gsaSays2D, epochs: ["2008-08-23T08:14:39."], reason: gsaReason),
            Allowance(kind: .gpsdPartial, epochs: ["52.21631655, 6.8849651"], reason: partialReason),
        ],
        "mtk-3329.log": [Allowance(kind: .gsaSays2D, epochs: each("2011-02-21T10:21:", Array(28...31)), reason: gsaReason)],
        "myguide-3100.log": [
            Allowance(kind: .gpsdPartial, epochs: ["56.216593333, -3.111638333", "56.21658, -3.111893333"],
                      reason: "GGA with an empty quality field and RMC V: gpsd takes GGA's position, we do not"),
        ],
        "oncore.log": [Allowance(kind: .gsaSays2D, epochs: each("2005-04-08T17:12:", Array(45...50)), reason: gsaReason)],
        "rgm3800.log": [Allowance(kind: .gsaSays2D, epochs: ["2008-08-21T10:25:24.342"], reason: gsaReason)],
        "rst39.log": [Allowance(kind: .extraFix, epochs: ["2014-02-19T20:41:32.100"], reason: startupReason)],
        "sl869.log": [Allowance(kind: .gsaSays2D, epochs: ["2012-11-25T10:21:43.990", "2012-11-25T10:21:44.000"], reason: gsaReason)],
        "tn204.log": [Allowance(kind: .extraFix, epochs: ["2002-10-26T23:01:49."], reason: startupReason)],
        "tomtom-mkII.log": [Allowance(kind: .gsaSays2D, epochs: each("2010-06-20T17:57:", [38, 39]), reason: gsaReason)],
        "tr737A+.log": [Allowance(kind: .gpsdPartial, epochs: ["44.06863, -121.314346667"], reason: partialReason)],
        "triton400.log": [
            Allowance(kind: .extraFix, epochs: ["2013-04-01T03:01:30."],
                      reason: "GGA glued to the next GLL by a lost CR/LF: the epoch is a lone GLL, which gpsd does not report"),
        ],
        "ublox-lea-4h.log": [Allowance(kind: .gsaSays2D, epochs: ["2006-08-10T03:08:58.", "2006-08-10T03:08:59.", "2006-08-10T03:09:00.", "2006-08-10T03:09:01."], reason: gsaReason)],
    ]
}
