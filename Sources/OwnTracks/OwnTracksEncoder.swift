import LocationCore
import LocationProtocol

/// One MQTT message for the broker. Every message goes out at QoS 1 (docs/mqtt.md).
public struct OutgoingMessage: Hashable, Sendable {
    public var topic: String
    public var payload: [UInt8]
    public var retain: Bool

    public init(topic: String, payload: [UInt8], retain: Bool) {
        self.topic = topic; self.payload = payload; self.retain = retain
    }

    public var text: String { String(decoding: payload, as: UTF8.self) }
}

/// Why a `location` was published: OwnTracks' `t` (booklet, docs/tech/json.md).
public enum LocationTrigger: String, Hashable, Sendable {
    /// A significant change (mode `significant`).
    case ping = "p"
    /// Timer based, while moving (mode `move`).
    case timer = "t"
    /// The reply to a `reportLocation` command.
    case reply = "r"
}

/// An OwnTracks waypoint: one of the bridge's regions in locationd (docs/mqtt.md, "Waypoints").
public struct Waypoint: Hashable, Sendable {
    /// OwnTracks `rid`; the region's id in locationd.
    public var rid: String
    /// OwnTracks `desc`, the name transitions carry.
    public var desc: String
    public var latitude: Double
    public var longitude: Double
    /// OwnTracks `rad`, metres.
    public var radius: Double
    /// OwnTracks `tst` of the waypoint: when it was created, copied into a transition's `wtst`.
    public var created: Int64

    public init(rid: String, desc: String, latitude: Double, longitude: Double, radius: Double, created: Int64) {
        self.rid = rid; self.desc = desc; self.latitude = latitude; self.longitude = longitude
        self.radius = radius; self.created = created
    }
}

/// The mapping from locationd's events to OwnTracks JSON and topics: pure, one place
/// (docs/mqtt.md, "Payloads"). Field order is fixed, so the same event always encodes to the
/// same bytes: a duplicate published after a crash is byte for byte the first copy.
public struct OwnTracksEncoder: Sendable {
    /// `owntracks/USER/DEVICE`.
    public var base: String
    /// OwnTracks `tid`, the tracker id consumers show (two characters by convention).
    public var tid: String

    public init(base: String, tid: String) {
        self.base = base
        self.tid = tid
    }

    /// The topics, below the base.
    public var eventTopic: String { base + "/event" }
    public var waypointsTopic: String { base + "/waypoints" }
    public var visitTopic: String { base + "/visit" }
    public var lostTopic: String { base + "/lost" }
    public var commandTopic: String { base + "/cmd" }

    /// `_type:"location"` on the base topic, retained (a consumer that subscribes later sees the
    /// device's latest position at once). `seq`: locationd's sequence number, the message's
    /// identity (`_seq`).
    public func location(_ fix: Fix, trigger: LocationTrigger, seq: UInt64? = nil) -> OutgoingMessage {
        var out: [UInt8] = []
        out.reserveCapacity(192)
        JSONWriter.appendASCII("{\"_type\":\"location\"", to: &out)
        appendTID(to: &out)
        appendPosition(fix.coordinate, to: &out)
        appendInteger("tst", Self.seconds(fix.time), to: &out)
        appendNonZero("acc", Self.metresUp(fix.horizontalAccuracy), to: &out)
        appendNonZero("alt", Self.rounded(fix.altitudeMSL), to: &out)
        appendNonZero("vac", Self.metresUp(fix.verticalAccuracy), to: &out)
        appendNonZero("vel", Self.rounded(fix.speed.map { $0 * 3.6 }), to: &out)
        appendNonZero("cog", Self.rounded(fix.course).map { $0 == 360 ? 0 : $0 }, to: &out)
        appendString("t", trigger.rawValue, to: &out)
        appendSeq(seq, to: &out)
        out.append(UInt8(ascii: "}"))
        return OutgoingMessage(topic: base, payload: out, retain: true)
    }

    /// `_type:"transition"` on `BASE/event`, for a region `enter` or `exit` (`leave`). Other
    /// region events (`dwell`, initial `inside`/`outside`) have no OwnTracks form: nil. The bridge
    /// registers its waypoints without them, so none come.
    public func transition(_ event: RegionEvent, waypoint: Waypoint?, seq: UInt64? = nil) -> OutgoingMessage? {
        let name: String
        switch event.kind {
        case .enter: name = "enter"
        case .exit: name = "leave"
        default: return nil
        }
        var out: [UInt8] = []
        JSONWriter.appendASCII("{\"_type\":\"transition\"", to: &out)
        appendTID(to: &out)
        appendInteger("wtst", waypoint?.created ?? 0, to: &out)
        appendPosition(event.coordinate, to: &out)
        appendInteger("tst", Self.seconds(event.time), to: &out)
        appendString("event", name, to: &out)
        appendString("desc", waypoint?.desc ?? event.region, to: &out)
        appendString("rid", event.region, to: &out)
        appendString("t", "c", to: &out)
        appendSeq(seq, to: &out)
        out.append(UInt8(ascii: "}"))
        return OutgoingMessage(topic: eventTopic, payload: out, retain: false)
    }

    /// `_type:"visit"` on `BASE/visit`: locationd's visits, which OwnTracks has no type for.
    /// Consumers dispatch on `_type` and skip types they do not know (docs/mqtt.md, "Visits").
    public func visit(_ visit: Visit, seq: UInt64? = nil) -> OutgoingMessage {
        var out: [UInt8] = []
        JSONWriter.appendASCII("{\"_type\":\"visit\"", to: &out)
        appendTID(to: &out)
        appendString("event", visit.kind.rawValue, to: &out)
        appendPosition(visit.coordinate, to: &out)
        appendNonZero("acc", Self.metresUp(visit.horizontalAccuracy), to: &out)
        appendInteger("atst", Self.seconds(visit.arrival), to: &out)
        if let departure = visit.departure { appendInteger("dtst", Self.seconds(departure), to: &out) }
        appendSeq(seq, to: &out)
        out.append(UInt8(ascii: "}"))
        return OutgoingMessage(topic: visitTopic, payload: out, retain: false)
    }

    /// `_type:"lost"` on `BASE/lost`: `lost` events ending at `_seq` were dropped at a queue's
    /// bound (locationd's, or the bridge's own while the broker was away: `_seq` absent).
    public func lost(_ count: UInt64, seq: UInt64?) -> OutgoingMessage {
        var out: [UInt8] = []
        JSONWriter.appendASCII("{\"_type\":\"lost\"", to: &out)
        appendTID(to: &out)
        appendInteger("lost", Int64(clamping: count), to: &out)
        appendSeq(seq, to: &out)
        out.append(UInt8(ascii: "}"))
        return OutgoingMessage(topic: lostTopic, payload: out, retain: false)
    }

    /// `_type:"waypoints"` on `BASE/waypoints`: the bridge's regions (the reply to a `waypoints`
    /// command, and after `setWaypoints`/`clearWaypoints`).
    public func waypoints(_ list: [Waypoint]) -> OutgoingMessage {
        var out: [UInt8] = []
        JSONWriter.appendASCII("{\"_type\":\"waypoints\",\"_creator\":\"locationd-mqtt\",\"waypoints\":[", to: &out)
        for (i, w) in list.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            JSONWriter.appendASCII("{\"_type\":\"waypoint\"", to: &out)
            appendString("desc", w.desc, to: &out)
            appendPosition(Coordinate(latitude: w.latitude, longitude: w.longitude), to: &out)
            appendInteger("rad", Int64(w.radius.rounded()), to: &out)
            appendInteger("tst", w.created, to: &out)
            appendString("rid", w.rid, to: &out)
            out.append(UInt8(ascii: "}"))
        }
        JSONWriter.appendASCII("]}", to: &out)
        return OutgoingMessage(topic: waypointsTopic, payload: out, retain: false)
    }

    /// The last will, `_type:"lwt"` on the base topic (not retained: the retained location
    /// stays the device's last position). `tst`: when the bridge first connected.
    public func lastWill(connectedAt: Int64) -> OutgoingMessage {
        var out: [UInt8] = []
        JSONWriter.appendASCII("{\"_type\":\"lwt\"", to: &out)
        appendInteger("tst", connectedAt, to: &out)
        out.append(UInt8(ascii: "}"))
        return OutgoingMessage(topic: base, payload: out, retain: false)
    }

    // MARK: Fields

    private func appendTID(to out: inout [UInt8]) {
        if !tid.isEmpty { appendString("tid", tid, to: &out) }
    }

    private func appendPosition(_ c: Coordinate, to out: inout [UInt8]) {
        JSONWriter.appendASCII(",\"lat\":", to: &out)
        DecimalFormat.appendFixed(c.latitude, decimals: DecimalFormat.degreeDecimals, to: &out)
        JSONWriter.appendASCII(",\"lon\":", to: &out)
        DecimalFormat.appendFixed(c.longitude, decimals: DecimalFormat.degreeDecimals, to: &out)
    }

    private func appendSeq(_ seq: UInt64?, to out: inout [UInt8]) {
        if let seq { appendInteger("_seq", Int64(clamping: seq), to: &out) }
    }

    /// `,"key":`
    private func appendKey(_ key: StaticString, to out: inout [UInt8]) {
        out.append(UInt8(ascii: ","))
        out.append(UInt8(ascii: "\""))
        JSONWriter.appendASCII(key, to: &out)
        JSONWriter.appendASCII("\":", to: &out)
    }

    private func appendString(_ key: StaticString, _ value: String, to out: inout [UInt8]) {
        appendKey(key, to: &out)
        JSONWriter.appendString(value, to: &out)
    }

    private func appendInteger(_ key: StaticString, _ value: Int64, to out: inout [UInt8]) {
        appendKey(key, to: &out)
        DecimalFormat.appendInteger(value, to: &out)
    }

    /// OwnTracks leaves `acc`, `alt`, `vac`, `vel` and `cog` out when unknown or zero.
    private func appendNonZero(_ key: StaticString, _ value: Int64?, to out: inout [UInt8]) {
        guard let value, value != 0 else { return }
        appendInteger(key, value, to: &out)
    }

    /// Integer seconds of the epoch (OwnTracks `tst`), rounded down.
    static func seconds(_ t: Timestamp) -> Int64 {
        let (q, r) = t.nanoseconds.quotientAndRemainder(dividingBy: 1_000_000_000)
        return r < 0 ? q - 1 : q
    }

    /// Nearest integer; nil for unknown or non-finite values.
    static func rounded(_ value: Double?) -> Int64? {
        guard let value, value.isFinite, abs(value) < 1e15 else { return nil }
        return Int64(value.rounded())
    }

    /// An accuracy in whole metres, rounded up: never claims better than locationd measured.
    static func metresUp(_ value: Double?) -> Int64? {
        guard let value, value.isFinite, value >= 0, value < 1e15 else { return nil }
        return Int64(value.rounded(.up))
    }
}
