import Foundation
import LocationCore
import NMEA
import Testing

/// `NMEADecoder.Options.asGPSD` (`locationctl replay --as-gpsd`) against gpsd 3.22's own
/// output for real logs (../shared/corpus/gpsd): its dates and its `eph`.
@Suite("Decoding as gpsd reports a log")
struct AsGPSDTests {
    /// gpsd's timed TPVs with a fix: the last one for each time (its complete epoch).
    static func gpsdTPVs(_ name: String) throws -> [(time: Int64, eph: Double?)] {
        let chk = try Data(contentsOf: Corpus.directory.appendingPathComponent(name + ".chk"))
        var byTime: [Int64: Double?] = [:]
        var order: [Int64] = []
        for line in chk.split(separator: UInt8(ascii: "\n")) where line.first == UInt8(ascii: "{") {
            guard let obj = try? JSONSerialization.jsonObject(with: Data(line)) as? [String: Any],
                  obj["class"] as? String == "TPV", let mode = obj["mode"] as? Int, mode >= 2,
                  let time = (obj["time"] as? String).flatMap(parseISOTime) else { continue }
            if byTime[time] == nil { order.append(time) }
            byTime[time] = obj["eph"] as? Double
        }
        return order.map { ($0, byTime[$0] ?? nil) }
    }

    static func fixes(_ name: String, asGPSD: Bool) throws -> [Int64: Fix] {
        let bytes = gpsfakeBytes(try Data(contentsOf: Corpus.directory.appendingPathComponent(name)))
        var options = NMEADecoder.Options()
        options.asGPSD = asGPSD
        return Dictionary(decode(bytes, options: options).fixes.map { ($0.time.nanoseconds, $0) }, uniquingKeysWith: { $1 })
    }

    /// gr8013-w (2015, reported by gpsd in 2035): every gpsd time is a fix time with the
    /// option; without it the log's own date, 1024 weeks earlier.
    @Test(.enabled(if: Corpus.available, "gpsd corpus not found at ../shared/corpus/gpsd"),
          arguments: ["gr8013-w.log", "isync.log"])
    func anOldDatedLogGetsGPSDsDates(_ name: String) throws {
        let gpsd = try Self.gpsdTPVs(name)
        try #require(!gpsd.isEmpty && gpsd.allSatisfy { $0.time - Corpus.weekShift < Corpus.cutoff2017 },
                     "\(name): expected a log dated before 2017 that gpsd shifted")
        let shifted = try Self.fixes(name, asGPSD: true)
        let own = try Self.fixes(name, asGPSD: false)
        #expect(gpsd.filter { shifted[$0.time] == nil }.map { iso($0.time) } == [])
        #expect(gpsd.filter { own[$0.time - Corpus.weekShift] == nil }.map { iso($0.time) } == [])
        #expect(gpsd.filter { own[$0.time] != nil }.map { iso($0.time) } == [])
    }

    /// Logs with GST: the option gives gpsd's `eph` (HDOP × 19 m, or 4.75 m with DGPS): the
    /// epoch's own DOPs', or, where gpsd's DOPs come an epoch late (docs/gpsd.md), the
    /// previous fix's. Without it the GST's 95 % radius, which is neither.
    @Test(.enabled(if: Corpus.available, "gpsd corpus not found at ../shared/corpus/gpsd"),
          arguments: ["gr8013-w.log", "isync.log", "ublox-zed-f9p-nmea.log"])
    func accuracyIsGPSDsEph(_ name: String) throws {
        let gpsd = try Self.gpsdTPVs(name).compactMap { t in t.eph.map { (time: t.time, eph: $0) } }
        try #require(!gpsd.isEmpty, "\(name): no TPV with eph")
        let asGPSD = try Self.fixes(name, asGPSD: true)
        let own = try Self.fixes(name, asGPSD: false)
        /// gpsd's epochs whose `eph` is neither this fix's accuracy nor the previous one's.
        func differing(_ fixes: [Int64: Fix], shift: Int64) -> [String] {
            let times = fixes.keys.sorted()
            return gpsd.compactMap { t in
                guard let fix = fixes[t.time - shift], let i = times.firstIndex(of: t.time - shift) else { return nil }
                let previous = i > 0 ? fixes[times[i - 1]]?.horizontalAccuracy : nil
                let candidates = [fix.horizontalAccuracy, previous].compactMap { $0 }
                return candidates.contains { abs($0 - t.eph) < 0.0015 } ? nil
                    : "\(iso(t.time)): ours \(candidates), gpsd \(t.eph)"
            }
        }
        let shift = (own.keys.min() ?? 0) < Corpus.cutoff2017 ? Corpus.weekShift : 0  // the log's own dates
        let matched = gpsd.filter { asGPSD[$0.time] != nil }.count
        #expect(matched == gpsd.count, "\(name): \(gpsd.count - matched) gpsd epochs without our fix")
        #expect(differing(asGPSD, shift: 0) == [])
        #expect(differing(own, shift: shift).count == gpsd.count, "\(name): without the option a GST's σ gives the accuracy")
    }
}
