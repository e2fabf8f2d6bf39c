/// A point in time: nanoseconds since 1970-01-01T00:00:00Z (UTC, leap seconds not counted).
///
/// The core never reads a clock; every `Timestamp` comes from a fix (GPS time) or from an
/// injected clock in the shell. Integer nanoseconds keep fractional seconds exact (NMEA's
/// centiseconds, gpsd's timespec) and make comparisons and differences cheap.
public struct Timestamp: Hashable, Comparable, Sendable {
    public var nanoseconds: Int64

    @inlinable public init(nanoseconds: Int64) { self.nanoseconds = nanoseconds }

    @inlinable public init(seconds: Int64, nanoseconds: Int64 = 0) {
        self.nanoseconds = seconds &* 1_000_000_000 &+ nanoseconds
    }

    /// Seconds since the epoch as a Double (for arithmetic where ns precision is not needed).
    @inlinable public var secondsSinceEpoch: Double { Double(nanoseconds) / 1e9 }

    @inlinable public static func < (a: Timestamp, b: Timestamp) -> Bool { a.nanoseconds < b.nanoseconds }

    /// `a - b` in seconds.
    @inlinable public static func - (a: Timestamp, b: Timestamp) -> Double {
        Double(a.nanoseconds &- b.nanoseconds) / 1e9
    }

    @inlinable public func adding(seconds: Double) -> Timestamp {
        Timestamp(nanoseconds: nanoseconds &+ Int64((seconds * 1e9).rounded()))
    }

    /// A fix timed this many seconds or more before the latest one means the receiver's clock
    /// jumped back (52 minutes in gpsd's bt451 log); one less is only out of order (two
    /// receivers behind one gpsd). Every detector's rule (docs/semantics.md, "Clock jumps").
    public static let clockJumpBack = 60.0

    /// Where a fix timed `self` stands against the latest one before it.
    public enum Order: Sendable {
        /// Later: time goes on.
        case later
        /// The same time: a later report of the same epoch.
        case sameEpoch
        /// Less than `clockJumpBack` earlier: out of order (two receivers behind one gpsd).
        case outOfOrder
        /// `clockJumpBack` or more earlier: the receiver's clock jumped back.
        case jumpedBack
    }

    /// The one place the rule above is decided.
    @inlinable public func order(after latest: Timestamp) -> Order {
        if self > latest { return .later }
        if self == latest { return .sameEpoch }
        return latest - self < Timestamp.clockJumpBack ? .outOfOrder : .jumpedBack
    }
}

/// A proleptic Gregorian calendar date and UTC time of day, for converting to and from
/// `Timestamp` without Foundation (days-from-civil, H. Hinnant's algorithm).
public struct CivilTime: Hashable, Sendable {
    public var year: Int
    public var month: Int       // 1...12
    public var day: Int         // 1...31
    public var hour: Int        // 0...23
    public var minute: Int      // 0...59
    public var second: Int      // 0...60 (60 only for a leap second as a receiver reports it)
    public var nanosecond: Int  // 0..<1_000_000_000

    public init(year: Int, month: Int, day: Int, hour: Int = 0, minute: Int = 0, second: Int = 0, nanosecond: Int = 0) {
        self.year = year; self.month = month; self.day = day
        self.hour = hour; self.minute = minute; self.second = second; self.nanosecond = nanosecond
    }

    /// Days since 1970-01-01 for a civil date.
    @inlinable public static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    /// Civil date for days since 1970-01-01.
    @inlinable public static func civilFromDays(_ days: Int) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (m <= 2 ? 1 : 0), m, d)
    }

    public var timestamp: Timestamp {
        let days = Int64(CivilTime.daysFromCivil(year: year, month: month, day: day))
        let secs = days * 86_400 + Int64(hour * 3600 + minute * 60 + second)
        return Timestamp(seconds: secs, nanoseconds: Int64(nanosecond))
    }

    /// Inlinable: the event encoder formats every event's time through it.
    @inlinable public init(_ t: Timestamp) {
        var secs = t.nanoseconds / 1_000_000_000
        var ns = t.nanoseconds % 1_000_000_000
        if ns < 0 { ns += 1_000_000_000; secs -= 1 }
        var days = secs / 86_400
        var sod = secs % 86_400
        if sod < 0 { sod += 86_400; days -= 1 }
        let (y, m, d) = CivilTime.civilFromDays(Int(days))
        self.init(year: y, month: m, day: d, hour: Int(sod / 3600), minute: Int(sod % 3600 / 60),
                  second: Int(sod % 60), nanosecond: Int(ns))
    }
}
