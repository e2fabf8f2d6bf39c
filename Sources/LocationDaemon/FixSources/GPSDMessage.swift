import Glibc
import GPSDProtocol
import LocationCore

/// The fields of one gpsd `TPV` report that locationd uses, as plain Swift values.
///
/// Filled from libgps's `gps_fix_t` by `GPSDMessage.decode` (GPSDLibGPS.swift, the only file
/// that touches `gps_data_t`), or built directly by tests. Values are exactly what libgps
/// holds: unknown numbers are NaN, an unknown time is `nil` (libgps: `tv_sec == 0 &&
/// tv_nsec == 0`).
public struct GPSDTPV: Hashable, Sendable {
    /// gpsd `mode`: 0 not seen, 1 no fix, 2 = 2D, 3 = 3D.
    public var mode: Int32
    /// gpsd `time` (UTC, nanoseconds kept), `nil` when the TPV carries no time.
    public var time: Timestamp?
    public var latitude: Double
    public var longitude: Double
    /// gpsd `altHAE` (metres above the WGS 84 ellipsoid).
    public var altHAE: Double
    /// gpsd `altMSL` (metres above mean sea level).
    public var altMSL: Double
    /// gpsd `eph` (metres; gpsd computes it at 95 % confidence — see docs/gpsd.md).
    public var eph: Double
    /// gpsd `epv` (metres; 95 %, as `eph`).
    public var epv: Double
    /// gpsd `speed` (m/s over ground).
    public var speed: Double
    /// gpsd `track` (degrees from true north).
    public var track: Double
    /// gpsd `status` (gps.h `STATUS_*`): 1 a plain fix (gpsd omits it then), 2–4 and 9 better
    /// ones, 6 GNSS with dead reckoning; 5 dead reckoning alone, 7 a surveyed-in or manual
    /// position, 8 a simulator.
    public var status: Int32

    public init(
        mode: Int32, time: Timestamp?, latitude: Double = .nan, longitude: Double = .nan,
        altHAE: Double = .nan, altMSL: Double = .nan, eph: Double = .nan, epv: Double = .nan,
        speed: Double = .nan, track: Double = .nan, status: Int32 = 1
    ) {
        self.mode = mode; self.time = time; self.latitude = latitude; self.longitude = longitude
        self.altHAE = altHAE; self.altMSL = altMSL; self.eph = eph; self.epv = epv
        self.speed = speed; self.track = track; self.status = status
    }

    /// What the engine gets for this TPV:
    /// - mode ≥ 2 with a finite, in-range latitude/longitude and a time → `.fix` (a 2D fix
    ///   without altitudes or vertical accuracy: gpsd prints stale ones on some);
    /// - mode ≤ 1, or a status that is no measurement (5 dead reckoning, 7 surveyed-in or
    ///   manual, 8 simulator: NMEA's GGA quality 6–8, which the NMEA path refuses too) →
    ///   `.noFix(time)` (time may be `nil`);
    /// - anything else (a position TPV without time — gpsd sends some in the first epoch —
    ///   or mode ≥ 2 without a usable position) → `nil`: nothing is reported.
    public var engineInput: EngineInput? {
        if mode <= 1 || status == 5 || status == 7 || status == 8 { return .noFix(time) }
        guard let time else { return nil }
        let coordinate = Coordinate(latitude: latitude, longitude: longitude)
        guard coordinate.isValid else { return nil }
        let threeD = mode >= 3
        return .fix(Fix(
            time: time, coordinate: coordinate, mode: threeD ? .threeD : .twoD,
            altitudeHAE: threeD ? Self.finite(altHAE) : nil, altitudeMSL: threeD ? Self.finite(altMSL) : nil,
            horizontalAccuracy: Self.radius(eph), verticalAccuracy: threeD ? Self.radius(epv) : nil,
            speed: Self.finite(speed), course: Self.finite(track)))
    }

    @inline(__always) static func finite(_ x: Double) -> Double? { x.isFinite ? x : nil }

    /// An error radius: 0 (gpsd's `epv` from a no-fix GSA's VDOP of 0) or below is none, as a
    /// σ or DOP of 0 is for the NMEA decoder; 0 m would pass every accuracy gate.
    @inline(__always) static func radius(_ x: Double) -> Double? { x.isFinite && x > 0 ? x : nil }
}

/// One report read from gpsd, reduced to what the source acts on.
public enum GPSDMessage: Hashable, Sendable {
    /// A `TPV` report.
    case tpv(GPSDTPV)
    /// `{"class":"DEVICE",…,"activated":0}`: gpsd closed a device (for a replayed log, the
    /// `# EOF` line at its end). libgps does not parse this into `DEVICE_SET`, so it is
    /// recognised from the message text. The payload is the device `path` (may be empty).
    case deviceDeactivated(path: String)
    /// `{"class":"ERROR","message":…}`: gpsd refused a request (libgps's `gps_data_t.error`).
    case error(String)
    /// `{"class":"VERSION",…}`: gpsd's banner (and its answer to `?VERSION;`), with the
    /// protocol version it speaks.
    case version(GPSDVersion)
    /// A `SKY` report of the receiver the last `TPV` came from (`fromTPVDevice`), or of
    /// another one gpsd also reads.
    case sky(GPSDSky, fromTPVDevice: Bool)
    /// Anything else (DEVICES, WATCH, GST, …).
    case other

    /// Whether the JSON line is a report of class `cls` (gpsd always writes `class` first).
    static func hasClass(_ cls: String, _ text: Substring) -> Bool {
        text.hasPrefix("{\"class\":\"\(cls)\"")
    }

    /// `hasClass` on a line's bytes, before any String is made of it (the per-report path).
    static func hasClass(_ cls: StaticString, _ line: UnsafeRawBufferPointer) -> Bool {
        let head: StaticString = "{\"class\":\""
        let n = head.utf8CodeUnitCount, m = cls.utf8CodeUnitCount
        guard line.count > n + m, line[n + m] == UInt8(ascii: "\"") else { return false }
        return memcmp(line.baseAddress!, head.utf8Start, n) == 0
            && memcmp(line.baseAddress! + n, cls.utf8Start, m) == 0
    }

    /// Recognises `DEVICE … "activated":0` in a JSON line; returns the device path if so.
    public static func deactivatedDevicePath(in text: Substring) -> String? {
        guard hasClass("DEVICE", text) else { return nil }
        // The marker must be the number 0, not a timestamp string such as "activated":"2026-…".
        guard let r = firstRange(of: "\"activated\":0", in: text) else { return nil }
        let after = text[r.upperBound...].first
        guard after == nil || after == "," || after == "}" else { return nil }
        guard let p = firstRange(of: "\"path\":\"", in: text) else { return "" }
        let rest = text[p.upperBound...]
        return String(rest.prefix { $0 != "\"" })
    }

    /// Where `needle` first occurs in `text`, byte for byte. Not the standard library's
    /// `firstRange(of:)`: that lives in _StringProcessing, which (with _RegexParser) the daemon
    /// then links for this alone, and whose relocated data is resident in every daemon
    /// (docs/benchmarks.md, "Footprint").
    static func firstRange(of needle: StaticString, in text: Substring) -> Range<Substring.Index>? {
        let pattern = UnsafeBufferPointer(start: needle.utf8Start, count: needle.utf8CodeUnitCount)
        let bytes = text.utf8
        var start = bytes.startIndex
        while start != bytes.endIndex {
            if bytes[start...].starts(with: pattern) {
                return start..<bytes.index(start, offsetBy: pattern.count)
            }
            bytes.formIndex(after: &start)
        }
        return nil
    }
}

/// gpsd's `VERSION` report: its release and the JSON protocol version it speaks.
public struct GPSDVersion: Hashable, Sendable {
    public var release: String
    public var protocolMajor: Int
    public var protocolMinor: Int

    public init(release: String, protocolMajor: Int, protocolMinor: Int) {
        self.release = release; self.protocolMajor = protocolMajor; self.protocolMinor = protocolMinor
    }

    /// The protocol libgps (gpsd 3.22) decodes: major version 3 (gpsd bumps it on incompatible
    /// changes), from minor 4 on, where times became ISO 8601 instead of seconds since 1970
    /// (gpsd.h's protocol history; 3.22 speaks 3.14).
    public static let supportedMajor = 3
    public static let firstSupportedMinor = 4

    /// Why locationd cannot read this gpsd's reports, for the log; nil when it can.
    public var incompatibility: String? {
        let spoken = "protocol \(protocolMajor).\(protocolMinor) (release \(release))"
        if protocolMajor != Self.supportedMajor {
            return "speaks \(spoken); locationd's libgps (gpsd 3.22) reads protocol \(Self.supportedMajor).\(Self.firstSupportedMinor) or later 3.x, and another major version is an incompatible change: reports it cannot decode are ignored. Run a gpsd 3.x, or rebuild locationd against this gpsd's libgps"
        }
        if protocolMinor < Self.firstSupportedMinor {
            return "speaks \(spoken); locationd reads protocol \(Self.supportedMajor).\(Self.firstSupportedMinor) or later (gpsd 3.x): before 3.4 gpsd wrote times as seconds since 1970, which libgps cannot decode, so its reports give no fixes. Upgrade gpsd"
        }
        return nil
    }
}
