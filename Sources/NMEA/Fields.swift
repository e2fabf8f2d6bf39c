/// Sequential reader over a sentence's comma-separated fields, straight from the bytes:
/// no String, no allocation. A missing trailing field reads as empty.
struct FieldCursor {
    let base: UnsafePointer<UInt8>
    var pos: Int
    let end: Int
    /// Set when any parse found a non-empty field it could not read.
    var bad = false
    /// Fields consumed so far (including empty and past-the-end ones that existed).
    var count = 0

    init(base: UnsafePointer<UInt8>, start: Int, end: Int) {
        self.base = base; self.pos = start; self.end = end
    }

    /// Range of the next field; empty when past the end.
    mutating func next() -> Range<Int> {
        if pos > end { return end..<end }
        let s = pos
        while pos < end && base[pos] != UInt8(ascii: ",") { pos += 1 }
        let r = s..<pos
        pos += 1  // past the comma; pos == end + 1 marks "no more fields"
        count += 1
        return r
    }

    mutating func skip(_ n: Int) { for _ in 0..<n { _ = next() } }

    /// Number of fields left including the next one.
    var remainingFields: Int {
        if pos > end { return 0 }
        var n = 1
        var i = pos
        while i < end { if base[i] == UInt8(ascii: ",") { n += 1 }; i += 1 }
        return n
    }

    @inline(__always) func char(_ r: Range<Int>) -> UInt8? { r.count == 1 ? base[r.lowerBound] : nil }

    /// Unsigned decimal "123.456" → (mantissa 123456, 3 fraction digits). Nil if empty.
    mutating func decimal(_ r: Range<Int>) -> (mantissa: Int64, scale: Int)? {
        if r.isEmpty { return nil }
        var m: Int64 = 0
        var scale = 0
        var seenDot = false
        var digits = 0
        for i in r {
            let c = base[i]
            if c == UInt8(ascii: ".") {
                if seenDot { bad = true; return nil }
                seenDot = true
            } else if c >= 48 && c <= 57 {
                digits += 1
                if digits > 18 { bad = true; return nil }
                m = m &* 10 &+ Int64(c &- 48)
                if seenDot { scale += 1 }
            } else { bad = true; return nil }
        }
        if digits == 0 { bad = true; return nil }
        return (m, scale)
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

    /// "hhmmss[.fff…]" → nanoseconds of the day. Nil if empty.
    mutating func timeOfDay(_ r: Range<Int>) -> Int64? {
        if r.isEmpty { return nil }
        guard r.count >= 6, let (m, s) = decimal(r), s <= 9, r.count == 6 || base[r.lowerBound + 6] == UInt8(ascii: ".")
        else { bad = true; return nil }
        let scale = pow10i(s)
        let whole = m / scale
        let frac = m % scale
        let hh = whole / 10000, mm = whole / 100 % 100, ss = whole % 100
        guard hh < 24, mm < 60, ss <= 60 else { bad = true; return nil }
        return (hh * 3600 + mm * 60 + ss) * 1_000_000_000 + frac * (1_000_000_000 / scale)
    }

    /// "ddmm.mmmm" / "dddmm.mmmm" + hemisphere → signed degrees. Nil if either is empty.
    mutating func angle(_ r: Range<Int>, _ hemi: Range<Int>, negative: UInt8, positive: UInt8, limit: Double) -> Double? {
        if r.isEmpty || hemi.isEmpty { return nil }
        guard let (m, s) = decimal(r), s <= 12 else { bad = true; return nil }
        let unit = pow10i(s) * 100  // one degree in mantissa units of minutes
        let deg = Double(m / unit)
        let minutes = Double(m % unit) / pow10(s)
        if minutes >= 60 { bad = true; return nil }
        var v = deg + minutes / 60
        guard let h = char(hemi) else { bad = true; return nil }
        if h == negative { v = -v } else if h != positive { bad = true; return nil }
        if abs(v) > limit { bad = true; return nil }
        return v
    }
}

/// 10^p for 0 ≤ p ≤ 18 (callers guarantee the range: at most 18 digits are parsed).
/// A plain loop instead of a global table: Swift globals are initialised lazily behind a
/// `swift_once` check on every access, which we do not want per field on the hot path.
@inline(__always) func pow10i(_ p: Int) -> Int64 {
    var v: Int64 = 1
    var i = 0
    while i < p { v &*= 10; i += 1 }
    return v
}

/// 10^p as a Double, exact for 0 ≤ p ≤ 18 (every power of ten up to 10^22 is representable).
@inline(__always) func pow10(_ p: Int) -> Double { Double(pow10i(p)) }
