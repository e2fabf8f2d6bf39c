import LocationCore

// The location stream's own options — `raw`, `pausesWhenStationary`, `activityType` — and the
// `paused`/`resumed` events (docs/protocol.md, "subscribe" options and "Pause events").
extension Request {
    /// Reads the stream options of a `subscribe` into `options` (absent or `null`: default).
    static func decodeStreamOptions(_ object: [String: JSONValue], into options: inout SubscriptionOptions,
                                    id: RequestID?) throws(ProtocolError) {
        options.raw = try bool(object, "raw", id: id) ?? false
        options.pausesWhenStationary = try bool(object, "pausesWhenStationary", id: id) ?? false
        switch object["activityType"] {
        case nil, .null?: break
        case .string(let name)?:
            guard let activity = ActivityType(rawValue: name) else {
                throw ProtocolError(.outOfRange, "activityType \(JSONWriter.quoted(name)) is not one; expected automotive, fitness or other", id: id)
            }
            options.activityType = activity
        case let other?:
            throw ProtocolError(.badField, "activityType must be a string, not \(other.kindName)", id: id)
        }
    }

    static func bool(_ object: [String: JSONValue], _ name: String, id: RequestID?) throws(ProtocolError) -> Bool? {
        switch object[name] {
        case nil, .null?: return nil
        case .bool(let b)?: return b
        case let other?: throw ProtocolError(.badField, "\(name) must be true or false, not \(other.kindName)", id: id)
        }
    }
}

extension EventEncoder {
    /// `,"raw":true` and `,"pausesWhenStationary":true,"activityType":"…"`, each only when asked
    /// for (leading comma included): a `subscribe` and its `subscribed` echo.
    public static func appendStreamOptions(_ options: SubscriptionOptions, to out: inout [UInt8]) {
        if options.raw { JSONWriter.appendASCII(",\"raw\":true", to: &out) }
        guard options.pausesWhenStationary else { return }
        JSONWriter.appendASCII(",\"pausesWhenStationary\":true,\"activityType\":", to: &out)
        JSONWriter.appendString(options.activityType.rawValue, to: &out)
    }

    /// `{"type":"paused","time":…}` or `{"type":"resumed","time":…}`.
    @inlinable public func appendPause(paused: Bool, time: Timestamp, to out: inout [UInt8]) {
        JSONWriter.appendASCII(paused ? "{\"type\":\"paused\",\"time\":" : "{\"type\":\"resumed\",\"time\":", to: &out)
        EventEncoder.appendTime(time, to: &out)
        JSONWriter.appendASCII("}\n", to: &out)
    }
}

extension ServerMessage {
    /// The stream options a `subscribed` echoes (absent: not asked for, or an older daemon).
    static func decodeStreamOptions(_ o: [String: JSONValue], into options: inout SubscriptionOptions) throws(DecodingError) {
        if case .bool(let b)? = o["raw"] { options.raw = b }
        if case .bool(let b)? = o["pausesWhenStationary"] { options.pausesWhenStationary = b }
        switch o["activityType"] {
        case nil, .null?: break
        case .string(let name)?:
            guard let activity = ActivityType(rawValue: name) else { throw DecodingError("subscribed has activityType \(JSONWriter.quoted(name))") }
            options.activityType = activity
        default: throw DecodingError("subscribed.activityType must be a string")
        }
    }

    /// A `paused` or `resumed` event's time.
    static func decodePauseTime(_ o: [String: JSONValue], _ type: String) throws(DecodingError) -> Timestamp {
        guard let time = try optionalTime(o, "time") else { throw DecodingError("\(type) has no time") }
        return time
    }
}
