import LocationCore

/// The server's greeting (sent on connect, and in reply to a `hello` request with its id).
public struct ServerHello: Hashable, Sendable {
    public var id: RequestID?
    public var protocolVersion: Int
    public var server: String
    public var version: String
    public var maxLineBytes: Int

    public init(id: RequestID? = nil, protocolVersion: Int = LocationProtocol.protocolVersion,
                server: String = "locationd", version: String = "0.1.0",
                maxLineBytes: Int = LocationProtocol.maxLineBytes) {
        self.id = id
        self.protocolVersion = protocolVersion
        self.server = server
        self.version = version
        self.maxLineBytes = maxLineBytes
    }
}

/// The reply to a `status` request.
public struct StatusReply: Hashable, Sendable {
    public var id: RequestID?
    public var state: SourceState
    /// Subscriptions currently open on the daemon (all connections).
    public var subscribers: Int
    /// What the daemon reads positions from (e.g. `gpsd localhost:2947`).
    public var source: String
    /// Time of the most recent fix seen (delivered or not).
    public var lastFix: Timestamp?
    /// Open sessions on the daemon (all connections).
    public var sessions: Int?
    /// `watching` (a gpsd watch is open) or `released` (nobody needs fixes); absent for a replay.
    public var receiver: String?
    /// The asking connection's program (uid + executable); the daemon always sends it, with a
    /// session or without.
    public var identity: String?
    /// The asking connection's grant, e.g. `always precise (rule owner)`, or without a session
    /// `no session; at most … (rule …)`: the daemon always sends it.
    public var grant: String?
    /// Open connections on the daemon (all of them, however many `connections` lists).
    public var connected: Int?
    /// Whether `connections` lists every connection or only the asker's own.
    public var connectionsShown: ConnectionsShown?
    /// The connections the asker may see, by connection number (docs/protocol.md, "Status reply"):
    /// as many as fit one line, from the request's `offset`.
    public var connections: [ConnectionEntry]?
    /// Where the next page of `connections` starts (the next request's `offset`); nil on the last.
    public var next: Int?
    /// Background events waiting for the asking program's acknowledgement (docs/protocol.md,
    /// "Background delivery").
    public var queued: Int?
    /// Programs whose visits or significant changes are monitored while they are away.
    public var backgroundMonitors: Int?
    /// Regions the asking program has registered (docs/regions.md).
    public var regions: Int?
    /// Whether the policy has suspended those regions: kept, not monitored (docs/privacy.md,
    /// "Programs that are away").
    public var regionsSuspended: Bool?

    public init(id: RequestID?, state: SourceState, subscribers: Int, source: String, lastFix: Timestamp?) {
        self.id = id; self.state = state; self.subscribers = subscribers
        self.source = source; self.lastFix = lastFix
    }
}

/// A server → client message.
public indirect enum ServerMessage: Hashable, Sendable {
    case hello(ServerHello)
    /// The subscription is open with these effective options.
    case subscribed(id: RequestID?, options: SubscriptionOptions)
    case unsubscribed(id: RequestID?)
    case statusReply(StatusReply)
    /// A location event. `skipped` counts location events dropped for this (slow) reader
    /// just before this one; 0 normally.
    case location(Fix, skipped: Int)
    /// A source state event.
    case status(SourceState, Timestamp?)
    case error(ProtocolError)
    /// A visit event (arrival or departure).
    case visit(Visit)
    /// A significant-change event.
    case significant(Fix)
    /// The subscription's locations pause: the device is still (docs/semantics.md, "Pause when stationary").
    case paused(Timestamp)
    /// They resume: movement confirmed.
    case resumed(Timestamp)
    /// Reply to `regions.list` / `regions.state`: one page of regions with their states;
    /// `next` is the offset of the following page, nil on the last.
    case regions(id: RequestID?, regions: [RegionRecord], next: Int? = nil)
    /// Reply to `places`: one page of the program's places; `next` as in `regions`.
    case places(id: RequestID?, places: [Place], next: Int? = nil)
    /// Reply to `visits`: one page of the program's recent visits, oldest first; `next` as in `regions`.
    case visits(id: RequestID?, visits: [Visit], next: Int? = nil)
    /// Reply to `regions.add` / `regions.remove`: how many changed, how many are registered.
    case regionsChanged(id: RequestID?, added: Int, removed: Int, registered: Int)
    /// A geofence event.
    case region(RegionEvent)
    /// A session reply or change (docs/protocol.md, "Sessions").
    case session(SessionInfo)
    /// An event that waited in the program's background queue, with its sequence number
    /// (docs/protocol.md, "Background delivery").
    case queued(seq: UInt64, ServerMessage)
    /// Events `seq-lost+1 … seq` were dropped from the full background queue.
    case overflow(lost: UInt64, seq: UInt64)
    /// Reply to `ack`: queued events up to `seq` are forgotten; `queued` remain.
    case acked(id: RequestID?, seq: UInt64, queued: Int)
    /// Reply to `reload`: the new configuration is in force.
    case reloaded(id: RequestID?)

    // MARK: Encoding

    /// Appends the message as one line, `\n` included.
    public func append(to out: inout [UInt8]) {
        switch self {
        case .hello(let h):
            JSONWriter.appendASCII("{\"type\":\"hello\"", to: &out)
            appendID(h.id, to: &out)
            JSONWriter.appendASCII(",\"protocol\":", to: &out)
            DecimalFormat.appendInteger(Int64(h.protocolVersion), to: &out)
            JSONWriter.appendASCII(",\"server\":", to: &out)
            JSONWriter.appendString(h.server, to: &out)
            JSONWriter.appendASCII(",\"version\":", to: &out)
            JSONWriter.appendString(h.version, to: &out)
            JSONWriter.appendASCII(",\"maxLineBytes\":", to: &out)
            DecimalFormat.appendInteger(Int64(h.maxLineBytes), to: &out)
            JSONWriter.appendASCII("}\n", to: &out)
        case .subscribed(let id, let o):
            JSONWriter.appendASCII("{\"type\":\"subscribed\"", to: &out)
            appendID(id, to: &out)
            JSONWriter.appendASCII(",\"distanceFilter\":", to: &out)
            JSONWriter.appendNumber(o.distanceFilter, to: &out)
            JSONWriter.appendASCII(",\"desiredAccuracy\":", to: &out)
            if let a = o.desiredAccuracy { JSONWriter.appendNumber(a, to: &out) } else { JSONWriter.appendASCII("null", to: &out) }
            JSONWriter.appendASCII(",\"minimumInterval\":", to: &out)
            JSONWriter.appendNumber(o.minimumInterval, to: &out)
            EventEncoder.appendEvents(o.events, to: &out)
            if o.durable { JSONWriter.appendASCII(",\"durable\":true", to: &out) }
            EventEncoder.appendStreamOptions(o, to: &out)
            JSONWriter.appendASCII(o.accuracy == .approximate ? ",\"accuracy\":\"approximate\"}\n" : ",\"accuracy\":\"precise\"}\n", to: &out)
        case .session(let info):
            info.append(to: &out)
        case .unsubscribed(let id):
            JSONWriter.appendASCII("{\"type\":\"unsubscribed\"", to: &out)
            appendID(id, to: &out)
            JSONWriter.appendASCII("}\n", to: &out)
        case .statusReply(let s):
            JSONWriter.appendASCII("{\"type\":\"status\"", to: &out)
            appendID(s.id, to: &out)
            JSONWriter.appendASCII(",\"state\":", to: &out)
            EventEncoder.appendState(s.state, to: &out)
            JSONWriter.appendASCII(",\"subscribers\":", to: &out)
            DecimalFormat.appendInteger(Int64(s.subscribers), to: &out)
            JSONWriter.appendASCII(",\"source\":", to: &out)
            JSONWriter.appendString(s.source, to: &out)
            JSONWriter.appendASCII(",\"lastFix\":", to: &out)
            EventEncoder.appendTime(s.lastFix, to: &out)
            for (name, value) in [("sessions", s.sessions), ("queued", s.queued), ("backgroundMonitors", s.backgroundMonitors),
                                  ("regions", s.regions)] {
                guard let value else { continue }
                out.append(UInt8(ascii: ","))
                JSONWriter.appendString(name, to: &out)
                out.append(UInt8(ascii: ":"))
                DecimalFormat.appendInteger(Int64(value), to: &out)
            }
            if let suspended = s.regionsSuspended {
                JSONWriter.appendASCII(suspended ? ",\"regionsSuspended\":true" : ",\"regionsSuspended\":false", to: &out)
            }
            for (name, value) in [("receiver", s.receiver), ("identity", s.identity), ("grant", s.grant)] {
                guard let value else { continue }
                out.append(UInt8(ascii: ","))
                JSONWriter.appendString(name, to: &out)
                out.append(UInt8(ascii: ":"))
                JSONWriter.appendString(value, to: &out)
            }
            StatusConnectionsCodec.append(s, to: &out)
            JSONWriter.appendASCII("}\n", to: &out)
        case .location(let fix, let skipped):
            EventEncoder().appendLocation(fix, skipped: skipped, to: &out)
        case .status(let state, let time):
            EventEncoder().appendStatus(state, time: time, to: &out)
        case .regions(let id, let regions, let next):
            appendPage("{\"type\":\"regions\"", id: id, "regions", regions, next: next, to: &out, entry: RegionCodec.appendRegion)
        case .places(let id, let places, let next):
            appendPage("{\"type\":\"places\"", id: id, "places", places, next: next, to: &out, entry: PlaceCodec.appendPlace)
        case .visits(let id, let visits, let next):
            appendPage("{\"type\":\"visits\"", id: id, "visits", visits, next: next, to: &out, entry: RecentVisitCodec.appendVisit)
        case .regionsChanged(let id, let added, let removed, let registered):
            JSONWriter.appendASCII("{\"type\":\"regions.changed\"", to: &out)
            appendID(id, to: &out)
            JSONWriter.appendASCII(",\"added\":", to: &out)
            DecimalFormat.appendInteger(Int64(added), to: &out)
            JSONWriter.appendASCII(",\"removed\":", to: &out)
            DecimalFormat.appendInteger(Int64(removed), to: &out)
            JSONWriter.appendASCII(",\"registered\":", to: &out)
            DecimalFormat.appendInteger(Int64(registered), to: &out)
            JSONWriter.appendASCII("}\n", to: &out)
        case .region(let e):
            RegionCodec.appendEvent(e, to: &out)
        case .error(let e):
            JSONWriter.appendASCII("{\"type\":\"error\"", to: &out)
            JSONWriter.appendASCII(",\"id\":", to: &out)
            if let id = e.id { id.append(to: &out) } else { JSONWriter.appendASCII("null", to: &out) }
            JSONWriter.appendASCII(",\"code\":", to: &out)
            JSONWriter.appendString(e.code.rawValue, to: &out)
            JSONWriter.appendASCII(",\"message\":", to: &out)
            JSONWriter.appendString(e.message, to: &out)
            JSONWriter.appendASCII("}\n", to: &out)
        case .visit(let v):
            EventEncoder().appendVisit(v, to: &out)
        case .significant(let fix):
            EventEncoder().appendSignificant(fix, to: &out)
        case .paused(let time):
            EventEncoder().appendPause(paused: true, time: time, to: &out)
        case .resumed(let time):
            EventEncoder().appendPause(paused: false, time: time, to: &out)
        case .queued(let seq, let message):
            message.append(to: &out)
            out.removeLast(2)
            EventEncoder.appendSeq(seq, to: &out)
        case .overflow(let lost, let seq):
            EventEncoder.appendOverflow(lost: lost, seq: seq, to: &out)
        case .acked(let id, let seq, let queued):
            Self.appendAcked(id: id, seq: seq, queued: queued, to: &out)
        case .reloaded(let id):
            JSONWriter.appendASCII("{\"type\":\"reloaded\"", to: &out)
            appendID(id, to: &out)
            JSONWriter.appendASCII("}\n", to: &out)
        }
    }

    public var line: String {
        var out: [UInt8] = []
        append(to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// A paged reply: `head`, the id, `"key":[entries]` and `"next"` when more follow.
    private func appendPage<Entry>(_ head: StaticString, id: RequestID?, _ key: StaticString, _ entries: [Entry], next: Int?,
                                   to out: inout [UInt8], entry: (Entry, inout [UInt8]) -> Void) {
        JSONWriter.appendASCII(head, to: &out)
        appendID(id, to: &out)
        JSONWriter.appendASCII(",\"", to: &out)
        JSONWriter.appendASCII(key, to: &out)
        JSONWriter.appendASCII("\":[", to: &out)
        for (i, e) in entries.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            entry(e, &out)
        }
        JSONWriter.appendASCII("]", to: &out)
        if let next {
            JSONWriter.appendASCII(",\"next\":", to: &out)
            DecimalFormat.appendInteger(Int64(next), to: &out)
        }
        JSONWriter.appendASCII("}\n", to: &out)
    }

    private func appendID(_ id: RequestID?, to out: inout [UInt8]) {
        guard let id else { return }
        JSONWriter.appendASCII(",\"id\":", to: &out)
        id.append(to: &out)
    }

    // MARK: Decoding (for clients)

    /// Why a server line could not be understood.
    public struct DecodingError: Error, Hashable, Sendable, CustomStringConvertible {
        public var message: String
        /// The line is a message of a type this version does not know (a newer daemon's): a
        /// client skips it rather than giving up the connection.
        public var isUnknownType = false
        /// The message's `type`, when the line is an object that has one: a known type whose
        /// content this version cannot read (a newer daemon's value in a field it knows).
        public var type: String?
        /// The `id` of the request it answers, when it has one.
        public var replyID: RequestID?
        public init(_ message: String, unknownType: Bool = false) { self.message = message; self.isUnknownType = unknownType }
        public var description: String { message }
    }

    static let parser = JSONParser(maxDepth: maxNestingDepth, maxBytes: maxLineBytes)

    public static func decode(_ line: String) throws(DecodingError) -> ServerMessage {
        try decode(Array(line.utf8)[...])
    }

    public static func decode(_ line: ArraySlice<UInt8>) throws(DecodingError) -> ServerMessage {
        let value: JSONValue
        do { value = try parser.parse(line) } catch { throw DecodingError("invalid JSON: \(error)") }
        return try decode(value)
    }

    public static func decode(_ value: JSONValue) throws(DecodingError) -> ServerMessage {
        guard case .object(let o) = value else { throw DecodingError("message is not an object") }
        do {
            let message = try decodeUnsequenced(o)
            switch message {
            case .location, .visit, .significant, .region:
                if let seq = try sequenceNumber(o) { return .queued(seq: seq, message) }
            default: break
            }
            return message
        } catch {
            var e = error
            if case .string(let type)? = o["type"] { e.type = type }
            e.replyID = replyID(o)
            throw e
        }
    }

    /// The `id` a message echoes (a number or a string), if any.
    static func replyID(_ o: [String: JSONValue]) -> RequestID? {
        switch o["id"] {
        case .number(let n)?: .number(n)
        case .string(let s)?: .string(s)
        default: nil
        }
    }

    static func decodeUnsequenced(_ o: [String: JSONValue]) throws(DecodingError) -> ServerMessage {
        guard case .string(let type)? = o["type"] else { throw DecodingError("message has no type") }
        let id = replyID(o)
        switch type {
        case "hello":
            return .hello(ServerHello(
                id: id, protocolVersion: try int(o, "protocol"), server: try string(o, "server"),
                version: try string(o, "version"), maxLineBytes: try int(o, "maxLineBytes")))
        case "subscribed":
            var options = SubscriptionOptions(
                distanceFilter: try optionalNumber(o, "distanceFilter") ?? 0,
                desiredAccuracy: try optionalNumber(o, "desiredAccuracy"),
                minimumInterval: try optionalNumber(o, "minimumInterval") ?? 0,
                events: try decodeEvents(o))
            // Absent from an older daemon's reply: precise, what its options meant.
            switch o["accuracy"] {
            case nil: break
            case .string(let a)?:
                guard let accuracy = Accuracy(rawValue: a) else { throw DecodingError("subscribed has accuracy \(JSONWriter.quoted(a)); expected precise or approximate") }
                options.accuracy = accuracy
            case let other?: throw DecodingError("subscribed.accuracy must be a string, not \(other.kindName)")
            }
            switch o["durable"] {
            case nil, .null?: break
            case .bool(let b)?: options.durable = b
            case let other?: throw DecodingError("subscribed.durable must be a boolean, not \(other.kindName)")
            }
            try decodeStreamOptions(o, into: &options)
            return .subscribed(id: id, options: options)
        case "unsubscribed":
            return .unsubscribed(id: id)
        case "session":
            return .session(try SessionInfo.decode(o, id: id))
        case "status":
            let state = try sourceState(o)
            let time = try optionalTime(o, "time")
            // A status reply has `subscribers`; a status event does not.
            if o["subscribers"] != nil {
                var reply = StatusReply(
                    id: id, state: state, subscribers: try int(o, "subscribers"),
                    source: try string(o, "source"), lastFix: try optionalTime(o, "lastFix"))
                if o["sessions"] != nil { reply.sessions = try int(o, "sessions") }
                if o["queued"] != nil { reply.queued = try int(o, "queued") }
                if o["backgroundMonitors"] != nil { reply.backgroundMonitors = try int(o, "backgroundMonitors") }
                if o["regions"] != nil { reply.regions = try int(o, "regions") }
                switch o["regionsSuspended"] {
                case nil: break
                case .bool(let b)?: reply.regionsSuspended = b
                case let other?: throw DecodingError("status regionsSuspended must be a boolean, not \(other.kindName)")
                }
                if case .string(let r)? = o["receiver"] { reply.receiver = r }
                if case .string(let r)? = o["identity"] { reply.identity = r }
                if case .string(let r)? = o["grant"] { reply.grant = r }
                try StatusConnectionsCodec.decode(o, into: &reply)
                return .statusReply(reply)
            }
            return .status(state, time)
        case "location":
            guard let time = try optionalTime(o, "time") else { throw DecodingError("location has no time") }
            let lat = try number(o, "latitude"), lon = try number(o, "longitude")
            let mode: FixMode
            switch o["mode"] {
            case .string("2d")?: mode = .twoD
            case .string("3d")?: mode = .threeD
            default: throw DecodingError("location has no valid mode")
            }
            let fix = Fix(
                time: time, coordinate: Coordinate(latitude: lat, longitude: lon), mode: mode,
                altitudeHAE: try optionalNumber(o, "ellipsoidalAltitude"),
                altitudeMSL: try optionalNumber(o, "altitude"),
                horizontalAccuracy: try optionalNumber(o, "horizontalAccuracy"),
                verticalAccuracy: try optionalNumber(o, "verticalAccuracy"),
                speed: try optionalNumber(o, "speed"), course: try optionalNumber(o, "course"))
            let skipped = try optionalNumber(o, "skipped") ?? 0
            guard let count = Int(exactly: skipped), count >= 0 else {
                throw DecodingError("location skipped \(JSONWriter.numberText(skipped)) is not a count")
            }
            return .location(fix, skipped: count)
        case "visit":
            return .visit(try decodeVisit(o))
        case "significant":
            return .significant(try decodeSignificant(o))
        case "paused":
            return .paused(try decodePauseTime(o, type))
        case "resumed":
            return .resumed(try decodePauseTime(o, type))
        case "regions":
            return .regions(id: id, regions: try RegionCodec.decodeRecords(o["regions"]),
                            next: o["next"] == nil || o["next"] == .null ? nil : try int(o, "next"))
        case "places":
            return .places(id: id, places: try PlaceCodec.decodePlaces(o["places"]),
                           next: o["next"] == nil || o["next"] == .null ? nil : try int(o, "next"))
        case "visits":
            return .visits(id: id, visits: try RecentVisitCodec.decodeVisits(o["visits"]),
                           next: o["next"] == nil || o["next"] == .null ? nil : try int(o, "next"))
        case "regions.changed":
            return .regionsChanged(id: id, added: try int(o, "added"), removed: try int(o, "removed"),
                                   registered: try int(o, "registered"))
        case "region":
            return .region(try RegionCodec.decodeEvent(o))
        case "overflow":
            guard let seq = try sequenceNumber(o) else { throw DecodingError("overflow has no seq") }
            let lost = try int(o, "lost")
            guard lost >= 1 else { throw DecodingError("overflow lost \(lost) is not positive") }
            return .overflow(lost: UInt64(lost), seq: seq)
        case "acked":
            guard let seq = try sequenceNumber(o) else { throw DecodingError("acked has no seq") }
            return .acked(id: id, seq: seq, queued: try int(o, "queued"))
        case "reloaded":
            return .reloaded(id: id)
        case "error":
            let codeText = try string(o, "code")
            let message = try string(o, "message")
            // A newer daemon's code still fails only the request it answers.
            guard let code = ErrorCode(rawValue: codeText) else { return .error(ProtocolError(.unrecognized, "\(codeText): \(message)", id: id)) }
            return .error(ProtocolError(code, message, id: id))
        default:
            throw DecodingError("unknown message type \(type)", unknownType: true)
        }
    }

    static func number(_ o: [String: JSONValue], _ key: String) throws(DecodingError) -> Double {
        guard let n = try optionalNumber(o, key) else { throw DecodingError("missing \(key)") }
        return n
    }

    static func optionalNumber(_ o: [String: JSONValue], _ key: String) throws(DecodingError) -> Double? {
        switch o[key] {
        case nil, .null?: return nil
        case .number(let n)?: return n
        default: throw DecodingError("\(key) is not a number")
        }
    }

    static func int(_ o: [String: JSONValue], _ key: String) throws(DecodingError) -> Int {
        let n = try number(o, key)
        guard let i = Int(exactly: n) else { throw DecodingError("\(key) is not an integer") }
        return i
    }

    static func string(_ o: [String: JSONValue], _ key: String) throws(DecodingError) -> String {
        guard case .string(let s)? = o[key] else { throw DecodingError("\(key) is not a string") }
        return s
    }

    static func optionalTime(_ o: [String: JSONValue], _ key: String) throws(DecodingError) -> Timestamp? {
        switch o[key] {
        case nil, .null?: return nil
        case .string(let s)?:
            guard let t = ISO8601.parse(s) else { throw DecodingError("\(key) \(s) is not an ISO 8601 time") }
            return t
        default: throw DecodingError("\(key) is not a time")
        }
    }

    static func sourceState(_ o: [String: JSONValue]) throws(DecodingError) -> SourceState {
        guard case .string(let s)? = o["state"], let state = SourceState(rawValue: s) else {
            throw DecodingError("status has no valid state")
        }
        return state
    }
}
