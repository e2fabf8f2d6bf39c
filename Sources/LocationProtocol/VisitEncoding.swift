import LocationCore

// Encoding of `visit` and `significant` events (docs/protocol.md, "Events").
extension EventEncoder {
    /// Longest visit line: 108 bytes of keys and punctuation, two quoted times (33 each) and
    /// three numbers (24 each) make 246, a number may need 8 more while written; a significant
    /// line is shorter.
    @usableFromInline static let maxVisitLine = 320

    @inlinable public func appendVisit(_ visit: Visit, to out: inout [UInt8]) {
        out.appendWritten(capacity: Self.maxVisitLine) { w in
            w.ascii("{\"type\":\"visit\",\"event\":")
            switch visit.kind {
            case .arrival: w.ascii("\"arrival\"")
            case .departure: w.ascii("\"departure\"")
            }
            w.ascii(",\"arrival\":")
            Self.writeTime(visit.arrival, &w)
            w.ascii(",\"departure\":")
            Self.writeTime(visit.departure, &w)
            Self.writeCoordinate(visit.coordinate, &w)
            Self.writeAccuracy(visit.horizontalAccuracy, &w)
            if let place = visit.place {
                w.ascii(",\"place\":\"p")
                w.integer(Int64(clamping: place))
                w.byte(0x22)
            }
            w.ascii("}\n")
        }
        appendLocality(of: visit.coordinate, to: &out)
    }

    @inlinable public func appendSignificant(_ fix: Fix, to out: inout [UInt8]) {
        out.appendWritten(capacity: Self.maxVisitLine) { w in
            w.ascii("{\"type\":\"significant\",\"time\":")
            Self.writeTime(fix.time, &w)
            Self.writeCoordinate(fix.coordinate, &w)
            Self.writeAccuracy(fix.horizontalAccuracy, &w)
            w.ascii("}\n")
        }
        appendLocality(of: fix.coordinate, to: &out)
    }

    /// `,"locality":{"name":…,"countryCode":…,"admin1":…,"distance":…}` put before the line's
    /// closing `}\n`, when there is a gazetteer with a place in it; `distance` in whole metres.
    @usableFromInline func appendLocality(of coordinate: Coordinate, to out: inout [UInt8]) {
        guard let locality = gazetteer?.nearest(coordinate) else { return }
        out.removeLast(2)
        Self.appendLocality(locality, to: &out)
        JSONWriter.appendASCII("}\n", to: &out)
    }

    /// `,"locality":{"name":…,"countryCode":…,"admin1":…,"distance":…}`; `distance` in whole metres.
    public static func appendLocality(_ locality: Locality, to out: inout [UInt8]) {
        JSONWriter.appendASCII(",\"locality\":{\"name\":", to: &out)
        JSONWriter.appendString(locality.name, to: &out)
        JSONWriter.appendASCII(",\"countryCode\":", to: &out)
        JSONWriter.appendString(locality.countryCode, to: &out)
        JSONWriter.appendASCII(",\"admin1\":", to: &out)
        JSONWriter.appendString(locality.admin1, to: &out)
        JSONWriter.appendASCII(",\"distance\":", to: &out)
        DecimalFormat.appendInteger(Int64(locality.distance.rounded()), to: &out)
        out.append(UInt8(ascii: "}"))
    }

    /// `,"events":["location","visits"]` (leading comma included).
    public static func appendEvents(_ kinds: EventKinds, to out: inout [UInt8]) {
        JSONWriter.appendASCII(",\"events\":[", to: &out)
        var first = true
        for (name, kind) in EventKinds.names where kinds.contains(kind) {
            if !first { out.append(0x2C) }
            first = false
            JSONWriter.appendString(name, to: &out)
        }
        out.append(0x5D)
    }
}

extension Request {
    /// `events`: absent or `null` → `["location"]`; otherwise a non-empty array of known names.
    static func eventKinds(_ object: [String: JSONValue], id: RequestID?) throws(ProtocolError) -> EventKinds {
        switch object["events"] {
        case nil, .null?: return .location
        case .array(let items)?:
            var kinds: EventKinds = []
            for item in items {
                guard case .string(let name) = item else {
                    throw ProtocolError(.badField, "events must be an array of strings, not contain \(item.kindName)", id: id)
                }
                guard let k = EventKinds.names.first(where: { $0.name == name })?.kind else {
                    throw ProtocolError(.outOfRange, "events: unknown event type \(JSONWriter.quoted(name)); expected location, visits, significant", id: id)
                }
                kinds.insert(k)
            }
            guard !kinds.isEmpty else {
                throw ProtocolError(.outOfRange, "events must name at least one of location, visits, significant", id: id)
            }
            return kinds
        case let other?:
            throw ProtocolError(.badField, "events must be an array of strings, not \(other.kindName)", id: id)
        }
    }
}

extension ServerMessage {
    static func decodeEvents(_ o: [String: JSONValue]) throws(DecodingError) -> EventKinds {
        guard case .array(let items)? = o["events"] else { return .location }
        var kinds: EventKinds = []
        for item in items {
            guard case .string(let name) = item, let k = EventKinds.names.first(where: { $0.name == name })?.kind else {
                throw DecodingError("events has an unknown entry")
            }
            kinds.insert(k)
        }
        return kinds
    }

    static func decodeVisit(_ o: [String: JSONValue]) throws(DecodingError) -> Visit {
        let kind: Visit.Kind
        switch o["event"] {
        case .string("arrival")?: kind = .arrival
        case .string("departure")?: kind = .departure
        default: throw DecodingError("visit has no valid event")
        }
        guard let arrival = try optionalTime(o, "arrival") else { throw DecodingError("visit has no arrival") }
        let departure = try optionalTime(o, "departure")
        if kind == .departure && departure == nil { throw DecodingError("departure has no departure time") }
        var visit = Visit(kind: kind, arrival: arrival, departure: departure,
                          coordinate: Coordinate(latitude: try number(o, "latitude"), longitude: try number(o, "longitude")),
                          horizontalAccuracy: try number(o, "horizontalAccuracy"))
        switch o["place"] {
        case nil: break
        case .string(let name)? where name.hasPrefix("p") && UInt64(name.dropFirst()) != nil: visit.place = UInt64(name.dropFirst())
        default: throw DecodingError("visit has an invalid place")
        }
        return visit
    }

    static func decodeSignificant(_ o: [String: JSONValue]) throws(DecodingError) -> Fix {
        guard let time = try optionalTime(o, "time") else { throw DecodingError("significant has no time") }
        return Fix(time: time, coordinate: Coordinate(latitude: try number(o, "latitude"), longitude: try number(o, "longitude")),
                   horizontalAccuracy: try optionalNumber(o, "horizontalAccuracy"))
    }
}
