import LocationCore

/// Encodes core `Event`s as protocol v1 lines. The one encoder used by the daemon and by
/// `locationctl replay`, so both emit byte-identical lines.
///
/// Hot path: a line is written into a stack buffer by `ByteWriter` and appended to the
/// caller-owned buffer in one copy; once that buffer has grown nothing allocates. Number
/// formats (docs/protocol.md, "Numbers"): latitude/longitude up to 9 decimals, metres and
/// speed/course up to 3 decimals, trailing zeros trimmed.
///
/// With a gazetteer, `visit` and `significant` lines carry the `locality` of the position they
/// show (docs/places.md): the position as published, so an approximate program's is looked up
/// from its cell's centre, never from the precise fix.
public struct EventEncoder: Sendable {
    public let gazetteer: Gazetteer?

    public init(gazetteer: Gazetteer? = nil) { self.gazetteer = gazetteer }

    /// Appends one line (terminated by `\n`) for `event`. `skipped`, when non-zero, adds the
    /// `"skipped":N` field to a location event (events dropped for a slow reader before it).
    @inlinable public func append(_ event: Event, skipped: Int = 0, to out: inout [UInt8]) {
        switch event {
        case .location(let fix): appendLocation(fix, skipped: skipped, to: &out)
        case .status(let state, let time): appendStatus(state, time: time, to: &out)
        case .visit(let visit): appendVisit(visit, to: &out)
        case .significant(let fix): appendSignificant(fix, to: &out)
        case .region(let e): RegionCodec.appendEvent(e, to: &out)
        case .paused(let time): appendPause(paused: true, time: time, to: &out)
        case .resumed(let time): appendPause(paused: false, time: time, to: &out)
        }
    }

    /// Longest location line: 174 bytes of keys and punctuation, a time (31), seven numbers
    /// (24 each) and `skipped` (20) make 393, and a number may need 8 more while written.
    @usableFromInline static let maxLocationLine = 512

    @inlinable public func appendLocation(_ fix: Fix, skipped: Int = 0, to out: inout [UInt8]) {
        out.appendWritten(capacity: Self.maxLocationLine) { w in
            w.ascii("{\"type\":\"location\",\"time\":\"")
            w.time(fix.time)
            w.byte(UInt8(ascii: "\""))
            Self.writeCoordinate(fix.coordinate, &w)
            Self.writeAccuracy(fix.horizontalAccuracy, &w)
            Self.writeMetres(",\"altitude\":", fix.altitudeMSL, &w)
            Self.writeMetres(",\"ellipsoidalAltitude\":", fix.altitudeHAE, &w)
            Self.writeMetres(",\"verticalAccuracy\":", fix.verticalAccuracy, &w)
            Self.writeMetres(",\"speed\":", fix.speed, &w)
            Self.writeMetres(",\"course\":", fix.course, &w)
            switch fix.mode {
            case .twoD: w.ascii(",\"mode\":\"2d\"")
            case .threeD: w.ascii(",\"mode\":\"3d\"")
            }
            if skipped > 0 {
                w.ascii(",\"skipped\":")
                w.integer(Int64(skipped))
            }
            w.ascii("}\n")
        }
    }

    @inlinable public func appendStatus(_ state: SourceState, time: Timestamp?, to out: inout [UInt8]) {
        JSONWriter.appendASCII("{\"type\":\"status\",\"state\":", to: &out)
        EventEncoder.appendState(state, to: &out)
        JSONWriter.appendASCII(",\"time\":", to: &out)
        EventEncoder.appendTime(time, to: &out)
        JSONWriter.appendASCII("}\n", to: &out)
    }

    /// `,"latitude":…,"longitude":…` (9 decimals, ≈ 0.1 mm): every event with a position.
    @inlinable public static func appendCoordinate(_ c: Coordinate, to out: inout [UInt8]) {
        out.appendWritten(capacity: 25 + 2 * ByteWriter.maxNumber) { writeCoordinate(c, &$0) }
    }

    @inlinable static func writeCoordinate(_ c: Coordinate, _ w: inout ByteWriter) {
        w.ascii(",\"latitude\":")
        w.fixed(c.latitude, decimals: DecimalFormat.degreeDecimals)
        w.ascii(",\"longitude\":")
        w.fixed(c.longitude, decimals: DecimalFormat.degreeDecimals)
    }

    /// `,"horizontalAccuracy":…` — always present, `null` when unknown (docs/protocol.md).
    @inlinable public static func appendAccuracy(_ accuracy: Double?, to out: inout [UInt8]) {
        out.appendWritten(capacity: 22 + ByteWriter.maxNumber) { writeAccuracy(accuracy, &$0) }
    }

    @inlinable static func writeAccuracy(_ accuracy: Double?, _ w: inout ByteWriter) {
        w.ascii(",\"horizontalAccuracy\":")
        if let accuracy {
            w.fixed(accuracy, decimals: DecimalFormat.metreDecimals)
        } else {
            w.ascii("null")
        }
    }

    /// `key` and a value with 3 decimals; nothing when the value is unknown.
    @inlinable public static func appendMetres(_ key: StaticString, _ value: Double?, to out: inout [UInt8]) {
        guard value != nil else { return }
        out.appendWritten(capacity: key.utf8CodeUnitCount + ByteWriter.maxNumber) { writeMetres(key, value, &$0) }
    }

    @inlinable static func writeMetres(_ key: StaticString, _ value: Double?, _ w: inout ByteWriter) {
        guard let value else { return }
        w.ascii(key)
        w.fixed(value, decimals: DecimalFormat.metreDecimals)
    }

    /// `"fix"` etc., quotes included.
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
        out.appendWritten(capacity: 2 + ByteWriter.maxTime) { writeTime(time, &$0) }
    }

    @inlinable static func writeTime(_ time: Timestamp?, _ w: inout ByteWriter) {
        guard let time else { w.ascii("null"); return }
        w.byte(0x22)
        w.time(time)
        w.byte(0x22)
    }
}
