import LocationCore

/// Protocol version spoken by this module (`"protocol":1` in `hello`).
public let protocolVersion = 1
/// The longest line either side accepts, in bytes, newline excluded.
public let maxLineBytes = 65_536
/// Arrays and objects a line may nest, both ways.
public let maxNestingDepth = 16

/// The longest string `id` a request may carry, in bytes (as region ids and purposes).
public let maxIDBytes = 256

/// A request's `id`: a JSON number or string, echoed in the reply. Numbers are echoed by value
/// (integral numbers as integers: `7`, `1e3` → `1000`), strings exactly.
public enum RequestID: Hashable, Sendable, CustomStringConvertible {
    case number(Double)
    case string(String)

    public func append(to out: inout [UInt8]) {
        switch self {
        case .number(let n): JSONWriter.appendNumber(n, to: &out)
        case .string(let s): JSONWriter.appendString(s, to: &out)
        }
    }

    public var description: String {
        var out: [UInt8] = []
        append(to: &out)
        return String(decoding: out, as: UTF8.self)
    }
}

/// Error codes of `{"type":"error"}` replies.
public enum ErrorCode: String, Hashable, Sendable, CaseIterable {
    /// The line is not valid JSON.
    case badJSON
    /// Valid JSON, but not an object.
    case notAnObject
    /// A required field is absent.
    case missingField
    /// A field has the wrong type.
    case badField
    /// A number is outside its allowed range (or an unsupported protocol version).
    case outOfRange
    /// `type` names no known request.
    case unknownType
    /// A line longer than `maxLineBytes`; the server closes the connection.
    case lineTooLong
    /// Requests faster than the rate limit; the server closes the connection.
    case flood
    /// The peer's user has as many connections open as the daemon allows one user
    /// (`[socket] max_connections_per_user`); sent instead of the hello, then closed.
    case tooManyConnections
    /// The peer's user has as many programs keeping background monitoring as the daemon allows
    /// one user (`[store] max_background_programs_per_user`): an `always` subscribe asking for
    /// visits or significant changes from another program is refused; nothing was applied.
    case tooManyBackgroundPrograms
    /// Another connection of the program holds its durable subscription; nothing was applied.
    case durableInUse
    /// A region is malformed (radius, coordinates, id, dwell, metadata); nothing was applied.
    case invalidRegion
    /// A region id is already registered or given twice; nothing was applied.
    case duplicateRegion
    /// More regions than the program may register; nothing was applied.
    case tooManyRegions
    /// `regions.remove` named an unregistered id; nothing was applied.
    case unknownRegion
    /// The daemon could not write the change to its database; nothing was applied.
    case storeFailed
    /// No active session (or the policy denies this peer); nothing is delivered without one.
    case notAuthorized
    /// The session's authorization is too low for the request (e.g. regions need `always`).
    case insufficientAuthorization
    /// The request needs precise location and the session is approximate (regions), or the
    /// purpose key is not allowed by the policy.
    case fullAccuracyDenied
    /// A request only root and the daemon's own user may make (`reload`).
    case notPermitted
    /// `reload`: the configuration file was refused; the daemon keeps its current configuration.
    case reloadRefused
    /// A code this version does not know, from a newer daemon (never sent by this one): the
    /// request failed, and the message starts with the daemon's code.
    case unrecognized
}

/// A rejected request (or an abusive peer), as sent in an error reply.
public struct ProtocolError: Error, Hashable, Sendable, CustomStringConvertible {
    public var code: ErrorCode
    public var message: String
    public var id: RequestID?

    public init(_ code: ErrorCode, _ message: String, id: RequestID? = nil) {
        self.code = code
        self.message = message
        self.id = id
    }

    public var description: String { "\(code.rawValue): \(message)" }
}

/// A client → server request.
public enum Request: Hashable, Sendable {
    /// Optional greeting; the server answers with its `hello` (id echoed). `protocol`, when
    /// given, must be 1.
    case hello(id: RequestID?)
    /// Start (or replace) this connection's subscription.
    case subscribe(id: RequestID?, options: SubscriptionOptions)
    case unsubscribe(id: RequestID?)
    /// `offset`: the first connection of the `connections` page (a previous reply's `next`).
    case status(id: RequestID?, offset: Int = 0)
    /// Register regions for the connection's program (all or none).
    case regionsAdd(id: RequestID?, regions: [Region])
    /// Open this connection's session (docs/protocol.md, "Sessions").
    case sessionStart(id: RequestID?, authorization: Authorization, purpose: String?)
    case sessionEnd(id: RequestID?)
    /// Unregister regions by id (all must exist), or all of them when `ids` is nil.
    case regionsRemove(id: RequestID?, ids: [String]?)
    /// The program's regions with their states.
    case regionsList(id: RequestID?, offset: Int = 0)
    /// The states of the given regions (all when `ids` is nil).
    case regionsState(id: RequestID?, ids: [String]?, offset: Int = 0)
    /// The program has received its queued events up to `seq`: the daemon forgets them.
    case ack(id: RequestID?, seq: UInt64)
    /// Re-read the configuration file; answered once the reload has finished (root and the
    /// daemon's user only: docs/protocol.md, "Reload").
    case reload(id: RequestID?)
    /// The program's places (docs/places.md), one page from `offset`.
    case places(id: RequestID?, offset: Int = 0)
    /// The program's recent visits (docs/places.md), one page from `offset`.
    case visits(id: RequestID?, offset: Int = 0)

    public var id: RequestID? {
        switch self {
        case .hello(let id), .subscribe(let id, _), .unsubscribe(let id), .status(let id, _),
             .regionsAdd(let id, _), .regionsRemove(let id, _), .regionsList(let id, _), .regionsState(let id, _, _),
             .sessionStart(let id, _, _), .sessionEnd(let id), .ack(let id, _), .reload(let id), .places(let id, _), .visits(let id, _): id
        }
    }

    static let parser = JSONParser(maxDepth: maxNestingDepth, maxBytes: maxLineBytes)

    /// Decodes one line (without its newline).
    public static func decode(_ line: String) throws(ProtocolError) -> Request {
        try decode(Array(line.utf8)[...])
    }

    public static func decode(_ line: [UInt8]) throws(ProtocolError) -> Request {
        try decode(line[...])
    }

    public static func decode(_ line: ArraySlice<UInt8>) throws(ProtocolError) -> Request {
        guard line.count <= maxLineBytes else {
            throw ProtocolError(.lineTooLong, "line of \(line.count) bytes is longer than \(maxLineBytes) bytes")
        }
        let value: JSONValue
        do {
            value = try parser.parse(line)
        } catch {
            throw ProtocolError(.badJSON, "invalid JSON: \(error)")
        }
        return try decode(value)
    }

    public static func decode(_ value: JSONValue) throws(ProtocolError) -> Request {
        guard case .object(let object) = value else {
            throw ProtocolError(.notAnObject, "a request must be a JSON object, not \(value.kindName)")
        }
        var id: RequestID? = nil
        switch object["id"] {
        case nil, .null?: break
        case .number(let n)?: id = .number(n)
        case .string(let s)?:
            // Bounded so that every reply echoing it, a page of `regions` or `status` included,
            // stays within the line limit a client accepts. Not echoed: it is what is refused.
            guard s.utf8.count <= maxIDBytes else {
                throw ProtocolError(.outOfRange, "id of \(s.utf8.count) bytes is too long; a string id has at most \(maxIDBytes) bytes")
            }
            id = .string(s)
        case let other?:
            throw ProtocolError(.badField, "id must be a number or a string, not \(other.kindName)")
        }
        guard let typeValue = object["type"] else {
            throw ProtocolError(.missingField, "missing field type; expected one of hello, session.start, session.end, subscribe, unsubscribe, status, regions.add, regions.remove, regions.list, regions.state, places, visits, ack, reload", id: id)
        }
        guard case .string(let type) = typeValue else {
            throw ProtocolError(.badField, "type must be a string, not \(typeValue.kindName)", id: id)
        }
        switch type {
        case "hello":
            if let p = object["protocol"] {
                guard case .number(let n) = p else {
                    throw ProtocolError(.badField, "protocol must be a number, not \(p.kindName)", id: id)
                }
                guard n == Double(protocolVersion) else {
                    throw ProtocolError(.outOfRange, "protocol \(JSONWriter.numberText(n)) is not supported; expected \(protocolVersion)", id: id)
                }
            }
            return .hello(id: id)
        case "subscribe":
            let limits = SubscriptionOptions.limits
            let distance = try number(object, "distanceFilter", in: limits.distanceFilter, unit: "metres", id: id) ?? 0
            let accuracy = try number(object, "desiredAccuracy", in: limits.desiredAccuracy, unit: "metres", id: id)
            let interval = try number(object, "minimumInterval", in: limits.minimumInterval, unit: "seconds", id: id) ?? 0
            let events = try eventKinds(object, id: id)
            var options = SubscriptionOptions(distanceFilter: distance, desiredAccuracy: accuracy, minimumInterval: interval, events: events)
            switch object["durable"] {
            case nil, .null?: break
            case .bool(let b)?: options.durable = b
            case let other?: throw ProtocolError(.badField, "durable must be true or false, not \(other.kindName)", id: id)
            }
            try decodeStreamOptions(object, into: &options, id: id)
            return .subscribe(id: id, options: options)
        case "unsubscribe":
            return .unsubscribe(id: id)
        case "status":
            return .status(id: id, offset: try offset(object, id: id, unit: "connections"))
        case "regions.add":
            return .regionsAdd(id: id, regions: try RegionCodec.decodeRegions(object["regions"], id: id))
        case "regions.remove":
            // Both at once is ambiguous, and taking "all" would delete what the ids did not name.
            switch object["all"] {
            case nil, .null?, .bool(false)?: break
            case .bool(true)?:
                switch object["ids"] {
                case nil, .null?: return .regionsRemove(id: id, ids: nil)
                default: throw ProtocolError(.badField, "give either ids or \"all\":true, not both", id: id)
                }
            case let other?:
                throw ProtocolError(.badField, "all must be true or false, not \(other.kindName)", id: id)
            }
            guard let ids = try RegionCodec.decodeIDs(object["ids"], id: id) else {
                throw ProtocolError(.missingField, "missing field ids (an array of region ids), or \"all\":true", id: id)
            }
            return .regionsRemove(id: id, ids: ids)
        case "regions.list":
            return .regionsList(id: id, offset: try offset(object, id: id))
        case "session.start":
            return try decodeSessionStart(object, id: id)
        case "session.end":
            return .sessionEnd(id: id)
        case "regions.state":
            return .regionsState(id: id, ids: try RegionCodec.decodeIDs(object["ids"], id: id), offset: try offset(object, id: id))
        case "ack":
            return try decodeAck(object, id: id)
        case "reload":
            return .reload(id: id)
        case "places":
            return .places(id: id, offset: try offset(object, id: id))
        case "visits":
            return .visits(id: id, offset: try offset(object, id: id))
        default:
            throw ProtocolError(.unknownType, "unknown request type \(JSONWriter.quoted(type)); expected one of hello, session.start, session.end, subscribe, unsubscribe, status, regions.add, regions.remove, regions.list, regions.state, places, visits, ack, reload", id: id)
        }
    }

    /// An optional numeric field: absent or `null` → `nil`.
    static func number(_ object: [String: JSONValue], _ name: String, in range: ClosedRange<Double>,
                       unit: String, id: RequestID?) throws(ProtocolError) -> Double? {
        switch object[name] {
        case nil, .null?: return nil
        case .number(let n)?:
            guard range.contains(n) else {
                throw ProtocolError(.outOfRange, "\(name) \(JSONWriter.numberText(n)) is out of range; expected \(JSONWriter.numberText(range.lowerBound))…\(JSONWriter.numberText(range.upperBound)) \(unit)", id: id)
            }
            return n
        case let other?:
            throw ProtocolError(.badField, "\(name) must be a number, not \(other.kindName)", id: id)
        }
    }

    /// Appends the request as one line (with `\n`). Options at their defaults are omitted.
    public func append(to out: inout [UInt8]) {
        func type(_ t: StaticString) {
            JSONWriter.appendASCII("{\"type\":\"", to: &out)
            JSONWriter.appendASCII(t, to: &out)
            out.append(0x22)
        }
        switch self {
        case .hello: type("hello"); JSONWriter.appendASCII(",\"protocol\":1", to: &out)
        case .subscribe(_, let options):
            type("subscribe")
            JSONWriter.appendASCII(",\"distanceFilter\":", to: &out)
            JSONWriter.appendNumber(options.distanceFilter, to: &out)
            if let a = options.desiredAccuracy {
                JSONWriter.appendASCII(",\"desiredAccuracy\":", to: &out)
                JSONWriter.appendNumber(a, to: &out)
            }
            JSONWriter.appendASCII(",\"minimumInterval\":", to: &out)
            JSONWriter.appendNumber(options.minimumInterval, to: &out)
            if options.events != .location { EventEncoder.appendEvents(options.events, to: &out) }
            if options.durable { JSONWriter.appendASCII(",\"durable\":true", to: &out) }
            EventEncoder.appendStreamOptions(options, to: &out)
        case .unsubscribe: type("unsubscribe")
        case .status(_, let offset):
            type("status")
            Request.appendOffset(offset, to: &out)
        case .regionsAdd(_, let regions):
            type("regions.add")
            JSONWriter.appendASCII(",\"regions\":[", to: &out)
            for (i, r) in regions.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                var body: [UInt8] = []
                RegionCodec.appendRegion(RegionRecord(region: r, state: .unknown), to: &body)
                // The request carries no state: drop the trailing `,"state":"unknown"}`.
                body.removeLast(",\"state\":\"unknown\"}".utf8.count)
                out.append(contentsOf: body)
                out.append(UInt8(ascii: "}"))
            }
            out.append(UInt8(ascii: "]"))
        case .regionsRemove(_, let ids):
            type("regions.remove")
            Request.appendIDs(ids, all: true, to: &out)
        case .regionsList(_, let offset):
            type("regions.list")
            Request.appendOffset(offset, to: &out)
        case .places(_, let offset):
            type("places")
            Request.appendOffset(offset, to: &out)
        case .visits(_, let offset):
            type("visits")
            Request.appendOffset(offset, to: &out)
        case .sessionStart(_, let authorization, let purpose):
            type("session.start")
            JSONWriter.appendASCII(",\"authorization\":", to: &out)
            JSONWriter.appendString(authorization.rawValue, to: &out)
            if let purpose {
                JSONWriter.appendASCII(",\"purpose\":", to: &out)
                JSONWriter.appendString(purpose, to: &out)
            }
        case .sessionEnd: type("session.end")
        case .regionsState(_, let ids, let offset):
            type("regions.state")
            Request.appendIDs(ids, all: false, to: &out)
            Request.appendOffset(offset, to: &out)
        case .ack(_, let seq):
            type("ack")
            JSONWriter.appendASCII(",\"seq\":", to: &out)
            DecimalFormat.appendInteger(Int64(clamping: seq), to: &out)
        case .reload: type("reload")
        }
        if let id {
            JSONWriter.appendASCII(",\"id\":", to: &out)
            id.append(to: &out)
        }
        JSONWriter.appendASCII("}\n", to: &out)
    }

    /// `offset` of a paged `regions.list`/`regions.state` (docs/protocol.md, "Regions") or
    /// `status` (its `connections`): where the page starts; the previous reply's `next`.
    static func offset(_ object: [String: JSONValue], id: RequestID?, unit: String = "regions") throws(ProtocolError) -> Int {
        guard let n = try number(object, "offset", in: 0...1e9, unit: unit, id: id) else { return 0 }
        guard n == n.rounded() else {
            throw ProtocolError(.outOfRange, "offset \(JSONWriter.numberText(n)) is not an integer; expected the previous reply's next", id: id)
        }
        return Int(n)
    }

    static func appendOffset(_ offset: Int, to out: inout [UInt8]) {
        guard offset > 0 else { return }
        JSONWriter.appendASCII(",\"offset\":", to: &out)
        DecimalFormat.appendInteger(Int64(offset), to: &out)
    }

    static func appendIDs(_ ids: [String]?, all: Bool, to out: inout [UInt8]) {
        guard let ids else {
            if all { JSONWriter.appendASCII(",\"all\":true", to: &out) }
            return
        }
        JSONWriter.appendASCII(",\"ids\":[", to: &out)
        for (i, id) in ids.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            JSONWriter.appendString(id, to: &out)
        }
        out.append(UInt8(ascii: "]"))
    }

    public var line: String {
        var out: [UInt8] = []
        append(to: &out)
        return String(decoding: out, as: UTF8.self)
    }
}
