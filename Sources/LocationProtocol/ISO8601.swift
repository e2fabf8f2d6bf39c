import LocationCore

/// ISO 8601 / RFC 3339 UTC times for the wire: `2019-03-12T10:00:01.25Z`.
///
/// Formatting keeps the fraction exactly (nanoseconds, trailing zeros trimmed, no fraction for
/// whole seconds) and always writes `Z`. Parsing accepts `Z` or a `±HH:MM` offset, 1–9
/// fraction digits (more are rejected rather than silently rounded), and validates every field
/// against the calendar (leap years included). Years 1678–2261 only: a `Timestamp` is 64-bit
/// nanoseconds since 1970, which hold ±292 years, and a year outside would wrap around.
public enum ISO8601 {
    /// Appends `time` as `YYYY-MM-DDTHH:MM:SS[.fffffffff]Z` (quotes not included).
    @inlinable public static func append(_ time: Timestamp, to out: inout [UInt8]) {
        out.appendWritten(capacity: ByteWriter.maxTime) { $0.time(time) }
    }

    public static func string(_ time: Timestamp) -> String {
        var out: [UInt8] = []
        append(time, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    static func isLeap(_ y: Int) -> Bool { (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 }

    static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: isLeap(year) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Parses an ISO 8601 date-time; `nil` when it is malformed or not a real calendar time.
    public static func parse(_ text: String) -> Timestamp? {
        let b = Array(text.utf8)
        var i = 0
        func digits(_ n: Int) -> Int? {
            guard i + n <= b.count else { return nil }
            var v = 0
            for k in i..<(i + n) {
                guard b[k] >= 0x30 && b[k] <= 0x39 else { return nil }
                v = v * 10 + Int(b[k] - 0x30)
            }
            i += n
            return v
        }
        func expect(_ c: UInt8) -> Bool {
            guard i < b.count, b[i] == c else { return false }
            i += 1
            return true
        }
        var sign = 1
        var yearDigits = 4
        if i < b.count, b[i] == UInt8(ascii: "+") || b[i] == UInt8(ascii: "-") {
            sign = b[i] == UInt8(ascii: "-") ? -1 : 1
            i += 1
            // Expanded years: as many digits as precede the '-'.
            var n = 0
            while i + n < b.count, b[i + n] >= 0x30 && b[i + n] <= 0x39 { n += 1 }
            guard n >= 4 && n <= 6 else { return nil }
            yearDigits = n
        }
        guard let y = digits(yearDigits), expect(UInt8(ascii: "-")),
              let month = digits(2), expect(UInt8(ascii: "-")),
              let day = digits(2) else { return nil }
        let year = sign * y
        guard i < b.count, b[i] == UInt8(ascii: "T") || b[i] == UInt8(ascii: "t") || b[i] == 0x20 else { return nil }
        i += 1
        guard let hour = digits(2), expect(UInt8(ascii: ":")),
              let minute = digits(2), expect(UInt8(ascii: ":")),
              let second = digits(2) else { return nil }
        var nanos = 0
        if i < b.count, b[i] == UInt8(ascii: ".") || b[i] == UInt8(ascii: ",") {
            i += 1
            var n = 0
            while i < b.count, b[i] >= 0x30 && b[i] <= 0x39 {
                guard n < 9 else { return nil }
                nanos = nanos * 10 + Int(b[i] - 0x30)
                n += 1
                i += 1
            }
            guard n > 0 else { return nil }
            for _ in n..<9 { nanos *= 10 }
        }
        var offsetSeconds = 0
        guard i < b.count else { return nil }
        if b[i] == UInt8(ascii: "Z") || b[i] == UInt8(ascii: "z") {
            i += 1
        } else if b[i] == UInt8(ascii: "+") || b[i] == UInt8(ascii: "-") {
            let s = b[i] == UInt8(ascii: "-") ? -1 : 1
            i += 1
            guard let oh = digits(2), expect(UInt8(ascii: ":")), let om = digits(2), oh < 24, om < 60 else { return nil }
            offsetSeconds = s * (oh * 3600 + om * 60)
        } else {
            return nil
        }
        guard i == b.count else { return nil }
        guard (1678...2261).contains(year), (1...12).contains(month), day >= 1, day <= daysIn(month: month, year: year),
              hour < 24, minute < 60, second <= 60 else { return nil }
        let civil = CivilTime(year: year, month: month, day: day, hour: hour, minute: minute,
                              second: second, nanosecond: nanos)
        return Timestamp(nanoseconds: civil.timestamp.nanoseconds &- Int64(offsetSeconds) &* 1_000_000_000)
    }
}
