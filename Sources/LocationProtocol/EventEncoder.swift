import LocationCore

/// Encodes core `Event`s as protocol v1 lines. The one encoder used by the daemon and by
/// `locationctl replay`, so both emit byte-identical lines.
///
/// Hot path: appends to a caller-owned buffer with hand-written fixed-point formatting; once
/// the buffer has grown it does not allocate. Number formats (docs/protocol.md, "Numbers"):
/// latitude/longitude up to 9 decimals, metres and speed/course up to 3 decimals, trailing
/// zeros trimmed.
public struct EventEncoder: Sendable {
    public init() {}

    /// Appends one line (terminated by `\n`) for `event`. `skipped`, when non-zero, adds the
    /// `"skipped":N` field to a location event (events dropped for a slow reader before it).
    @inlinable public func append(_ event: Event, skipped: Int = 0, to out: inout [UInt8]) {
        switch event {
        case .location(let fix): appendLocation(fix, skipped: skipped, to: &out)
        case .status(let state, let time): appendStatus(state, time: time, to: &out)
        case .visit(let visit): appendVisit(visit, to: &out)
        case .significant(let fix): appendSignificant(fix, to: &out)
        case .region(let e): RegionCodec.appendEvent(e, to: &out)
        }
    }

    @inlinable public func appendLocation(_ fix: Fix, skipped: Int = 0, to out: inout [UInt8]) {
        JSONWriter.appendASCII("{\"type\":\"location\",\"time\":\"", to: &out)
        ISO8601.append(fix.time, to: &out)
        out.append(UInt8(ascii: "\""))
        Self.appendCoordinate(fix.coordinate, to: &out)
        Self.appendAccuracy(fix.horizontalAccuracy, to: &out)
        Self.appendMetres(",\"altitude\":", fix.altitudeMSL, to: &out)
        Self.appendMetres(",\"ellipsoidalAltitude\":", fix.altitudeHAE, to: &out)
        Self.appendMetres(",\"verticalAccuracy\":", fix.verticalAccuracy, to: &out)
        Self.appendMetres(",\"speed\":", fix.speed, to: &out)
        Self.appendMetres(",\"course\":", fix.course, to: &out)
        switch fix.mode {
        case .twoD: JSONWriter.appendASCII(",\"mode\":\"2d\"", to: &out)
        case .threeD: JSONWriter.appendASCII(",\"mode\":\"3d\"", to: &out)
        }
        if skipped > 0 {
            JSONWriter.appendASCII(",\"skipped\":", to: &out)
            DecimalFormat.appendInteger(Int64(skipped), to: &out)
        }
        JSONWriter.appendASCII("}\n", to: &out)
    }

    @inlinable public func appendStatus(_ state: SourceState, time: Timestamp?, to out: inout [UInt8]) {
        JSONWriter.appendASCII("{\"type\":\"status\",\"state\":", to: &out)
        EventEncoder.appendState(state, to: &out)
        JSONWriter.appendASCII(",\"time\":", to: &out)
        EventEncoder.appendTime(time, to: &out)
        JSONWriter.appendASCII("}\n", to: &out)
    }

    /// `"fix"` etc., quotes included.
    /// `,"latitude":…,"longitude":…` (9 decimals, ≈ 0.1 mm): every event with a position.
    @inlinable public static func appendCoordinate(_ c: Coordinate, to out: inout [UInt8]) {
        JSONWriter.appendASCII(",\"latitude\":", to: &out)
        DecimalFormat.appendFixed(c.latitude, decimals: 9, to: &out)
        JSONWriter.appendASCII(",\"longitude\":", to: &out)
        DecimalFormat.appendFixed(c.longitude, decimals: 9, to: &out)
    }

    /// `,"horizontalAccuracy":…` — always present, `null` when unknown (docs/protocol.md).
    @inlinable public static func appendAccuracy(_ accuracy: Double?, to out: inout [UInt8]) {
        JSONWriter.appendASCII(",\"horizontalAccuracy\":", to: &out)
        if let accuracy {
            DecimalFormat.appendFixed(accuracy, decimals: 3, to: &out)
        } else {
            JSONWriter.appendASCII("null", to: &out)
        }
    }

    /// `key` and a value with 3 decimals; nothing when the value is unknown.
    @inlinable public static func appendMetres(_ key: StaticString, _ value: Double?, to out: inout [UInt8]) {
        guard let value else { return }
        JSONWriter.appendASCII(key, to: &out)
        DecimalFormat.appendFixed(value, decimals: 3, to: &out)
    }

    @inlinable public static func appendState(_ state: SourceState, to out: inout [UInt8]) {
        switch state {
        case .disconnected: JSONWriter.appendASCII("\"disconnected\"", to: &out)
        case .connected: JSONWriter.appendASCII("\"connected\"", to: &out)
        case .noFix: JSONWriter.appendASCII("\"noFix\"", to: &out)
        case .fix: JSONWriter.appendASCII("\"fix\"", to: &out)
        }
    }

    /// A quoted ISO time or `null`.
    @inlinable public static func appendTime(_ time: Timestamp?, to out: inout [UInt8]) {
        guard let time else { JSONWriter.appendASCII("null", to: &out); return }
        out.append(0x22)
        ISO8601.append(time, to: &out)
        out.append(0x22)
    }
}
