import LocationCore

/// Fixed-point decimal formatting straight into a byte buffer: no Foundation, no `String`,
/// no allocation beyond the buffer's own growth. The formats themselves are `ByteWriter`'s.
public enum DecimalFormat {
    /// Appends the decimal digits of `value` (with a leading `-` when negative).
    @inlinable public static func appendInteger(_ value: Int64, to out: inout [UInt8]) {
        out.appendWritten(capacity: 20) { $0.integer(value) }
    }

    /// Appends `value` rounded (half away from zero) to `decimals` (0...9) fractional digits,
    /// trailing zeros trimmed (`1.5`, `2`, `-0.25`). Never writes `-0`. Non-finite values become
    /// `null`; magnitudes too large for exact fixed point fall back to Swift's description.
    @inlinable public static func appendFixed(_ value: Double, decimals: Int, to out: inout [UInt8]) {
        out.appendWritten(capacity: ByteWriter.maxNumber) { $0.fixed(value, decimals: decimals) }
    }

    /// The number `appendFixed(value, decimals:)` writes, as a reader parses it back. A decoder
    /// that keeps what it receives to the wire's precision holds exactly what it later sends,
    /// so a value survives any number of round trips unchanged (while |value|·10^decimals < 2^50,
    /// ≈ 10^15; beyond, multiplying back can move the last digit). Exact: the scaled integer and
    /// the power of ten are both exact doubles and the division rounds once, as parsing the
    /// written digits does.
    @inlinable public static func rounded(_ value: Double, decimals: Int) -> Double {
        guard value.isFinite else { return value }
        let scale = UInt64(powerOfTen(decimals))
        guard let fixed = ByteWriter.scaled(value, by: scale) else { return value }
        return Double(fixed) / Double(scale)
    }

    /// Decimal places on the wire (docs/protocol.md, "Numbers"): degrees to 9 (≈ 0.1 mm at the
    /// equator), metres to 3 (1 mm); finer digits are below any receiver's accuracy.
    @inlinable public static var degreeDecimals: Int { 9 }
    @inlinable public static var metreDecimals: Int { 3 }

    /// Appends `value` zero-padded to at least `width` digits.
    @inlinable public static func appendPadded(_ value: UInt64, width: Int, to out: inout [UInt8]) {
        out.appendWritten(capacity: Swift.max(width, 20)) { $0.unsigned(value, width: width) }
    }
}
