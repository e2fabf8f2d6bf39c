import Testing
@testable import NMEA
import Simulation  // SplitMix64: the project's seeded generator

/// The word-at-a-time scans and the field parsers against byte-at-a-time references, over
/// seeded random bytes drawn mostly from the bytes they look for, at every length and offset
/// (the tails shorter than a word and the overlapping last word are where they could go wrong).
@Suite struct ByteScanTests {
    static let alphabet = Array("$!*,.\r\n\u{1B}#-+ 0123456789ANSEW".utf8) + [0, 9, 0x7F, 0x80, 0xFF, 0x24 ^ 0x80, 0x2C ^ 1]

    static func randomBytes(_ n: Int, _ rng: inout SplitMix64) -> [UInt8] {
        (0..<n).map { _ in
            rng.next() % 3 == 0 ? UInt8(truncatingIfNeeded: rng.next()) : alphabet[Int(rng.next() % UInt64(alphabet.count))]
        }
    }

    /// Calls `body` with buffers of every length up to 90 and subranges of them.
    func forEachRange(seed: UInt64, _ body: (UnsafePointer<UInt8>, Int, Int) -> Void) {
        var rng = SplitMix64(seed: seed)
        for n in 0...90 {
            for _ in 0..<40 {
                let bytes = Self.randomBytes(n, &rng)
                bytes.withUnsafeBufferPointer { buf in
                    guard let p = buf.baseAddress else { return }
                    let from = n == 0 ? 0 : Int(rng.next() % UInt64(n + 1))
                    let end = from + Int(rng.next() % UInt64(n - from + 1))
                    body(p, from, end)
                    body(p, 0, n)
                }
            }
        }
    }

    func naiveFirst(_ p: UnsafePointer<UInt8>, _ from: Int, _ end: Int, _ set: Set<UInt8>) -> Int {
        var i = from
        while i < end && !set.contains(p[i]) { i += 1 }
        return i
    }

    @Test func searchesMatchByteByByte() {
        forEachRange(seed: 1) { p, from, end in
            let lineEnd = naiveFirst(p, from, end, [0x0A, 0x0D])
            let l = ByteScan.line(p, from: from, end: end)
            let first = naiveFirst(p, from, lineEnd, [0x24, 0x21])
            #expect(l.end == lineEnd)
            #expect(l.escape == (naiveFirst(p, from, lineEnd, [0x1B]) < lineEnd))
            #expect(l.first == first)
            #expect(l.second == (first == lineEnd ? lineEnd : naiveFirst(p, first + 1, lineEnd, [0x24, 0x21])))
            #expect(ByteScan.sentenceStart(p, from: from, end: end) == naiveFirst(p, from, end, [0x24, 0x21]))
        }
    }

    @Test func checksumMatchesByteByByte() {
        forEachRange(seed: 2) { p, from, end in
            let star = naiveFirst(p, from, end, [UInt8(ascii: "*")])
            let sum = (from..<star).reduce(UInt8(0)) { $0 ^ p[$1] }
            for floor in [0, from] {
                let r = ByteScan.checksum(p, from: from, end: end, floor: floor)
                #expect(r.sum == sum && r.star == star)
            }
        }
    }

    @Test func fieldsSplitAtEveryComma() {
        forEachRange(seed: 3) { p, from, end in
            for floor in [0, from] {
                withUnsafeTemporaryAllocation(of: UInt64.self, capacity: FieldCursor.maskWords(end - from) + 1) { scratch in
                    var f = FieldCursor(base: p, start: from, end: end, floor: floor, scratch: scratch.baseAddress!)
                    var expected: [Range<Int>] = []
                    var s = from
                    while true {
                        let e = naiveFirst(p, s, end, [UInt8(ascii: ",")])
                        expected.append(s..<e)
                        if e == end { break }
                        s = e + 1
                    }
                    #expect(f.remainingFields == expected.count)
                    var got: [Range<Int>] = []
                    for _ in 0..<expected.count { got.append(f.next()) }
                    #expect(got == expected)
                    #expect(f.next() == end..<end && f.remainingFields == 0)
                    // skip(n) lands where n calls of next do.
                    for n in 0...(expected.count + 1) {
                        for startField in 0..<expected.count {
                            var a = FieldCursor(base: p, start: from, end: end, floor: floor, scratch: scratch.baseAddress!)
                            a.skip(startField)
                            var b = a
                            a.skip(n)
                            for _ in 0..<n { _ = b.next() }
                            #expect(a.pos == b.pos)
                        }
                    }
                }
            }
        }
    }

    // MARK: Field parsers against the straightforward versions they replaced

    struct Parsed: Equatable { var value: Double?; var bad: Bool }

    /// Old `decimal`: digit by digit, any order of checks.
    static func referenceDecimal(_ b: [UInt8]) -> (m: Int64, s: Int)?? {
        if b.isEmpty { return .some(nil) }
        var m: Int64 = 0, scale = 0, seenDot = false, digits = 0
        for c in b {
            if c == UInt8(ascii: ".") {
                if seenDot { return nil }
                seenDot = true
            } else if c >= 48 && c <= 57 {
                digits += 1
                if digits > 18 { return nil }
                m = m * 10 + Int64(c - 48)
                if seenDot { scale += 1 }
            } else { return nil }
        }
        return digits == 0 ? nil : .some((m, scale))
    }

    static func referenceTime(_ b: [UInt8]) -> Parsed {
        guard let d = referenceDecimal(b) else { return Parsed(value: nil, bad: true) }
        guard let (m, s) = d else { return Parsed(value: nil, bad: false) }
        guard b.count >= 6, s <= 9, b.count == 6 || b[6] == UInt8(ascii: ".") else { return Parsed(value: nil, bad: true) }
        var scale: Int64 = 1
        for _ in 0..<s { scale *= 10 }
        let whole = m / scale, frac = m % scale
        let hh = whole / 10000, mm = whole / 100 % 100, ss = whole % 100
        guard hh < 24, mm < 60, ss <= 60 else { return Parsed(value: nil, bad: true) }
        if whole == 235960 { return Parsed(value: Double(86_400 * 1_000_000_000 - 1), bad: false) }  // a leap second
        return Parsed(value: Double((hh * 3600 + mm * 60 + ss) * 1_000_000_000 + frac * (1_000_000_000 / scale)), bad: false)
    }

    static func referenceAngle(_ b: [UInt8], _ hemi: UInt8) -> Parsed {
        guard let d = referenceDecimal(b) else { return Parsed(value: nil, bad: true) }
        guard let (m, s) = d else { return Parsed(value: nil, bad: false) }
        guard s <= 12 else { return Parsed(value: nil, bad: true) }
        var p: Int64 = 1
        for _ in 0..<s { p *= 10 }
        let unit = p * 100
        let minutes = Double(m % unit) / Double(p)
        if minutes >= 60 { return Parsed(value: nil, bad: true) }
        var v = Double(m / unit) + minutes / 60
        if hemi == UInt8(ascii: "S") { v = -v } else if hemi != UInt8(ascii: "N") { return Parsed(value: nil, bad: true) }
        return abs(v) > 90 ? Parsed(value: nil, bad: true) : Parsed(value: v, bad: false)
    }

    static func referenceDouble(_ b: [UInt8]) -> Parsed {
        var body = b[...]
        var neg = false
        if body.first == UInt8(ascii: "-") { neg = true; body = body.dropFirst() } else if body.first == UInt8(ascii: "+") { body = body.dropFirst() }
        if b.isEmpty { return Parsed(value: nil, bad: false) }
        guard let d = referenceDecimal(Array(body)) else { return Parsed(value: nil, bad: true) }
        guard let (m, s) = d else { return Parsed(value: nil, bad: true) }  // a sign alone
        var p = 1.0
        for _ in 0..<s { p *= 10 }
        let v = Double(m) / p
        return Parsed(value: neg ? -v : v, bad: false)
    }

    /// Random numeric-looking fields: digits with dots, signs and junk sprinkled in.
    static func randomField(_ rng: inout SplitMix64) -> [UInt8] {
        let n = Int(rng.next() % 24)
        let digits = Array("0123456789".utf8)
        var b: [UInt8] = (0..<n).map { _ in
            switch rng.next() % 20 {
            case 0: UInt8(ascii: ".")
            case 1: UInt8(ascii: "-")
            case 2: UInt8(truncatingIfNeeded: rng.next()) | 0x80  // junk, never a ','
            case 3: UInt8(ascii: "+")
            default: digits[Int(rng.next() % 10)]
            }
        }
        if rng.next() % 3 == 0, n > 4 { b[Int(rng.next() % UInt64(n))] = UInt8(ascii: ".") }
        return b
    }

    /// Parses `field` (followed by `,` and `next`) with `body`, which gets both fields' ranges.
    func parse<T>(_ field: [UInt8], next: UInt8 = UInt8(ascii: "N"), _ body: (inout FieldCursor, Range<Int>, Range<Int>) -> T) -> (T, Bool) {
        let bytes = field + [UInt8(ascii: ","), next]
        return bytes.withUnsafeBufferPointer { buf in
            withUnsafeTemporaryAllocation(of: UInt64.self, capacity: FieldCursor.maskWords(buf.count) + 1) { scratch in
                var f = FieldCursor(base: buf.baseAddress!, start: 0, end: buf.count, floor: 0, scratch: scratch.baseAddress!)
                let r = f.next(), r2 = f.next()
                let v = body(&f, r, r2)
                return (v, f.bad)
            }
        }
    }

    @Test func fieldParsersMatchReferences() {
        var rng = SplitMix64(seed: 4)
        var fields: [[UInt8]] = ["", ".", "-", "+", "5.", ".5", "123519", "123519.", "123519.123456789", "123519.1234567891",
                                 "240000", "235960", "235960.5", "235959.999999999", "123460", "236000", "4807.038", "4807.0380000000000", "9000.000", "9000.0001",
                                 "0000.000", "18000.000", "1e5", "12.3.4", "0000000000000000000", "000000000000000001",
                                 "-0", "+1.5", "--1", "1234.5", "12345.", ".12345", "12.3.4", "00000.1", "99.999"].map { Array($0.utf8) }
        for _ in 0..<100_000 { fields.append(Self.randomField(&rng)) }
        // Digits with a few dots, signs or junk at random places, lengths around the 8- and
        // 16-byte words the fast path reads.
        for _ in 0..<100_000 {
            var b = (0..<Int(1 + rng.next() % 18)).map { _ in UInt8(ascii: "0") + UInt8(rng.next() % 10) }
            for _ in 0..<Int(rng.next() % 4) {
                let junk: [UInt8] = [UInt8(ascii: "."), UInt8(ascii: "."), UInt8(ascii: "-"), UInt8(ascii: "/"), UInt8(ascii: ":"), 0xB0]
                b[Int(rng.next() % UInt64(b.count))] = junk[Int(rng.next() % UInt64(junk.count))]
            }
            fields.append(b)
        }
        for b in fields {
            let text = String(decoding: b, as: UTF8.self)
            let (t, tb) = parse(b) { f, r, _ in f.timeOfDay(r) }
            #expect(Parsed(value: t.map(Double.init), bad: tb) == Self.referenceTime(b), "time \(text)")
            for hemi in [UInt8(ascii: "N"), UInt8(ascii: "S"), UInt8(ascii: "E")] {
                let (a, ab) = parse(b, next: hemi) { f, r, h in
                    f.angle(r, h, negative: UInt8(ascii: "S"), positive: UInt8(ascii: "N"), limit: 90)
                }
                if b.isEmpty {
                    #expect(a == nil && !ab)
                } else {
                    #expect(Parsed(value: a, bad: ab) == Self.referenceAngle(b, hemi), "angle \(text) \(hemi)")
                }
            }
            let (d, db) = parse(b) { f, r, _ in f.double(r) }
            #expect(Parsed(value: d, bad: db) == Self.referenceDouble(b), "double \(text)")
        }
    }
}
