import LocationCore

/// A `session` message (docs/protocol.md, "Sessions"): the reply to `session.start` and
/// `session.end`, and the event sent when a policy reload changes or revokes a session.
public struct SessionInfo: Hashable, Sendable {
    public enum State: String, Hashable, Sendable {
        /// Opened by `session.start`.
        case active
        /// Closed by `session.end` (or revoked by a reload).
        case ended
        /// A reload changed what is granted; the session goes on.
        case changed
    }
    public var id: RequestID?
    public var state: State
    public var requested: Authorization?
    public var authorization: Authorization?
    public var accuracy: Accuracy?
    /// Precise for this session only, thanks to the purpose key.
    public var temporaryPrecise: Bool
    public var purpose: String?
    public var rule: String?
    public var reason: String?

    public init(id: RequestID? = nil, state: State, requested: Authorization? = nil, authorization: Authorization? = nil,
                accuracy: Accuracy? = nil, temporaryPrecise: Bool = false, purpose: String? = nil, rule: String? = nil,
                reason: String? = nil) {
        self.id = id; self.state = state; self.requested = requested; self.authorization = authorization
        self.accuracy = accuracy; self.temporaryPrecise = temporaryPrecise; self.purpose = purpose
        self.rule = rule; self.reason = reason
    }

    func append(to out: inout [UInt8]) {
        JSONWriter.appendASCII("{\"type\":\"session\"", to: &out)
        if let id {
            JSONWriter.appendASCII(",\"id\":", to: &out)
            id.append(to: &out)
        }
        func field(_ name: String, _ value: String?) {
            guard let value else { return }
            out.append(UInt8(ascii: ","))
            JSONWriter.appendString(name, to: &out)
            out.append(UInt8(ascii: ":"))
            JSONWriter.appendString(value, to: &out)
        }
        field("state", state.rawValue)
        field("requested", requested?.rawValue)
        field("authorization", authorization?.rawValue)
        field("accuracy", accuracy?.rawValue)
        if accuracy != nil { JSONWriter.appendASCII(temporaryPrecise ? ",\"temporaryPrecise\":true" : ",\"temporaryPrecise\":false", to: &out) }
        field("purpose", purpose)
        field("rule", rule)
        field("reason", reason)
        JSONWriter.appendASCII("}\n", to: &out)
    }

    static func decode(_ o: [String: JSONValue], id: RequestID?) throws(ServerMessage.DecodingError) -> SessionInfo {
        func str(_ k: String) -> String? { if case .string(let s)? = o[k] { return s }; return nil }
        guard let s = str("state"), let state = State(rawValue: s) else { throw ServerMessage.DecodingError("session has no valid state") }
        return SessionInfo(id: id, state: state, requested: str("requested").flatMap(Authorization.init(rawValue:)),
                           authorization: str("authorization").flatMap(Authorization.init(rawValue:)),
                           accuracy: str("accuracy").flatMap(Accuracy.init(rawValue:)),
                           temporaryPrecise: o["temporaryPrecise"] == .bool(true), purpose: str("purpose"),
                           rule: str("rule"), reason: str("reason"))
    }
}

extension Request {
    static func decodeSessionStart(_ object: [String: JSONValue], id: RequestID?) throws(ProtocolError) -> Request {
        var authorization = Authorization.whenInUse
        switch object["authorization"] {
        case nil, .null?: break
        case .string(let s)?:
            guard let a = Authorization(rawValue: s), a != .denied else {
                throw ProtocolError(.outOfRange, "authorization \(JSONWriter.quoted(s)) is not one of when-in-use, always", id: id)
            }
            authorization = a
        case let other?:
            throw ProtocolError(.badField, "authorization must be a string, not \(other.kindName)", id: id)
        }
        var purpose: String? = nil
        switch object["purpose"] {
        case nil, .null?: break
        case .string(let s)?:
            guard !s.isEmpty, s.utf8.count <= maxIDBytes else {
                throw ProtocolError(.outOfRange, "purpose of \(s.utf8.count) bytes is out of range; a purpose key has 1…\(maxIDBytes) bytes, as the rule's purposes list it", id: id)
            }
            purpose = s
        case let other?:
            throw ProtocolError(.badField, "purpose must be a string, not \(other.kindName)", id: id)
        }
        return .sessionStart(id: id, authorization: authorization, purpose: purpose)
    }
}
