import LocationCore

extension StatusReply {
    /// One connection as a status reply lists it (docs/protocol.md, "Status reply").
    public struct ConnectionEntry: Hashable, Sendable {
        /// The daemon's number for the connection (the `connection` field of its journal lines).
        public var connection: UInt64
        /// Whether this is the connection that asked.
        public var isSelf: Bool
        /// The peer at connect time (`SO_PEERCRED`); nil when the daemon could not read it.
        public var pid: Int32?
        public var uid: UInt32?
        public var gid: UInt32?
        /// `/proc/PID/exe` at connect time; nil when unreadable.
        public var executable: String?
        /// The policy rule that applies to the peer.
        public var rule: String
        /// The open session's grant; nil: no session.
        public var session: SessionGrant?
        public var subscribed: Bool

        public init(connection: UInt64, isSelf: Bool = false, pid: Int32?, uid: UInt32?, gid: UInt32?,
                    executable: String?, rule: String, session: SessionGrant?, subscribed: Bool) {
            self.connection = connection; self.isSelf = isSelf; self.pid = pid; self.uid = uid; self.gid = gid
            self.executable = executable; self.rule = rule; self.session = session; self.subscribed = subscribed
        }
    }

    /// What a connection's session was granted.
    public struct SessionGrant: Hashable, Sendable {
        public var authorization: Authorization
        public var accuracy: Accuracy
        /// Precise for this session only, by the purpose key.
        public var temporaryPrecise: Bool
        public var purpose: String?

        public init(authorization: Authorization, accuracy: Accuracy, temporaryPrecise: Bool = false, purpose: String? = nil) {
            self.authorization = authorization; self.accuracy = accuracy
            self.temporaryPrecise = temporaryPrecise; self.purpose = purpose
        }
    }

    /// Whether `connections` lists every connection or only the asker's own (docs/privacy.md,
    /// "Status": other programs' pids and executables are only for root and the daemon's user).
    public enum ConnectionsShown: String, Hashable, Sendable {
        case all
        case own
    }
}

/// Wire form of the status reply's connection list.
public enum StatusConnectionsCodec {
    /// `,"connected":N,"connectionsShown":"all","connections":[…],"next":N` — each part only
    /// when set.
    static func append(_ s: StatusReply, to out: inout [UInt8]) {
        if let n = s.connected {
            JSONWriter.appendASCII(",\"connected\":", to: &out)
            DecimalFormat.appendInteger(Int64(n), to: &out)
        }
        if let shown = s.connectionsShown {
            JSONWriter.appendASCII(",\"connectionsShown\":", to: &out)
            JSONWriter.appendString(shown.rawValue, to: &out)
        }
        guard let entries = s.connections else { return }
        JSONWriter.appendASCII(",\"connections\":[", to: &out)
        for (i, e) in entries.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            appendEntry(e, to: &out)
        }
        out.append(UInt8(ascii: "]"))
        if let next = s.next {
            JSONWriter.appendASCII(",\"next\":", to: &out)
            DecimalFormat.appendInteger(Int64(next), to: &out)
        }
    }

    /// The entries of `all` (in connection order) from connection number `offset` on that fit,
    /// with the rest of `reply`, one line of at most `maxLineBytes`, and the connection number
    /// the rest starts at (nil: this is the last page). A page holds at least one entry, so
    /// paging always advances; numbering by connection, not position, keeps pages from
    /// repeating or skipping an entry while connections come and go. *Reason:* 1,000
    /// connections are ≈ 200 KB; lines are limited to 64 KiB both ways (docs/protocol.md).
    public static func page(_ all: [StatusReply.ConnectionEntry], from offset: Int, of reply: StatusReply)
        -> (entries: ArraySlice<StatusReply.ConnectionEntry>, next: Int?) {
        let start = all.firstIndex { $0.connection >= UInt64(max(offset, 0)) } ?? all.count
        var envelope = reply
        envelope.connections = []
        envelope.next = Int(Int32.max)
        let end = Paging.end(from: start, count: all.count, envelope: .statusReply(envelope)) { appendEntry(all[$0], to: &$1) }
        return (all[start..<end], end < all.count ? Int(all[end].connection) : nil)
    }

    /// Every field is always written (`null` when unknown), so scripts see one shape.
    static func appendEntry(_ e: StatusReply.ConnectionEntry, to out: inout [UInt8]) {
        func integer(_ key: StaticString, _ value: Int64?) {
            JSONWriter.appendASCII(key, to: &out)
            if let value { DecimalFormat.appendInteger(value, to: &out) } else { JSONWriter.appendASCII("null", to: &out) }
        }
        func string(_ key: StaticString, _ value: String?) {
            JSONWriter.appendASCII(key, to: &out)
            if let value { JSONWriter.appendString(value, to: &out) } else { JSONWriter.appendASCII("null", to: &out) }
        }
        integer("{\"connection\":", Int64(truncatingIfNeeded: e.connection))
        JSONWriter.appendASCII(e.isSelf ? ",\"self\":true" : ",\"self\":false", to: &out)
        integer(",\"pid\":", e.pid.map(Int64.init))
        integer(",\"uid\":", e.uid.map(Int64.init))
        integer(",\"gid\":", e.gid.map(Int64.init))
        string(",\"executable\":", e.executable)
        string(",\"rule\":", e.rule)
        if let g = e.session {
            string(",\"session\":{\"authorization\":", g.authorization.rawValue)
            string(",\"accuracy\":", g.accuracy.rawValue)
            JSONWriter.appendASCII(g.temporaryPrecise ? ",\"temporaryPrecise\":true" : ",\"temporaryPrecise\":false", to: &out)
            string(",\"purpose\":", g.purpose)
            out.append(UInt8(ascii: "}"))
        } else {
            JSONWriter.appendASCII(",\"session\":null", to: &out)
        }
        JSONWriter.appendASCII(e.subscribed ? ",\"subscribed\":true}" : ",\"subscribed\":false}", to: &out)
    }

    typealias DecodingError = ServerMessage.DecodingError

    /// Reads the list fields of a status reply into `reply` (absent fields: a server before them).
    static func decode(_ o: [String: JSONValue], into reply: inout StatusReply) throws(DecodingError) {
        if o["connected"] != nil { reply.connected = try ServerMessage.int(o, "connected") }
        switch o["connectionsShown"] {
        case nil, .null?: break
        case .string(let s)?:
            guard let shown = StatusReply.ConnectionsShown(rawValue: s) else {
                throw DecodingError("connectionsShown \(JSONWriter.quoted(s)) is not all or own")
            }
            reply.connectionsShown = shown
        case let other?: throw DecodingError("connectionsShown must be a string, not \(other.kindName)")
        }
        switch o["connections"] {
        case nil, .null?: break
        case .array(let items)?:
            var entries: [StatusReply.ConnectionEntry] = []
            for (i, item) in items.enumerated() { entries.append(try decodeEntry(item, at: "connections[\(i)]")) }
            reply.connections = entries
        case let other?: throw DecodingError("connections must be an array, not \(other.kindName)")
        }
        if o["next"] != nil { reply.next = try ServerMessage.int(o, "next") }
    }

    static func decodeEntry(_ value: JSONValue, at path: String) throws(DecodingError) -> StatusReply.ConnectionEntry {
        guard case .object(let o) = value else { throw DecodingError("\(path) must be an object, not \(value.kindName)") }
        func optionalInteger<T: FixedWidthInteger>(_ key: String, _: T.Type) throws(DecodingError) -> T? {
            switch o[key] {
            case nil, .null?: return nil
            case .number(let n)?:
                guard let v = T(exactly: n) else { throw DecodingError("\(path).\(key) \(JSONWriter.numberText(n)) is not a valid \(key)") }
                return v
            case let other?: throw DecodingError("\(path).\(key) must be a number, not \(other.kindName)")
            }
        }
        func optionalString(_ o: [String: JSONValue], _ key: String, _ at: String) throws(DecodingError) -> String? {
            switch o[key] {
            case nil, .null?: return nil
            case .string(let s)?: return s
            case let other?: throw DecodingError("\(at).\(key) must be a string, not \(other.kindName)")
            }
        }
        func flag(_ o: [String: JSONValue], _ key: String, _ at: String) throws(DecodingError) -> Bool {
            switch o[key] {
            case nil, .null?: return false
            case .bool(let b)?: return b
            case let other?: throw DecodingError("\(at).\(key) must be a boolean, not \(other.kindName)")
            }
        }
        guard let connection = try optionalInteger("connection", UInt64.self) else { throw DecodingError("\(path) has no connection") }
        guard let rule = try optionalString(o, "rule", path) else { throw DecodingError("\(path) has no rule") }
        var session: StatusReply.SessionGrant? = nil
        switch o["session"] {
        case nil, .null?: break
        case .object(let s)?:
            let at = "\(path).session"
            guard let a = try optionalString(s, "authorization", at), let authorization = Authorization(rawValue: a) else {
                throw DecodingError("\(at) has no valid authorization; expected \(Authorization.expected)")
            }
            guard let c = try optionalString(s, "accuracy", at), let accuracy = Accuracy(rawValue: c) else {
                throw DecodingError("\(at) has no valid accuracy; expected \(Accuracy.expected)")
            }
            session = StatusReply.SessionGrant(authorization: authorization, accuracy: accuracy,
                                               temporaryPrecise: try flag(s, "temporaryPrecise", at),
                                               purpose: try optionalString(s, "purpose", at))
        case let other?: throw DecodingError("\(path).session must be an object or null, not \(other.kindName)")
        }
        return StatusReply.ConnectionEntry(
            connection: connection, isSelf: try flag(o, "self", path), pid: try optionalInteger("pid", Int32.self),
            uid: try optionalInteger("uid", UInt32.self), gid: try optionalInteger("gid", UInt32.self),
            executable: try optionalString(o, "executable", path), rule: rule, session: session,
            subscribed: try flag(o, "subscribed", path))
    }
}
