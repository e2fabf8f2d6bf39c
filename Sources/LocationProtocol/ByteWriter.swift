import LocationCore

/// Writes text into a fixed block of memory the caller owns (usually a stack buffer), then the
/// caller appends the block to its line in one copy.
///
/// Why not append to the `[UInt8]` directly: every `append` re-checks capacity and uniqueness,
/// and reversing digits in place through `out[start...]` allocates a slice per number; a
/// location line makes ~20 appends and would make 7 such allocations. Capacity is checked once per
/// operation (a trap, never an overrun), not per byte.
///
/// Number and time formats live here, once; `DecimalFormat` and `ISO8601` are their `[UInt8]`
/// front ends.
@usableFromInline struct ByteWriter {
    @usableFromInline let base: UnsafeMutablePointer<UInt8>
    @usableFromInline let capacity: Int
    @usableFromInline var count = 0

    @inlinable init(_ buffer: UnsafeMutableBufferPointer<UInt8>) {
        base = buffer.baseAddress!
        capacity = buffer.count
    }

    /// Room one number needs: `-1.7976931348623157e+308` (Swift's description, the fallback
    /// beyond exact fixed point) is 24 bytes; fixed point writes at most 18 but stores its
    /// fraction digits as a whole word, which can reach 8 bytes past them.
    @usableFromInline static let maxNumber = 32
    /// `YYYY-MM-DDTHH:MM:SS.fffffffffZ` with a sign for years outside 0...9999.
    @usableFromInline static let maxTime = 31

    @inlinable @inline(__always) func reserve(_ n: Int) {
        precondition(count + n <= capacity, "ByteWriter: line longer than its buffer")
    }

    @inlinable @inline(__always) mutating func byte(_ b: UInt8) {
        reserve(1)
        base[count] = b
        count += 1
    }

    // Inlined so that each key, a constant, is copied with a few moves instead of a memmove call.
    @inlinable @inline(__always) mutating func ascii(_ s: StaticString) {
        let n = s.utf8CodeUnitCount
        reserve(n)
        (base + count).update(from: s.utf8Start, count: n)
        count += n
    }

    @inlinable mutating func bytes(_ p: UnsafeBufferPointer<UInt8>) {
        reserve(p.count)
        if let a = p.baseAddress { (base + count).update(from: a, count: p.count) }
        count += p.count
    }

    /// Two decimal digits of `v` (0...99) at `p`.
    @inlinable static func pair(_ v: Int, at p: UnsafeMutablePointer<UInt8>) {
        // A literal table, not a global array: Swift guards every global array access with a lazy
        // initialisation check; a StaticString is a constant in the binary.
        let digits: StaticString = "00010203040506070809101112131415161718192021222324252627282930313233343536373839404142434445464748495051525354555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899"
        UnsafeMutableRawPointer(p).copyMemory(from: digits.utf8Start + 2 * v, byteCount: 2)
    }

    /// Writes the low `width` decimal digits of `v`, zero-padded, ending at `end` (exclusive).
    @inlinable static func digits(_ value: UInt64, width: Int, endingAt end: UnsafeMutablePointer<UInt8>) {
        var v = value
        var p = end
        var n = width
        while n >= 2 {
            p -= 2
            pair(Int(v % 100), at: p)
            v /= 100
            n -= 2
        }
        if n == 1 {
            p -= 1
            p.pointee = UInt8(truncatingIfNeeded: v % 10) &+ 0x30
        }
    }

    @inlinable static func digitCount(_ v: UInt64) -> Int {
        var n = 1
        var t = v
        while t >= 10_000 { t /= 10_000; n += 4 }
        if t >= 100 { t /= 100; n += 2 }
        if t >= 10 { n += 1 }
        return n
    }

    /// `value`'s decimal digits, at least `width` of them (zero-padded).
    @inlinable mutating func unsigned(_ value: UInt64, width: Int = 1) {
        // Most numbers a line carries have one or two digits before the point.
        if width <= 2 && value < 100 {
            if value < 10 && width <= 1 {
                byte(UInt8(truncatingIfNeeded: value) &+ 0x30)
            } else {
                reserve(2)
                Self.pair(Int(value), at: base + count)
                count += 2
            }
            return
        }
        let n = Swift.max(width, Self.digitCount(value))
        reserve(n)
        Self.digits(value, width: n, endingAt: base + count + n)
        count += n
    }

    @inlinable mutating func integer(_ value: Int64) {
        if value < 0 { byte(UInt8(ascii: "-")) }
        unsigned(value.magnitude)
    }

    /// `value` rounded half away from zero to `decimals` (0...9) fraction digits, trailing
    /// zeros trimmed (`1.5`, `2`, `-0.25`), never `-0`; `null` when not finite; Swift's
    /// description for magnitudes too large for exact fixed point. Inlined: the encoder's
    /// callers pass a constant `decimals`, which turns the scale's divisions into multiplications.
    @inlinable @inline(__always) mutating func fixed(_ value: Double, decimals: Int) {
        guard value.isFinite else { ascii("null"); return }
        precondition(decimals >= 0 && decimals <= 9, "decimals must be 0...9")
        let scale = UInt64(powerOfTen(decimals))
        guard let fixed = Self.scaled(value, by: scale) else { description(value); return }
        if fixed < 0 { byte(UInt8(ascii: "-")) }
        let magnitude = fixed.magnitude
        unsigned(magnitude / scale)
        let fraction = magnitude % scale
        guard fraction != 0 else { return }
        fractionDigits(fraction, width: decimals)
    }

    /// `value · scale` rounded half away from zero: the integer whose digits `fixed` writes; nil
    /// beyond exact fixed point (|value · scale| ≥ 9·10^18), where `fixed` falls back to the
    /// description. `DecimalFormat.rounded` reads a value back through the same rule.
    @inlinable @inline(__always) static func scaled(_ value: Double, by scale: UInt64) -> Int64? {
        guard let fixed = roundedHalfAwayFromZero(value * Double(scale)),
              fixed.magnitude < 9_000_000_000_000_000 else { return nil }
        return fixed
    }

    /// `x.rounded(.toNearestOrAwayFromZero)` as an integer, without the libm call it compiles
    /// to on x86-64; nil when |x| ≥ 2^62. Exact: `x - trunc(x)` is representable.
    @inlinable @inline(__always) static func roundedHalfAwayFromZero(_ x: Double) -> Int64? {
        guard abs(x) < 4_611_686_018_427_387_904 else { return nil }
        var r = Int64(x)  // toward zero
        let rest = x - Double(r)
        if rest >= 0.5 { r += 1 } else if rest <= -0.5 { r -= 1 }
        return r
    }

    /// `.` and `width` (≤ 9) digits of `fraction` (non-zero), trailing zeros dropped.
    @inlinable @inline(__always) mutating func fractionDigits(_ fraction: UInt64, width: Int) {
        reserve(10)  // '.', a ninth digit, and eight written as one word
        base[count] = UInt8(ascii: ".")
        var p = base + count + 1
        var eight = fraction
        if width == 9 {
            p.pointee = UInt8(truncatingIfNeeded: fraction / 100_000_000) &+ 0x30
            p += 1
            eight = fraction % 100_000_000
        } else {
            eight *= UInt64(powerOfTen(8 - width))  // left-aligned: the trailing zeros are trimmed below
        }
        let digits = Self.eightDigits(UInt32(truncatingIfNeeded: eight))
        UnsafeMutableRawPointer(p).storeBytes(of: (digits | 0x3030_3030_3030_3030).littleEndian, as: UInt64.self)
        // Trailing zero digits are the zero high bytes (the last digits) of `digits`.
        let kept = digits == 0 ? 0 : 8 - digits.leadingZeroBitCount >> 3
        count = p - base + kept
    }

    /// The eight decimal digits of `v` (< 10^8), zero-padded, as values 0...9 in bytes, the
    /// first digit in the lowest byte (memory order on a little-endian machine). SWAR: the
    /// halves, quarters and digits are split in parallel lanes by multiply-and-shift
    /// divisions, exact in these ranges (x·10486 >> 20 = x / 100 for x < 43,699;
    /// x·103 >> 10 = x / 10 for x < 179).
    @inlinable @inline(__always) static func eightDigits(_ v: UInt32) -> UInt64 {
        let hi = v / 10_000, lo = v % 10_000
        var x = UInt64(hi) | UInt64(lo) << 32
        let hundreds = ((x &* 10_486) >> 20) & 0x0000_007F_0000_007F
        x = hundreds | (x &- hundreds &* 100) << 16
        let tens = ((x &* 103) >> 10) & 0x000F_000F_000F_000F
        return tens | (x &- tens &* 10) << 8
    }

    @usableFromInline mutating func description(_ value: Double) {
        var text = value.description
        text.withUTF8 { bytes($0) }
    }

    /// `YYYY-MM-DDTHH:MM:SS[.fffffffff]Z`: the fraction exact, trailing zeros trimmed, none
    /// for whole seconds.
    @inlinable mutating func time(_ time: Timestamp) {
        let c = CivilTime(time)
        let year = c.year
        if year < 0 { byte(UInt8(ascii: "-")) } else if year > 9999 { byte(UInt8(ascii: "+")) }
        unsigned(UInt64(year.magnitude), width: 4)
        reserve(15)
        let p = base + count
        p[0] = UInt8(ascii: "-")
        Self.pair(c.month, at: p + 1)
        p[3] = UInt8(ascii: "-")
        Self.pair(c.day, at: p + 4)
        p[6] = UInt8(ascii: "T")
        Self.pair(c.hour, at: p + 7)
        p[9] = UInt8(ascii: ":")
        Self.pair(c.minute, at: p + 10)
        p[12] = UInt8(ascii: ":")
        Self.pair(c.second, at: p + 13)
        count += 15
        if c.nanosecond != 0 { fractionDigits(UInt64(c.nanosecond), width: 9) }
        byte(UInt8(ascii: "Z"))
    }
}

extension Array where Element == UInt8 {
    /// Appends what `body` writes, at most `capacity` bytes, with one copy.
    @inlinable mutating func appendWritten(capacity: Int, _ body: (inout ByteWriter) -> Void) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: capacity) { buffer in
            var w = ByteWriter(buffer)
            body(&w)
            append(contentsOf: UnsafeBufferPointer(rebasing: buffer[..<w.count]))
        }
    }
}
