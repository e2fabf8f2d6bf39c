import LocationCore
import Testing
@testable import LocationProtocol
import Simulation  // SplitMix64: the project's seeded generator

/// The straightforward formatters `ByteWriter` replaced (digit by digit into the array, then
/// reversed), kept as the reference the fast ones must match byte for byte.
enum ReferenceFormat {
    static func unsigned(_ value: UInt64, width: Int = 1, to out: inout [UInt8]) {
        var digits: [UInt8] = []
        var v = value
        repeat { digits.append(UInt8(v % 10) + 0x30); v /= 10 } while v != 0
        while digits.count < width { digits.append(0x30) }
        out.append(contentsOf: digits.reversed())
    }

    static func integer(_ value: Int64, to out: inout [UInt8]) {
        if value < 0 { out.append(UInt8(ascii: "-")) }
        unsigned(value.magnitude, to: &out)
    }

    static func fixed(_ value: Double, decimals: Int, to out: inout [UInt8]) {
        guard value.isFinite else { out.append(contentsOf: "null".utf8); return }
        let scale = [1, 10, 100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000, 100_000_000, 1_000_000_000][decimals] as Int64
        let scaled = (value * Double(scale)).rounded(.toNearestOrAwayFromZero)
        guard abs(scaled) < 9.0e15 else { out.append(contentsOf: value.description.utf8); return }
        let fixed = Int64(scaled)
        if fixed < 0 { out.append(UInt8(ascii: "-")) }
        unsigned(fixed.magnitude / UInt64(scale), to: &out)
        var fraction = fixed.magnitude % UInt64(scale)
        guard fraction != 0 else { return }
        var digits = decimals
        while fraction % 10 == 0 { fraction /= 10; digits -= 1 }
        out.append(UInt8(ascii: "."))
        unsigned(fraction, width: digits, to: &out)
    }

    static func time(_ time: Timestamp, to out: inout [UInt8]) {
        let c = CivilTime(time)
        var year = c.year
        if year < 0 { out.append(UInt8(ascii: "-")); year = -year } else if year > 9999 { out.append(UInt8(ascii: "+")) }
        unsigned(UInt64(year), width: 4, to: &out)
        for (sep, v) in [("-", c.month), ("-", c.day), ("T", c.hour), (":", c.minute), (":", c.second)] {
            out.append(contentsOf: sep.utf8)
            unsigned(UInt64(v), width: 2, to: &out)
        }
        if c.nanosecond != 0 {
            var fraction = UInt64(c.nanosecond)
            var digits = 9
            while fraction % 10 == 0 { fraction /= 10; digits -= 1 }
            out.append(UInt8(ascii: "."))
            unsigned(fraction, width: digits, to: &out)
        }
        out.append(UInt8(ascii: "Z"))
    }

    static func location(_ fix: Fix, skipped: Int) -> [UInt8] {
        var out = Array(#"{"type":"location","time":""#.utf8)
        time(fix.time, to: &out)
        out.append(contentsOf: #"","latitude":"#.utf8)
        fixed(fix.coordinate.latitude, decimals: 9, to: &out)
        out.append(contentsOf: #","longitude":"#.utf8)
        fixed(fix.coordinate.longitude, decimals: 9, to: &out)
        out.append(contentsOf: #","horizontalAccuracy":"#.utf8)
        if let h = fix.horizontalAccuracy { fixed(h, decimals: 3, to: &out) } else { out.append(contentsOf: "null".utf8) }
        for (key, value) in [("altitude", fix.altitudeMSL), ("ellipsoidalAltitude", fix.altitudeHAE),
                             ("verticalAccuracy", fix.verticalAccuracy), ("speed", fix.speed), ("course", fix.course)] {
            guard let value else { continue }
            out.append(contentsOf: ",\"\(key)\":".utf8)
            fixed(value, decimals: 3, to: &out)
        }
        out.append(contentsOf: (fix.mode == .twoD ? #","mode":"2d""# : #","mode":"3d""#).utf8)
        if skipped > 0 {
            out.append(contentsOf: #","skipped":"#.utf8)
            integer(Int64(skipped), to: &out)
        }
        out.append(contentsOf: "}\n".utf8)
        return out
    }
}


@Suite struct FormatDifferentialTests {
    static let edgeValues: [Double] = [
        0, -0.0, 1, -1, 0.5, -0.5, 0.0005, -0.0005, 0.00049999999999999999, 0.0000000005, -0.0000000005,
        0.9999995, -0.9999995, 0.99999999995, 9.9999999995, 99.9995, 999.9995, 1.0005, 2.675, 1.5, 2.5, -2.5,
        0.1, 0.2, 0.3, 179.9999999995, -179.9999999995, 89.99999999949999, 359.9999, 8848.86, -432.1,
        8_999_999.999999999, 9_000_000, 8_999_999_999_999.999, 9e12, 9e15, -9e15, 1e15, 4_503_599_627_370_496,
        1e300, -1e300, .greatestFiniteMagnitude, -.greatestFiniteMagnitude, .leastNonzeroMagnitude,
        .leastNormalMagnitude, .ulpOfOne, .infinity, -.infinity, .nan,
    ]

    /// Values of every scale and sign, and ones that sit exactly on a rounding boundary.
    static func randomValue(_ rng: inout SplitMix64) -> Double {
        switch rng.next() % 6 {
        case 0: return Double(bitPattern: rng.next())
        case 1: return Double(Int64(bitPattern: rng.next()) % 10_000_000) / 1_000 + 0.0005  // …x.yyy5: a tie in decimal
        case 2: return Double(Int64(bitPattern: rng.next()) % 1_000_000_000_000) / 1e9
        case 3: return Double.random(in: -1...1, using: &rng) * Double(sign: .plus, exponent: Int(rng.next() % 120) - 60, significand: 1)
        case 4: return Double.random(in: -180...180, using: &rng)
        default: return Double(Int64(bitPattern: rng.next()) >> (rng.next() % 64))
        }
    }

    func text(_ body: (inout [UInt8]) -> Void) -> String {
        var out: [UInt8] = []
        body(&out)
        return String(decoding: out, as: UTF8.self)
    }

    @Test func fixedMatchesReferenceOnEdgeValues() {
        for v in Self.edgeValues {
            for d in 0...9 {
                let fast = text { DecimalFormat.appendFixed(v, decimals: d, to: &$0) }
                let slow = text { ReferenceFormat.fixed(v, decimals: d, to: &$0) }
                #expect(fast == slow, "\(v) with \(d) decimals")
            }
        }
        #expect(text { DecimalFormat.appendFixed(0.9999995, decimals: 6, to: &$0) } == "1")  // the carry reaches the integer
        #expect(text { DecimalFormat.appendFixed(-0.9999995, decimals: 6, to: &$0) } == "-1")
        #expect(text { DecimalFormat.appendFixed(-0.0, decimals: 3, to: &$0) } == "0")
    }

    @Test func fixedMatchesReferenceOnSeededRandomValues() {
        var rng = SplitMix64(seed: 0x10CA_7104)
        for _ in 0..<200_000 {
            let v = Self.randomValue(&rng)
            let d = Int(rng.next() % 10)
            let fast = text { DecimalFormat.appendFixed(v, decimals: d, to: &$0) }
            let slow = text { ReferenceFormat.fixed(v, decimals: d, to: &$0) }
            if fast != slow { Issue.record("\(v) (bits \(v.bitPattern)) with \(d) decimals: \(fast) != \(slow)"); return }
        }
    }

    /// What a decoder keeps (`rounded`) is what parsing the written digits gives, and writing it
    /// again writes the same digits: the fixed point of a round trip.
    @Test func roundedIsWhatTheWrittenDigitsParseTo() {
        var rng = SplitMix64(seed: 0x0D1D_0A7A)
        var values = Self.edgeValues
        for _ in 0..<100_000 { values.append(Self.randomValue(&rng)) }
        for (i, v) in values.enumerated() where v.isFinite {
            let d = i < Self.edgeValues.count ? i % 10 : Int(rng.next() % 10)
            let written = text { DecimalFormat.appendFixed(v, decimals: d, to: &$0) }
            let kept = DecimalFormat.rounded(v, decimals: d)
            // Writing `kept` again can move the last digit only where `kept · 10^d`, rounded in
            // binary, is off by half a unit: beyond 2^50, far outside any coordinate or distance.
            let stable = abs(v) * Double(powerOfTen(d)) >= 0x1p50
                || text({ DecimalFormat.appendFixed(kept, decimals: d, to: &$0) }) == written
            guard let parsed = Double(written), parsed.bitPattern == kept.bitPattern, stable else {
                Issue.record("\(v) (bits \(v.bitPattern)) with \(d) decimals: wrote \(written), kept \(kept)"); return
            }
        }
        #expect(DecimalFormat.rounded(52.53330006459703, decimals: 9) == 52.533300065)
        #expect(DecimalFormat.rounded(-0.0, decimals: 3).sign == .plus)  // as "0" parses
    }

    @Test func integersAndPaddingMatchReference() {
        var rng = SplitMix64(seed: 42)
        var values: [Int64] = [0, 1, -1, 9, 10, 99, 100, 9_999, 10_000, Int64.max, Int64.min, Int64.min + 1]
        for _ in 0..<50_000 { values.append(Int64(bitPattern: rng.next()) >> (rng.next() % 64)) }
        for v in values {
            #expect(text { DecimalFormat.appendInteger(v, to: &$0) } == text { ReferenceFormat.integer(v, to: &$0) })
            let width = Int(rng.next() % 25)
            #expect(text { DecimalFormat.appendPadded(v.magnitude, width: width, to: &$0) }
                    == text { ReferenceFormat.unsigned(v.magnitude, width: width, to: &$0) })
        }
    }

    @Test func timesMatchReference() {
        var rng = SplitMix64(seed: 8601)
        var times: [Int64] = [0, -1, 1, Int64.max, Int64.min, -999_999_999, 999_999_999, 1_000_000_000, -1_000_000_000,
                              951_782_400_000_000_000 /* 2000-02-29 */, 4_102_444_799_999_999_999 /* 2099-12-31T23:59:59.999999999 */]
        for _ in 0..<100_000 {
            switch rng.next() % 3 {
            case 0: times.append(Int64(bitPattern: rng.next()))
            case 1: times.append(Int64(rng.next() % 4_000_000_000) * 1_000_000_000 + Int64(rng.next() % 100) * 10_000_000)
            default: times.append(Int64(bitPattern: rng.next()) % 100_000_000_000_000_000)
            }
        }
        for ns in times {
            let t = Timestamp(nanoseconds: ns)
            let fast = text { ISO8601.append(t, to: &$0) }
            let slow = text { ReferenceFormat.time(t, to: &$0) }
            if fast != slow { Issue.record("\(ns): \(fast) != \(slow)"); return }
        }
    }

    @Test func locationLinesMatchReference() {
        var rng = SplitMix64(seed: 2026)
        func maybe(_ rng: inout SplitMix64) -> Double? {
            rng.next() % 4 == 0 ? nil : (rng.next() % 8 == 0 ? Self.edgeValues[Int(rng.next() % UInt64(Self.edgeValues.count))] : Self.randomValue(&rng))
        }
        for _ in 0..<20_000 {
            let fix = Fix(time: Timestamp(nanoseconds: Int64(bitPattern: rng.next())),
                          coordinate: Coordinate(latitude: Self.randomValue(&rng), longitude: Self.randomValue(&rng)),
                          mode: rng.next() % 2 == 0 ? .twoD : .threeD, altitudeHAE: maybe(&rng), altitudeMSL: maybe(&rng),
                          horizontalAccuracy: maybe(&rng), verticalAccuracy: maybe(&rng), speed: maybe(&rng), course: maybe(&rng))
            let skipped = rng.next() % 3 == 0 ? Int(truncatingIfNeeded: rng.next() >> (rng.next() % 64)) : 0
            var out: [UInt8] = Array("prefix".utf8)
            EventEncoder().appendLocation(fix, skipped: skipped, to: &out)
            let expected = Array("prefix".utf8) + ReferenceFormat.location(fix, skipped: skipped)
            if out != expected {
                Issue.record("\(String(decoding: out, as: UTF8.self)) != \(String(decoding: expected, as: UTF8.self))"); return
            }
        }
    }

    /// Every field present at its longest: the line must fit the encoder's fixed buffer.
    @Test func longestLinesFit() {
        let longest = -Double.greatestFiniteMagnitude  // "-1.7976931348623157e+308", 24 bytes
        let fix = Fix(time: Timestamp(nanoseconds: Int64.min + 1), coordinate: Coordinate(latitude: longest, longitude: longest),
                      mode: .threeD, altitudeHAE: longest, altitudeMSL: longest, horizontalAccuracy: longest,
                      verticalAccuracy: longest, speed: longest, course: longest)
        var out: [UInt8] = []
        EventEncoder().appendLocation(fix, skipped: Int.max, to: &out)
        #expect(out == ReferenceFormat.location(fix, skipped: Int.max))
        #expect(out.count <= EventEncoder.maxLocationLine)
        let visit = Visit(kind: .departure, arrival: fix.time, departure: fix.time, coordinate: fix.coordinate,
                          horizontalAccuracy: longest)
        out.removeAll()
        EventEncoder().appendVisit(visit, to: &out)
        #expect(out.count <= EventEncoder.maxVisitLine)
        #expect(String(decoding: out, as: UTF8.self).contains(#""horizontalAccuracy":-1.7976931348623157e+308}"#))
    }
}
