import LocationCore

/// Sequential reader over a sentence's comma-separated fields, straight from the bytes:
/// no String, no allocation. A missing trailing field reads as empty.
///
/// The commas are found once, a word at a time, when the cursor is made (`ByteScan.commaMask`):
/// looking for each field's comma byte by byte costs more than parsing the fields.
struct FieldCursor {
    let base: UnsafePointer<UInt8>
    var pos: Int
    let end: Int
    /// The fields' commas, one bit per byte from `origin` (the first field's start).
    let commas: UnsafePointer<UInt64>
    let origin: Int
    /// Set when any parse found a non-empty field it could not read.
    var bad = false

    /// Words needed for the comma bits of `length` bytes.
    static func maskWords(_ length: Int) -> Int { (max(length, 0) + 63) >> 6 }

    /// The fields of `start..<end`; `scratch` has room for `maskWords(end - start)` words, and
    /// memory from `floor` (≤ `start`) on is readable.
    init(base: UnsafePointer<UInt8>, start: Int, end: Int, floor: Int, scratch: UnsafeMutablePointer<UInt64>) {
        self.base = base; self.pos = start; self.end = end; self.origin = start
        self.commas = UnsafePointer(scratch)
        if start < end { ByteScan.commaMask(base, from: start, end: end, floor: floor, into: scratch) }
    }

    /// Range of the next field; empty when past the end.
    @inline(__always) mutating func next() -> Range<Int> {
        if pos > end { return end..<end }
        let s = pos
        let e = nextComma()
        pos = e + 1  // past the comma; pos == end + 1 marks "no more fields"
        return s..<e
    }

    /// Index of the first comma at or after `pos` (≤ `end`), or `end`.
    @inline(__always) func nextComma() -> Int {
        if pos >= end { return end }
        let k = pos - origin
        let m = commas[k >> 6] &>> UInt64(k)
        if m != 0 { return pos + m.trailingZeroBitCount }
        var j = (k >> 6) + 1
        let words = Self.maskWords(end - origin)
        while j < words {
            let w = commas[j]
            if w != 0 { return origin + j << 6 + w.trailingZeroBitCount }
            j += 1
        }
        return end
    }

    /// Skips `n` fields, as `n` calls of `next` would: to just past the n-th comma from `pos`,
    /// or past the end when fewer are left. Clearing n − 1 bits of the mask is quicker than
    /// finding each comma in turn (GSA skips 13 fields).
    @inline(__always) mutating func skip(_ n: Int) {
        guard n > 0, pos <= end else { return }
        if pos == end { pos = end + 1; return }
        let k = pos - origin
        let words = Self.maskWords(end - origin)
        var j = k >> 6
        var m = commas[j] & (~0 &<< UInt64(k))  // the commas at or after pos
        var left = n
        while true {
            while m != 0 {
                if left == 1 { pos = origin + j << 6 + m.trailingZeroBitCount + 1; return }
                m &= m &- 1
                left -= 1
            }
            j += 1
            if j >= words { pos = end + 1; return }
            m = commas[j]
        }
    }

    /// Number of fields left including the next one.
    var remainingFields: Int {
        if pos > end { return 0 }
        var n = 1
        var i = pos
        while i < end { if base[i] == UInt8(ascii: ",") { n += 1 }; i += 1 }
        return n
    }

    @inline(__always) func char(_ r: Range<Int>) -> UInt8? { r.count == 1 ? base[r.lowerBound] : nil }

    /// Unsigned decimal "123.456" → whole 123, fraction 456, scale 3 (fraction digits). Nil
    /// if empty; `bad` unless it is digits with at most one '.', at least one and at most 18.
    mutating func decimalParts(_ r: Range<Int>) -> (whole: Int64, fraction: Int64, scale: Int)? {
        var i = r.lowerBound
        let e = r.upperBound
        if i == e { return nil }
        // Wrapping arithmetic: more than 18 digits are rejected below, before any use.
        var whole: Int64 = 0
        while i < e {
            let d = base[i] &- 48
            if d > 9 { break }
            whole = whole &* 10 &+ Int64(d)
            i += 1
        }
        let wholeDigits = i - r.lowerBound
        var fraction: Int64 = 0
        var scale = 0
        if i < e {
            guard base[i] == UInt8(ascii: ".") else { bad = true; return nil }
            i += 1
            let fractionStart = i
            while i < e {
                let d = base[i] &- 48
                guard d <= 9 else { bad = true; return nil }
                fraction = fraction &* 10 &+ Int64(d)
                i += 1
            }
            scale = i - fractionStart
        }
        let digits = wholeDigits + scale
        guard digits > 0 && digits <= 18 else { bad = true; return nil }
        return (whole, fraction, scale)
    }

    /// Unsigned decimal "123.456" → (mantissa 123456, 3 fraction digits). Nil if empty.
    mutating func decimal(_ r: Range<Int>) -> (mantissa: Int64, scale: Int)? {
        guard let (whole, fraction, scale) = decimalParts(r) else { return nil }
        return (whole &* powerOfTen(scale) &+ fraction, scale)
    }

    /// Signed decimal as Double. Nil if empty.
    mutating func double(_ r: Range<Int>) -> Double? {
        if r.isEmpty { return nil }
        var lo = r.lowerBound
        var neg = false
        if base[lo] == UInt8(ascii: "-") { neg = true; lo += 1 }
        else if base[lo] == UInt8(ascii: "+") { lo += 1 }
        guard let (m, s) = decimal(lo..<r.upperBound) else { if lo == r.upperBound { bad = true }; return nil }
        let v = Double(m) / pow10(s)
        return neg ? -v : v
    }

    /// Unsigned integer. Nil if empty.
    mutating func int(_ r: Range<Int>) -> Int? {
        if r.isEmpty { return nil }
        var v = 0
        for i in r {
            let c = base[i]
            guard c >= 48 && c <= 57, v < 100_000_000 else { bad = true; return nil }
            v = v * 10 + Int(c - 48)
        }
        return v
    }

    /// "hhmmss[.fff…]" (at most 9 fraction digits) → nanoseconds of the day. Nil if empty.
    /// Six characters with a '.' among them ("1234.5") read as a shorter number: 00:12:34.5.
    mutating func timeOfDay(_ r: Range<Int>) -> Int64? {
        if r.isEmpty { return nil }
        guard r.count >= 6, let (whole, fraction, scale) = decimalParts(r), scale <= 9,
              r.count == 6 || base[r.lowerBound + 6] == UInt8(ascii: ".") else { bad = true; return nil }
        return clock(whole, fraction, scale)
    }

    /// hhmmss (as a number) and `scale` fraction digits → nanoseconds of the day.
    /// A leap second, 23:59:60.f, is the day's last nanosecond, whatever f: a `Timestamp` has
    /// no leap seconds, and read as 00:00:00.f of the next day it would take that second's time
    /// and its fix would be dropped as the same epoch. Its epochs are one epoch (docs/nmea.md).
    @inline(__always) mutating func clock(_ whole: Int64, _ fraction: Int64, _ scale: Int) -> Int64? {
        let hh = whole / 10000, mm = whole / 100 % 100, ss = whole % 100
        guard hh < 24, mm < 60, ss <= 60 else { bad = true; return nil }
        if whole == 235960 { return Assembler.day - 1 }
        return (hh * 3600 + mm * 60 + ss) * 1_000_000_000 + fraction * powerOfTen(9 - scale)
    }

    /// "ddmm.mmmm" / "dddmm.mmmm" + hemisphere → signed degrees. Nil if either is empty.
    mutating func angle(_ r: Range<Int>, _ hemi: Range<Int>, negative: UInt8, positive: UInt8, limit: Double) -> Double? {
        if r.isEmpty || hemi.isEmpty { return nil }
        guard let (whole, fraction, scale) = decimalParts(r), scale <= 12 else { bad = true; return nil }
        let deg = Double(whole / 100)
        let minutes = Double((whole % 100) * powerOfTen(scale) + fraction) / pow10(scale)
        if minutes >= 60 { bad = true; return nil }
        var v = deg + minutes / 60
        guard let h = char(hemi) else { bad = true; return nil }
        if h == negative { v = -v } else if h != positive { bad = true; return nil }
        if abs(v) > limit { bad = true; return nil }
        return v
    }
}

/// 10^p as a Double, exact for 0 ≤ p ≤ 18 (every power of ten up to 10^22 is representable).
@inline(__always) func pow10(_ p: Int) -> Double { Double(powerOfTen(p)) }
