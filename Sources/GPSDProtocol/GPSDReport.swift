import LocationCore
import LocationProtocol

/// gpsd's JSON reports (`gpsd_json(5)`, as gpsd 3.22 writes them) made from locationd's fixes,
/// for programs written against libgps or gpsd's Python module.
///
/// Compact JSON only: libgps silently drops a line with a space after `:` or `,`. Fields come
/// in gpsd's order with gpsd's fixed decimals (degrees `%.9f`, altitudes and tracks `%.4f`,
/// errors and speeds `%.3f`), and a field is written only when the fix knows it, as gpsd leaves
/// out what it does not know. Every line ends in CR LF, as gpsd's, and is at most
/// `maxLineBytes` long but a `SKY`, which is as long as gpsd's for its satellites.
public enum GPSDReport {
    /// gpsd's `GPS_JSON_RESPONSE_MAX` for a client line as libgps 3.22 reads it whole.
    public static let maxLineBytes = 1536
    /// The protocol version gpsd 3.22 announces; clients check the major only.
    public static let protocolMajor = 3
    public static let protocolMinor = 14

    /// How much of a fix a connection may see.
    public enum Detail: Sendable, Hashable {
        /// Everything the fix carries.
        case precise
        /// The published cell: mode 2, position and its radius; no altitude, speed or track.
        case approximate
    }

    /// A `TPV` for a fix. Time is gpsd's: milliseconds, truncated, `Z`.
    public static func tpv(_ fix: Fix, device: String, detail: Detail = .precise) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(320)
        JSONWriter.appendASCII("{\"class\":\"TPV\",\"device\":", to: &out)
        appendString(device, to: &out)
        let precise = detail == .precise
        JSONWriter.appendASCII(",\"mode\":", to: &out)
        out.append(precise && fix.mode == .threeD ? UInt8(ascii: "3") : UInt8(ascii: "2"))
        JSONWriter.appendASCII(",\"time\":\"", to: &out)
        appendTime(fix.time, to: &out)
        out.append(UInt8(ascii: "\""))
        field(",\"lat\":", fix.coordinate.latitude, 9, &out)
        field(",\"lon\":", fix.coordinate.longitude, 9, &out)
        if precise {
            field(",\"altHAE\":", fix.altitudeHAE, 4, &out)
            field(",\"altMSL\":", fix.altitudeMSL, 4, &out)
            // gpsd 3.22 still writes the deprecated `alt` (= altMSL) for older clients.
            field(",\"alt\":", fix.altitudeMSL, 4, &out)
            field(",\"epv\":", fix.verticalAccuracy, 3, &out)
            field(",\"track\":", fix.course, 4, &out)
            field(",\"speed\":", fix.speed, 3, &out)
        }
        field(",\"eph\":", fix.horizontalAccuracy, 3, &out)
        return finish(&out)
    }

    /// A `TPV` for an epoch without a position (mode 1), at the receiver's time when known.
    public static func noFix(at time: Timestamp?, device: String) -> [UInt8] {
        var out: [UInt8] = []
        JSONWriter.appendASCII("{\"class\":\"TPV\",\"device\":", to: &out)
        appendString(device, to: &out)
        JSONWriter.appendASCII(",\"mode\":1", to: &out)
        if let time {
            JSONWriter.appendASCII(",\"time\":\"", to: &out)
            appendTime(time, to: &out)
            out.append(UInt8(ascii: "\""))
        }
        return finish(&out)
    }

    /// A `SKY`, as gpsd 3.22 writes it: DOPs `%.2f`, then `nSat` and `uSat`, then each
    /// satellite with `el`, `az`, `ss` `%.1f` when known and in range, `gnssid` and `svid` when
    /// `svid` is not 0, `sigid` when not 0, `freqid` for GLONASS only, `health` when known.
    /// `device` is left out when empty. Its length is gpsd's: up to gpsd's 140 channels.
    public static func sky(_ sky: GPSDSky, device: String) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(96 + 96 * sky.satellites.count)
        JSONWriter.appendASCII("{\"class\":\"SKY\"", to: &out)
        if !device.isEmpty {
            JSONWriter.appendASCII(",\"device\":", to: &out)
            appendString(device, to: &out)
        }
        if let time = sky.time {
            JSONWriter.appendASCII(",\"time\":\"", to: &out)
            appendTime(time, to: &out)
            out.append(UInt8(ascii: "\""))
        }
        let dop = sky.dop
        field(",\"xdop\":", dop.x, 2, &out)
        field(",\"ydop\":", dop.y, 2, &out)
        field(",\"vdop\":", dop.vertical, 2, &out)
        field(",\"tdop\":", dop.time, 2, &out)
        field(",\"hdop\":", dop.horizontal, 2, &out)
        field(",\"gdop\":", dop.geometric, 2, &out)
        field(",\"pdop\":", dop.position, 2, &out)
        let satellites = sky.satellites.filter { $0.prn != 0 }
        JSONWriter.appendASCII(",\"nSat\":", to: &out)
        DecimalFormat.appendInteger(Int64(satellites.count), to: &out)
        JSONWriter.appendASCII(",\"uSat\":", to: &out)
        DecimalFormat.appendInteger(Int64(satellites.filter(\.used).count), to: &out)
        if !satellites.isEmpty {
            JSONWriter.appendASCII(",\"satellites\":[", to: &out)
            for (i, s) in satellites.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                appendSatellite(s, to: &out)
            }
            out.append(UInt8(ascii: "]"))
        }
        return finish(&out)
    }

    private static func appendSatellite(_ s: GPSDSky.Satellite, to out: inout [UInt8]) {
        JSONWriter.appendASCII("{\"PRN\":", to: &out)
        DecimalFormat.appendInteger(Int64(s.prn), to: &out)
        field(",\"el\":", s.elevation.flatMap { abs($0) <= 90 ? $0 : nil }, 1, &out)
        field(",\"az\":", s.azimuth.flatMap { (0...359).contains(abs($0)) ? $0 : nil }, 1, &out)
        field(",\"ss\":", s.signalToNoise, 1, &out)
        JSONWriter.appendASCII(",\"used\":", to: &out)
        appendBool(s.used, to: &out)
        if s.svid != 0 {
            JSONWriter.appendASCII(",\"gnssid\":", to: &out)
            DecimalFormat.appendInteger(Int64(s.gnssid), to: &out)
            JSONWriter.appendASCII(",\"svid\":", to: &out)
            DecimalFormat.appendInteger(Int64(s.svid), to: &out)
        }
        if s.sigid != 0 {
            JSONWriter.appendASCII(",\"sigid\":", to: &out)
            DecimalFormat.appendInteger(Int64(s.sigid), to: &out)
        }
        if let freqid = s.freqid, s.gnssid == 6, (0...16).contains(freqid) {
            JSONWriter.appendASCII(",\"freqid\":", to: &out)
            DecimalFormat.appendInteger(Int64(freqid), to: &out)
        }
        if s.health != 0 {
            JSONWriter.appendASCII(",\"health\":", to: &out)
            DecimalFormat.appendInteger(Int64(s.health), to: &out)
        }
        out.append(UInt8(ascii: "}"))
    }

    /// The greeting gpsd sends on connect. `release` is the gpsd release whose protocol is
    /// spoken (clients compare it), `rev` names the server.
    public static func version(release: String = "3.22", rev: String) -> [UInt8] {
        var out: [UInt8] = []
        JSONWriter.appendASCII("{\"class\":\"VERSION\",\"release\":", to: &out)
        appendString(release, to: &out)
        JSONWriter.appendASCII(",\"rev\":", to: &out)
        appendString(rev, to: &out)
        JSONWriter.appendASCII(",\"proto_major\":", to: &out)
        DecimalFormat.appendInteger(Int64(protocolMajor), to: &out)
        JSONWriter.appendASCII(",\"proto_minor\":", to: &out)
        DecimalFormat.appendInteger(Int64(protocolMinor), to: &out)
        return finish(&out)
    }

    /// The device a client sees: locationd itself, a GPS (`flags` 1, gpsd's SEEN_GPS).
    public struct Device: Sendable, Hashable {
        public var path: String
        /// When the source began reporting; nil while it has not (gpsd omits `activated`).
        public var activated: Timestamp?
        public init(path: String, activated: Timestamp?) { self.path = path; self.activated = activated }
    }

    /// One `DEVICE` object without its closing brace (the reply to `?DEVICE;`, and each
    /// element of `DEVICES`).
    static func appendDeviceFields(_ device: Device, to out: inout [UInt8]) {
        JSONWriter.appendASCII("{\"class\":\"DEVICE\",\"path\":", to: &out)
        appendString(device.path, to: &out)
        JSONWriter.appendASCII(",\"driver\":\"locationd\"", to: &out)
        if let activated = device.activated {
            JSONWriter.appendASCII(",\"activated\":\"", to: &out)
            appendTime(activated, to: &out)
            out.append(UInt8(ascii: "\""))
        }
        JSONWriter.appendASCII(",\"flags\":1", to: &out)
    }

    public static func device(_ device: Device) -> [UInt8] {
        var out: [UInt8] = []
        appendDeviceFields(device, to: &out)
        return finish(&out)
    }

    public static func devices(_ devices: [Device]) -> [UInt8] {
        var out: [UInt8] = []
        JSONWriter.appendASCII("{\"class\":\"DEVICES\",\"devices\":[", to: &out)
        for (i, d) in devices.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            appendDeviceFields(d, to: &out)
            out.append(UInt8(ascii: "}"))
        }
        out.append(UInt8(ascii: "]"))
        return finish(&out)
    }

    /// The reply to `?WATCH`: the connection's watch as it now is. Only JSON is served, so
    /// `nmea`, `raw`, `scaled`, `split24`, `pps` and `timing` are always off.
    public static func watch(_ watch: GPSDWatch) -> [UInt8] {
        var out: [UInt8] = []
        JSONWriter.appendASCII("{\"class\":\"WATCH\",\"enable\":", to: &out)
        appendBool(watch.enable, to: &out)
        JSONWriter.appendASCII(",\"json\":", to: &out)
        appendBool(watch.json, to: &out)
        JSONWriter.appendASCII(",\"nmea\":false,\"raw\":0,\"scaled\":false,\"timing\":false,\"split24\":false,\"pps\":false", to: &out)
        return finish(&out)
    }

    /// The reply to `?POLL;`: the last `TPV` and `SKY` of the one device (none before the
    /// first), each a report line as sent.
    public static func poll(at time: Timestamp, last: [UInt8]?, sky: [UInt8]? = nil) -> [UInt8] {
        var out: [UInt8] = []
        JSONWriter.appendASCII("{\"class\":\"POLL\",\"time\":\"", to: &out)
        appendTime(time, to: &out)
        JSONWriter.appendASCII("\",\"active\":", to: &out)
        out.append(last == nil ? UInt8(ascii: "0") : UInt8(ascii: "1"))
        JSONWriter.appendASCII(",\"tpv\":[", to: &out)
        if let last { appendWithoutLineEnd(last, to: &out) }
        JSONWriter.appendASCII("],\"sky\":[", to: &out)
        if let sky { appendWithoutLineEnd(sky, to: &out) }
        out.append(UInt8(ascii: "]"))
        return finish(&out)
    }

    private static func appendWithoutLineEnd(_ report: [UInt8], to out: inout [UInt8]) {
        var end = report.endIndex
        while end > report.startIndex, report[end - 1] == 0x0A || report[end - 1] == 0x0D { end -= 1 }
        out.append(contentsOf: report[..<end])
    }

    /// gpsd's `ERROR` class. The message is cut so that the line stays within `maxLineBytes`.
    public static func error(_ message: String) -> [UInt8] {
        var out: [UInt8] = []
        JSONWriter.appendASCII("{\"class\":\"ERROR\",\"message\":", to: &out)
        appendString(String(message.unicodeScalars.prefix(maxLineBytes / 8)), to: &out)
        return finish(&out)
    }

    // MARK: - Formatting

    private static func finish(_ out: inout [UInt8]) -> [UInt8] {
        out.append(UInt8(ascii: "}"))
        out.append(0x0D)
        out.append(0x0A)
        return out
    }

    private static func appendBool(_ value: Bool, to out: inout [UInt8]) {
        if value { JSONWriter.appendASCII("true", to: &out) } else { JSONWriter.appendASCII("false", to: &out) }
    }

    /// A string as gpsd writes one: printable ASCII, at most 128 bytes (a device path or a
    /// release; anything else is replaced by `?`), so that no client's fixed buffer overflows.
    private static func appendString(_ s: String, to out: inout [UInt8]) {
        var clean: [UInt8] = []
        for b in s.utf8.prefix(128) { clean.append(b >= 0x20 && b < 0x7F ? b : UInt8(ascii: "?")) }
        JSONWriter.appendString(String(decoding: clean, as: UTF8.self), to: &out)
    }

    private static func field(_ name: StaticString, _ value: Double?, _ decimals: Int, _ out: inout [UInt8]) {
        guard let value, value.isFinite else { return }
        JSONWriter.appendASCII(name, to: &out)
        appendFixed(value, decimals: decimals, to: &out)
    }

    /// `printf("%.Nf")` as gpsd uses it: rounded, trailing zeros kept.
    static func appendFixed(_ value: Double, decimals: Int, to out: inout [UInt8]) {
        var scale = 1.0
        for _ in 0..<decimals { scale *= 10 }
        let magnitude = (abs(value) * scale).rounded()
        guard magnitude < 9.0e15 else {  // beyond exact integers: no fixed reading anyway
            out.append(contentsOf: value.description.utf8)
            return
        }
        let scaled = Int64(magnitude), divisor = Int64(scale)
        if value < 0 && scaled != 0 { out.append(UInt8(ascii: "-")) }
        DecimalFormat.appendInteger(scaled / divisor, to: &out)
        if decimals > 0 {
            out.append(UInt8(ascii: "."))
            DecimalFormat.appendPadded(UInt64(scaled % divisor), width: decimals, to: &out)
        }
    }

    /// `YYYY-MM-DDTHH:MM:SS.mmmZ`, milliseconds truncated (gpsd's `timespec_to_iso8601`).
    static func appendTime(_ time: Timestamp, to out: inout [UInt8]) {
        let c = CivilTime(time)
        DecimalFormat.appendPadded(UInt64(max(0, c.year)), width: 4, to: &out)
        out.append(UInt8(ascii: "-"))
        DecimalFormat.appendPadded(UInt64(c.month), width: 2, to: &out)
        out.append(UInt8(ascii: "-"))
        DecimalFormat.appendPadded(UInt64(c.day), width: 2, to: &out)
        out.append(UInt8(ascii: "T"))
        DecimalFormat.appendPadded(UInt64(c.hour), width: 2, to: &out)
        out.append(UInt8(ascii: ":"))
        DecimalFormat.appendPadded(UInt64(c.minute), width: 2, to: &out)
        out.append(UInt8(ascii: ":"))
        DecimalFormat.appendPadded(UInt64(c.second), width: 2, to: &out)
        out.append(UInt8(ascii: "."))
        DecimalFormat.appendPadded(UInt64(c.nanosecond / 1_000_000), width: 3, to: &out)
        out.append(UInt8(ascii: "Z"))
    }
}
