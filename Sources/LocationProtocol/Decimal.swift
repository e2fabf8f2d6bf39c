/// Fixed-point decimal formatting straight into a byte buffer: no Foundation, no `String`,
/// no allocation beyond the buffer's own growth. Used on the event hot path.
public enum DecimalFormat {
    @usableFromInline static let powersOfTen: [Int64] = [
        1, 10, 100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000, 100_000_000, 1_000_000_000,
    ]

    /// Appends the decimal digits of `value` (with a leading `-` when negative).
    @inlinable public static func appendInteger(_ value: Int64, to out: inout [UInt8]) {
        var magnitude = value.magnitude
        if value < 0 { out.append(UInt8(ascii: "-")) }
        appendUnsigned(&magnitude, to: &out)
    }

    @inlinable static func appendUnsigned(_ value: inout UInt64, to out: inout [UInt8]) {
        let start = out.count
        repeat {
            out.append(UInt8(truncatingIfNeeded: value % 10) &+ 0x30)
            value /= 10
        } while value != 0
        out[start...].reverse()
    }

    /// Appends `value` rounded (half away from zero) to `decimals` (0...9) fractional digits,
    /// trailing zeros trimmed (`1.5`, `2`, `-0.25`). Never writes `-0`. Non-finite values become
    /// `null`; magnitudes too large for exact fixed point fall back to Swift's description.
    @inlinable public static func appendFixed(_ value: Double, decimals: Int, to out: inout [UInt8]) {
        guard value.isFinite else { JSONWriter.appendASCII("null", to: &out); return }
        let scale = powersOfTen[decimals]
        let scaled = (value * Double(scale)).rounded(.toNearestOrAwayFromZero)
        guard abs(scaled) < 9.0e15 else {
            out.append(contentsOf: value.description.utf8)
            return
        }
        let fixed = Int64(scaled)
        if fixed < 0 { out.append(UInt8(ascii: "-")) }
        let magnitude = fixed.magnitude
        var integerPart = magnitude / UInt64(scale)
        var fraction = magnitude % UInt64(scale)
        appendUnsigned(&integerPart, to: &out)
        guard fraction != 0 else { return }
        var digits = decimals
        while fraction % 10 == 0 { fraction /= 10; digits -= 1 }
        out.append(UInt8(ascii: "."))
        appendPadded(fraction, width: digits, to: &out)
    }

    /// Appends `value` zero-padded to at least `width` digits.
    @inlinable public static func appendPadded(_ value: UInt64, width: Int, to out: inout [UInt8]) {
        let start = out.count
        var v = value
        var n = 0
        repeat {
            out.append(UInt8(truncatingIfNeeded: v % 10) &+ 0x30)
            v /= 10
            n += 1
        } while v != 0
        while n < width { out.append(0x30); n += 1 }
        out[start...].reverse()
    }
}
