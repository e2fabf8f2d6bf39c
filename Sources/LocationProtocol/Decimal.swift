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

    /// Appends `value` zero-padded to at least `width` digits.
    @inlinable public static func appendPadded(_ value: UInt64, width: Int, to out: inout [UInt8]) {
        out.appendWritten(capacity: Swift.max(width, 20)) { $0.unsigned(value, width: width) }
    }
}
