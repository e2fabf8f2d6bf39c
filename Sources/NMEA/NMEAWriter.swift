import LocationCore

/// Writes fixes as NMEA 0183 sentences (RMC, GGA, GSA, GST), the way a receiver would: used by
/// the simulator to make the project's own logs, and by tests to round-trip the parser.
public struct NMEAWriter: Sendable {
    public var talker: String

    public init(talker: String = "GP") { self.talker = talker }

    /// What the receiver would say about its solution besides the fix itself.
    public struct Quality: Sendable {
        public var satellites: Int = 9
        public var hdop: Double = 0.9
        public var vdop: Double = 1.2
        public var pdop: Double = 1.5
        /// One-sigma errors for GST, metres; GST is written only when set.
        public var sigmaLatitude: Double?
        public var sigmaLongitude: Double?
        public var sigmaAltitude: Double?
        /// Geoid separation (HAE − MSL), metres.
        public var geoidSeparation: Double = 0
        public init() {}
    }

    /// What a receiver reporting `fix` would have said of its solution: DOPs and the geoid
    /// separation read back through the decoder's own model (`UERE`: 95 % error = DOP × UERE),
    /// so that a reader of the sentences finds the fix's accuracy again.
    public static func quality(of fix: Fix) -> Quality {
        var q = Quality()
        if let h = fix.horizontalAccuracy, h.isFinite, h > 0 { q.hdop = h / UERE.horizontal }
        if let v = fix.verticalAccuracy, v.isFinite, v > 0 { q.vdop = v / UERE.vertical }
        if let hae = fix.altitudeHAE, let msl = fix.altitudeMSL { q.geoidSeparation = hae - msl }
        return q
    }

    /// The sentences of one epoch with a position, CRLF-terminated. A coordinate off the globe
    /// (non-finite, or beyond ±90/±180) has no NMEA text: the epoch is written without a fix,
    /// as a receiver would, rather than as fields a parser would misread.
    public func epoch(_ fix: Fix, quality: Quality = Quality()) -> String {
        guard fix.coordinate.isValid else { return noFixEpoch(at: fix.time) }
        var out = rmcAndGGA(fix, quality: quality)
        let time = Self.timeField(fix.time)
        let mode = fix.mode == .threeD ? "3" : "2"
        let used = max(0, min(12, quality.satellites))  // GSA lists at most 12
        let prns = (0..<used).map { two(($0 + 1) * 2) }.joined(separator: ",")
        let empty = String(repeating: ",", count: 12 - used)
        out += sentence("\(talker)GSA,A,\(mode),\(prns)\(empty),\(fixed(quality.pdop, 1)),\(fixed(quality.hdop, 1)),\(fixed(quality.vdop, 1))")
        if let sLat = quality.sigmaLatitude, let sLon = quality.sigmaLongitude {
            let sAlt = quality.sigmaAltitude.map { fixed($0, 1) } ?? ""
            let rms = fixed((sLat * sLat + sLon * sLon).squareRoot(), 1)
            out += sentence("\(talker)GST,\(time),\(rms),\(fixed(max(sLat, sLon), 1)),\(fixed(min(sLat, sLon), 1)),0.0,"
                + "\(fixed(sLat, 1)),\(fixed(sLon, 1)),\(sAlt)")
        }
        return out
    }

    /// RMC and GGA of a fix: position, time, date, speed, course, altitude and HDOP — all that
    /// GeoClue's NMEA source reads. Empty for a coordinate off the globe.
    public func rmcAndGGA(_ fix: Fix, quality: Quality = Quality()) -> String {
        rmcAndGGA(fix, quality: quality, hdop: fixed(quality.hdop, 1))
    }

    /// RMC and GGA with time and position only — no speed, course, HDOP or altitude: what a GPX
    /// track or a phone's log of positions says, as a receiver that knows nothing else.
    public func positions(_ fix: Fix) -> String {
        var bare = fix
        bare.speed = nil; bare.course = nil; bare.altitudeMSL = nil; bare.altitudeHAE = nil
        return rmcAndGGA(bare, quality: Quality(), hdop: "")
    }

    private func rmcAndGGA(_ fix: Fix, quality: Quality, hdop: String) -> String {
        guard fix.coordinate.isValid else { return "" }
        let time = Self.timeField(fix.time)
        let c = CivilTime(fix.time)
        let date = two(c.day) + two(c.month) + two(c.year % 100)
        let (lat, ns) = Self.angle(fix.coordinate.latitude, degreeDigits: 2, positive: "N", negative: "S")
        let (lon, ew) = Self.angle(fix.coordinate.longitude, degreeDigits: 3, positive: "E", negative: "W")
        let knots = fix.speed.map { fixed($0 / 0.514444, 3) } ?? ""
        let course = fix.course.map { fixed($0, 2) } ?? ""
        let msl = fix.altitudeMSL ?? fix.altitudeHAE.map { $0 - quality.geoidSeparation }
        return sentence("\(talker)RMC,\(time),A,\(lat),\(ns),\(lon),\(ew),\(knots),\(course),\(date),,,A")
            + sentence("\(talker)GGA,\(time),\(lat),\(ns),\(lon),\(ew),1,\(two(max(0, quality.satellites))),\(hdop),"
                + "\(msl.map { fixed($0, 1) } ?? ""),M,\(fixed(quality.geoidSeparation, 1)),M,,")
    }

    /// hhmmss.ss
    private static func timeField(_ time: Timestamp) -> String {
        let c = CivilTime(time)
        return two(c.hour) + two(c.minute) + two(c.second) + "." + two(c.nanosecond / 10_000_000)
    }

    /// The sentences of an epoch without a position (fix lost), as receivers send them.
    public func noFixEpoch(at time: Timestamp) -> String {
        let c = CivilTime(time)
        let t = two(c.hour) + two(c.minute) + two(c.second) + "." + two(c.nanosecond / 10_000_000)
        let date = two(c.day) + two(c.month) + two(c.year % 100)
        return sentence("\(talker)RMC,\(t),V,,,,,,,\(date),,,N")
            + sentence("\(talker)GGA,\(t),,,,,0,00,99.9,,,,,,")
            + sentence("\(talker)GSA,A,1,,,,,,,,,,,,,99.9,99.9,99.9")
    }

    /// `$BODY*HH\r\n` with the XOR checksum of BODY.
    public func sentence(_ body: String) -> String {
        var sum: UInt8 = 0
        for b in body.utf8 { sum ^= b }
        let hex = Array("0123456789ABCDEF".utf8)
        return "$" + body + "*" + String(decoding: [hex[Int(sum >> 4)], hex[Int(sum & 15)]], as: UTF8.self) + "\r\n"
    }

    /// NMEA's ddmm.mmmmm / dddmm.mmmmm with 5 decimals of minutes (≈ 2 cm). A value that does
    /// not fit the field (non-finite, or more than 90° / 180°) is written as empty fields, the
    /// way NMEA says "no value": `Int(a)` would trap on it.
    static func angle(_ value: Double, degreeDigits: Int, positive: String, negative: String) -> (String, String) {
        let a = abs(value)
        guard a <= (degreeDigits == 2 ? 90 : 180) else { return ("", "") }
        var degrees = Int(a)
        var minutes100k = Int(((a - Double(degrees)) * 60 * 100_000).rounded())
        if minutes100k >= 60 * 100_000 { degrees += 1; minutes100k -= 60 * 100_000 }
        let d = String(degrees)
        let padded = String(repeating: "0", count: max(0, degreeDigits - d.count)) + d
        let whole = minutes100k / 100_000, frac = String(minutes100k % 100_000)
        let text = padded + two(whole) + "." + String(repeating: "0", count: 5 - frac.count) + frac
        return (text, value < 0 ? negative : positive)
    }
}

private func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }

/// Fixed-point decimal text without Foundation (`String(format:)`); empty (NMEA's "no value")
/// when the value is non-finite or too large for the `Int64` it is scaled into.
private func fixed(_ value: Double, _ decimals: Int) -> String {
    var scale = 1.0
    for _ in 0..<decimals { scale *= 10 }
    guard abs(value) * scale < 9.0e18 else { return "" }
    let scaled = Int64((abs(value) * scale).rounded())
    let s = Int64(scale)
    let intPart = String(scaled / s)
    var text = (value < 0 && scaled != 0 ? "-" : "") + intPart
    if decimals > 0 {
        let f = String(scaled % s)
        text += "." + String(repeating: "0", count: decimals - f.count) + f
    }
    return text
}
