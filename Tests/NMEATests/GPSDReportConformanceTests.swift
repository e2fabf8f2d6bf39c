import Foundation
import GPSDProtocol
import LocationCore
import NMEA
import Testing

/// Compares our `TPV` reports with gpsd 3.22's for the same log (../shared/corpus/gpsd): for
/// every epoch both report, each field we write must be gpsd's, as text (same decimals), and
/// each field gpsd writes that we can know must be ours. Allowances are docs/compatibility.md's
/// "Differences from gpsd".
@Suite("TPV reports conform to gpsd 3.22")
struct GPSDReportConformanceTests {
    @Test("Each field of our TPVs is gpsd's", .enabled(if: Corpus.available, "gpsd corpus not found at ../shared/corpus/gpsd"),
          arguments: Corpus.logs)
    func log(_ name: String) throws {
        let problems = try tpvDifferences(name)
        let allowed = TPVAllowances.forLog[name]?.fields ?? []
        let unexpected = problems.filter { !allowed.contains($0.field) }
        let unused = allowed.filter { f in !problems.contains { $0.field == f } }
        #expect(unexpected.isEmpty, Comment(rawValue: "\(name): \(unexpected.count) differences:\n"
            + unexpected.prefix(20).map(\.message).joined(separator: "\n")))
        #expect(unused.isEmpty, "\(name): documented differences no longer seen: \(unused.sorted())")
    }

    @Test("Lines parse back field by field")
    func fieldTexts() {
        let f = tpvFieldTexts("{\"class\":\"TPV\",\"mode\":3,\"time\":\"2027-08-08T19:32:21.000Z\",\"lat\":-1.5}\r$GPVTG,x")
        #expect(f == ["class": "\"TPV\"", "mode": "3", "time": "\"2027-08-08T19:32:21.000Z\"", "lat": "-1.5"])
    }
}

/// Where gpsd 3.22 reports a field otherwise, by log (docs/compatibility.md, "Differences from
/// gpsd"). Each entry must still be needed: the test fails when one no longer is.
enum TPVAllowances {
    struct Entry { var fields: Set<String>; var reason: String }
    static let gsa = "GSA says 2D: gpsd's sticky 3D keeps mode 3 and the altitude (docs/nmea.md, \"Fix mode\")"
    static let geoid = "the receiver gives no geoid separation: gpsd computes altHAE from its own geoid model, we leave it out"
    static let motion = "gpsd's speed and track from other sentences (VTG) or its own position differences; ours are RMC's"
    static let forLog: [String: Entry] = [
        "eXplorist210.log": Entry(fields: ["altHAE"], reason: geoid),
        "garmin25lp.log": Entry(fields: ["mode", "altHAE", "altMSL", "alt"], reason: gsa),
        "haicom-305N.log": Entry(fields: ["mode", "altHAE", "altMSL", "alt"], reason: gsa),
        "hemi.log": Entry(fields: ["track", "speed"], reason: motion),
        "hp58534a.log": Entry(fields: ["track"], reason: motion),
        "humminbird-M37.log": Entry(fields: ["track", "speed", "altHAE", "altMSL", "alt", "lat", "lon"],
                                    reason: motion + "; " + geoid + "; two talkers' positions (docs/nmea.md)"),
        "iTrek.log": Entry(fields: ["altHAE"], reason: geoid),
        "magellan315.log": Entry(fields: ["altHAE"], reason: geoid),
        "mr-350p.log": Entry(fields: ["speed"], reason: motion),
        "mtk-3301.log": Entry(fields: ["mode", "altHAE", "altMSL", "alt"], reason: gsa),
        "oncore.log": Entry(fields: ["mode", "altHAE", "altMSL", "alt"], reason: gsa),
        "rgm3800.log": Entry(fields: ["mode", "altHAE", "altMSL", "alt"], reason: gsa),
        "sl869.log": Entry(fields: ["mode", "altHAE", "altMSL", "alt"], reason: gsa),
        "telit-he910.log": Entry(fields: ["altHAE"], reason: geoid),
        "tn204.log": Entry(fields: ["speed"], reason: motion),
        "tr737A+.log": Entry(fields: ["speed"], reason: motion),
        "ublox-lea-4h.log": Entry(fields: ["mode", "altHAE", "altMSL", "alt"], reason: gsa),
    ]
}

/// The fields of a TPV line as their JSON text (`"lat":52.1` → lat: "52.1"), by hand: the
/// comparison is of the digits gpsd wrote, which a JSON decoder's doubles would not keep.
func tpvFieldTexts(_ line: Substring) -> [String: String] {
    var fields: [String: String] = [:]
    // A TPV has no nested object: it ends at its first '}' (a .chk line may go on with NMEA).
    var rest = line.dropFirst().prefix(while: { $0 != "}" })
    while !rest.isEmpty {
        guard rest.first == "\"", let close = rest.dropFirst().firstIndex(of: "\"") else { break }
        let key = String(rest[rest.index(after: rest.startIndex)..<close])
        var value = rest[rest.index(close, offsetBy: 2)...]
        var end = value.startIndex
        if value.first == "\"" {
            end = value.index(after: value.dropFirst().firstIndex(of: "\"") ?? value.endIndex)
        } else {
            end = value.firstIndex(of: ",") ?? value.endIndex
        }
        fields[key] = String(value[..<end])
        value = value[end...]
        rest = value.first == "," ? value.dropFirst() : value
    }
    return fields
}

/// The TPV fields our reports can carry.
let comparedTPVFields = ["mode", "lat", "lon", "altHAE", "altMSL", "alt", "track", "speed"]

struct TPVDifference { var field: String; var message: String }

/// Our TPV for each fix gpsd also reports (at the same time, modulo gpsd's 1024-week shift)
/// against gpsd's last TPV of that epoch: every compared field, and the time of day to the ms.
func tpvDifferences(_ name: String) throws -> [TPVDifference] {
    let log = try Data(contentsOf: Corpus.directory.appendingPathComponent(name))
    let chk = try String(decoding: Data(contentsOf: Corpus.directory.appendingPathComponent(name + ".chk")), as: UTF8.self)
    var gpsdByTime: [Int64: [String: String]] = [:]
    for line in chk.split(separator: "\n") where line.hasPrefix("{\"class\":\"TPV\"") {
        let f = tpvFieldTexts(line)
        guard let time = f["time"].flatMap({ parseISOTime(String($0.dropFirst().dropLast())) }),
              let mode = f["mode"], mode == "2" || mode == "3" else { continue }
        gpsdByTime[weekKey(time)] = f  // the last TPV of an epoch is its completed one
    }
    var problems: [TPVDifference] = []
    for fix in decode(gpsfakeBytes(log)).fixes {
        guard let theirs = gpsdByTime[weekKey(fix.time.nanoseconds)] else { continue }
        let line = String(decoding: GPSDReport.tpv(fix, device: "x"), as: UTF8.self)
        let ours = tpvFieldTexts(line[...])
        for field in comparedTPVFields where ours[field] != theirs[field] {
            problems.append(TPVDifference(field: field, message: "\(field) at \(iso(fix.time.nanoseconds)): ours \(ours[field] ?? "absent") gpsd \(theirs[field] ?? "absent")"))
        }
        let timeOfDay = { (t: String?) in t?.split(separator: "T").last }
        if timeOfDay(ours["time"]) != timeOfDay(theirs["time"]) {
            problems.append(TPVDifference(field: "time", message: "time ours \(ours["time"] ?? "absent") gpsd \(theirs["time"] ?? "absent")"))
        }
    }
    return problems
}
