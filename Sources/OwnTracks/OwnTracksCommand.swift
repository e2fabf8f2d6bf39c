import LocationCore
import LocationProtocol

/// A command from the fleet server on `BASE/cmd` (OwnTracks `_type:"cmd"`; docs/mqtt.md,
/// "Commands"). Decoding is pure: the bridge acts on the result.
public enum OwnTracksCommand: Hashable, Sendable {
    /// Publish the current position now, with `t:"r"`.
    case reportLocation
    /// Merge these into the bridge's regions: each replaces the one with its `rid`, or is new.
    /// `remove`: the waypoints given with an invalid `lat`/`lon` (OwnTracks' way to delete one).
    case setWaypoints(set: [Waypoint], remove: [String])
    /// Remove every region of the bridge.
    case clearWaypoints
    /// Publish the bridge's regions as `_type:"waypoints"`.
    case waypoints

    /// Why a message on `BASE/cmd` was not a command the bridge runs; logged, never fatal.
    public struct Rejection: Error, Hashable, Sendable, CustomStringConvertible {
        public var message: String
        public init(_ message: String) { self.message = message }
        public var description: String { message }
    }

    /// The largest command accepted (a `setWaypoints` of a few thousand waypoints).
    public static let maxBytes = 1 << 20

    /// Decodes one message payload. `now`: epoch seconds, the `tst` of a waypoint given without.
    public static func decode(_ payload: [UInt8], now: Int64) throws(Rejection) -> OwnTracksCommand {
        guard payload.count <= maxBytes else {
            throw Rejection("command of \(payload.count) bytes; at most \(maxBytes)")
        }
        let value: JSONValue
        do {
            value = try JSONParser(maxDepth: 16, maxBytes: maxBytes).parse(payload)
        } catch {
            throw Rejection("not JSON: \(error)")
        }
        guard case .object = value else { throw Rejection("not a JSON object but \(value.kindName)") }
        guard case .string(let type)? = value["_type"], type == "cmd" else {
            throw Rejection("_type is \(describe(value["_type"])); expected \"cmd\"")
        }
        guard case .string(let action)? = value["action"] else {
            throw Rejection("action is \(describe(value["action"])); expected a string")
        }
        switch action {
        case "reportLocation": return .reportLocation
        case "clearWaypoints": return .clearWaypoints
        case "waypoints": return .waypoints
        case "setWaypoints": return try setWaypoints(value["waypoints"], now: now)
        default:
            throw Rejection("unsupported action \(JSONWriter.quoted(action)); supported: reportLocation, setWaypoints, clearWaypoints, waypoints")
        }
    }

    /// `waypoints` is a `_type:"waypoints"` object holding the array (the booklet's form), or
    /// the array itself.
    static func setWaypoints(_ value: JSONValue?, now: Int64) throws(Rejection) -> OwnTracksCommand {
        var list = value
        if case .object = value { list = value?["waypoints"] }
        guard case .array(let items)? = list else {
            throw Rejection("setWaypoints: waypoints is \(describe(list)); expected an array of waypoint objects, or {\"_type\":\"waypoints\",\"waypoints\":[…]}")
        }
        var set: [Waypoint] = []
        var remove: [String] = []
        var seen: Set<String> = []
        for (i, item) in items.enumerated() {
            guard case .object = item else { throw Rejection("waypoints[\(i)] is \(item.kindName); expected an object") }
            guard case .string(let desc)? = item["desc"], !desc.isEmpty else {
                throw Rejection("waypoints[\(i)]: desc is \(describe(item["desc"])); expected a non-empty string")
            }
            var rid = desc
            switch item["rid"] {
            case nil, .null?: break
            case .string(let r)?: rid = r
            case let other?: throw Rejection("waypoints[\(i)]: rid is \(other.kindName); expected a string")
            }
            guard seen.insert(rid).inserted else { throw Rejection("waypoints[\(i)]: rid \(JSONWriter.quoted(rid)) is given twice") }
            // OwnTracks deletes a waypoint sent with an invalid position.
            guard case .number(let lat)? = item["lat"], case .number(let lon)? = item["lon"],
                  abs(lat) <= 90, abs(lon) <= 180 else {
                remove.append(rid)
                continue
            }
            guard case .number(let rad)? = item["rad"] else {
                throw Rejection("waypoints[\(i)] (\(JSONWriter.quoted(rid))): rad is \(describe(item["rad"])); expected a number of metres")
            }
            var created = now
            switch item["tst"] {
            case nil, .null?: break
            case .number(let t)? where t == t.rounded() && abs(t) < 1e15: created = Int64(t)
            case let other?: throw Rejection("waypoints[\(i)] (\(JSONWriter.quoted(rid))): tst is \(describe(other)); expected integer epoch seconds")
            }
            let w = Waypoint(rid: rid, desc: desc, latitude: lat, longitude: lon, radius: rad, created: created)
            if let problem = w.region.invalidReason { throw Rejection("waypoints[\(i)]: \(problem)") }
            set.append(w)
        }
        return .setWaypoints(set: set, remove: remove)
    }

    static func describe(_ value: JSONValue?) -> String {
        switch value {
        case nil: "absent"
        case .string(let s)?: JSONWriter.quoted(s.count > 64 ? String(s.prefix(64)) + "…" : s)
        case .number(let n)?: JSONWriter.numberText(n)
        case let v?: v.kindName
        }
    }
}

extension Waypoint {
    /// The region registered for it in locationd: enter and exit only (OwnTracks has no dwell
    /// or initial-state transition); `desc` and `tst` travel in its metadata.
    public var region: Region {
        var meta: [UInt8] = []
        JSONWriter.appendASCII("{\"desc\":", to: &meta)
        JSONWriter.appendString(desc, to: &meta)
        JSONWriter.appendASCII(",\"tst\":", to: &meta)
        DecimalFormat.appendInteger(created, to: &meta)
        meta.append(UInt8(ascii: "}"))
        return Region(id: rid, center: Coordinate(latitude: latitude, longitude: longitude), radius: radius,
                      metadata: String(decoding: meta, as: UTF8.self))
    }

    /// The waypoint a region of the bridge stands for; `desc` defaults to the id and `tst` to 0
    /// for a region registered by other means (`locationctl regions`).
    public init(region: Region) {
        var desc = region.id
        var created: Int64 = 0
        if let text = region.metadata, let meta = try? JSONParser().parse(text) {
            if case .string(let d)? = meta["desc"], !d.isEmpty { desc = d }
            if case .number(let t)? = meta["tst"], t == t.rounded(), abs(t) < 1e15 { created = Int64(t) }
        }
        self.init(rid: region.id, desc: desc, latitude: region.center.latitude, longitude: region.center.longitude,
                  radius: region.radius, created: created)
    }
}
