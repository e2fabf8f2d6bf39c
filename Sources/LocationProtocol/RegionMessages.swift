import LocationCore

/// Wire form of regions, region requests, replies and events (docs/protocol.md, "Regions").
public enum RegionCodec {
    /// One region object: `id`, `latitude`, `longitude`, `radius` required; `notifyOnEntry`,
    /// `notifyOnExit` (default true), `notifyInitialState` (default false), `dwell` (seconds),
    /// `metadata` (any JSON, kept as text) optional. Errors name it `regions[index]`, or `label`
    /// when the object comes from elsewhere (a GeoJSON feature's properties).
    public static func decodeRegion(_ value: JSONValue, at index: Int, id rid: RequestID?,
                                    label: String? = nil) throws(ProtocolError) -> Region {
        let at = label ?? "regions[\(index)]"
        guard case .object(let o) = value else {
            throw ProtocolError(.badField, "\(at) must be an object, not \(value.kindName)", id: rid)
        }
        guard case .string(let id)? = o["id"] else {
            guard let other = o["id"] else { throw ProtocolError(.missingField, "\(at) has no id (a string of 1…256 bytes)", id: rid) }
            throw ProtocolError(.badField, "\(at).id must be a string, not \(other.kindName)", id: rid)
        }
        func number(_ name: String) throws(ProtocolError) -> Double? {
            switch o[name] {
            case nil, .null?: return nil
            case .number(let n)?: return n
            case let other?: throw ProtocolError(.badField, "\(at).\(name) must be a number, not \(other.kindName)", id: rid)
            }
        }
        func required(_ name: String) throws(ProtocolError) -> Double {
            guard let n = try number(name) else { throw ProtocolError(.missingField, "\(at) (\(id)) has no \(name)", id: rid) }
            return n
        }
        func flag(_ name: String, _ def: Bool) throws(ProtocolError) -> Bool {
            switch o[name] {
            case nil, .null?: return def
            case .bool(let b)?: return b
            case let other?: throw ProtocolError(.badField, "\(at).\(name) must be a boolean, not \(other.kindName)", id: rid)
            }
        }
        var metadata: String? = nil
        if let m = o["metadata"], m != .null {
            // Checked here for what reaches the codec by other ways than a request line (a
            // GeoJSON file): deeper metadata makes a request the daemon cannot parse, refused
            // without its id, so the request would wait for a reply until it timed out.
            let depth = nesting(m)
            guard depth <= maxMetadataDepth else {
                throw ProtocolError(.invalidRegion, "\(at) (\(id)): metadata is nested \(depth) levels deep; at most \(maxMetadataDepth) (a protocol line holds \(maxNestingDepth), 3 of them around a region's metadata)", id: rid)
            }
            var out: [UInt8] = []
            JSONWriter.appendValue(m, to: &out)
            metadata = String(decoding: out, as: UTF8.self)
        }
        // Kept to the wire's precision, so that the region monitored is the one regions.list
        // and the store give back, digit for digit (docs/protocol.md, "Regions").
        func degrees(_ name: String) throws(ProtocolError) -> Double {
            DecimalFormat.rounded(try required(name), decimals: DecimalFormat.degreeDecimals)
        }
        let region = Region(
            id: id, center: Coordinate(latitude: try degrees("latitude"), longitude: try degrees("longitude")),
            radius: DecimalFormat.rounded(try required("radius"), decimals: DecimalFormat.metreDecimals),
            notifyOnEntry: try flag("notifyOnEntry", true), notifyOnExit: try flag("notifyOnExit", true),
            notifyInitialState: try flag("notifyInitialState", false), dwell: try number("dwell"), metadata: metadata)
        if let reason = region.invalidReason {
            throw ProtocolError(.invalidRegion, "\(at): \(reason)", id: rid)
        }
        return region
    }

    /// A region's metadata sits inside a request or reply object, its `regions` array and the
    /// region object (docs/protocol.md, "Regions").
    public static let maxMetadataDepth = maxNestingDepth - 3

    /// How many arrays and objects `value` nests (a number or string: 0).
    static func nesting(_ value: JSONValue) -> Int {
        switch value {
        case .array(let items): 1 + items.reduce(0) { max($0, nesting($1)) }
        case .object(let members): 1 + members.values.reduce(0) { max($0, nesting($1)) }
        default: 0
        }
    }

    public static func appendRegion(_ r: RegionRecord, to out: inout [UInt8]) {
        JSONWriter.appendASCII("{\"id\":", to: &out)
        JSONWriter.appendString(r.region.id, to: &out)
        EventEncoder.appendCoordinate(r.region.center, to: &out)
        EventEncoder.appendMetres(",\"radius\":", r.region.radius, to: &out)
        JSONWriter.appendASCII(r.region.notifyOnEntry ? ",\"notifyOnEntry\":true" : ",\"notifyOnEntry\":false", to: &out)
        JSONWriter.appendASCII(r.region.notifyOnExit ? ",\"notifyOnExit\":true" : ",\"notifyOnExit\":false", to: &out)
        JSONWriter.appendASCII(r.region.notifyInitialState ? ",\"notifyInitialState\":true" : ",\"notifyInitialState\":false", to: &out)
        if let d = r.region.dwell {
            JSONWriter.appendASCII(",\"dwell\":", to: &out)
            JSONWriter.appendNumber(d, to: &out)
        }
        if let m = r.region.metadata {
            JSONWriter.appendASCII(",\"metadata\":", to: &out)
            out.append(contentsOf: m.utf8)
        }
        JSONWriter.appendASCII(",\"state\":\"", to: &out)
        out.append(contentsOf: r.state.rawValue.utf8)
        JSONWriter.appendASCII("\"}", to: &out)
    }

    /// `{"type":"region","event":…,"region":…,"time":…,"latitude":…,"longitude":…,"inferred":…}`
    public static func appendEvent(_ e: RegionEvent, to out: inout [UInt8]) {
        JSONWriter.appendASCII("{\"type\":\"region\",\"event\":\"", to: &out)
        out.append(contentsOf: e.kind.rawValue.utf8)
        JSONWriter.appendASCII("\",\"region\":", to: &out)
        JSONWriter.appendString(e.region, to: &out)
        JSONWriter.appendASCII(",\"time\":\"", to: &out)
        ISO8601.append(e.time, to: &out)
        out.append(UInt8(ascii: "\""))
        EventEncoder.appendCoordinate(e.coordinate, to: &out)
        JSONWriter.appendASCII(e.inferred ? ",\"inferred\":true}\n" : ",\"inferred\":false}\n", to: &out)
    }

    static func decodeRegions(_ value: JSONValue?, id rid: RequestID?) throws(ProtocolError) -> [Region] {
        guard let value else { throw ProtocolError(.missingField, "missing field regions (an array of regions)", id: rid) }
        guard case .array(let items) = value else {
            throw ProtocolError(.badField, "regions must be an array, not \(value.kindName)", id: rid)
        }
        var out: [Region] = []
        for (i, item) in items.enumerated() { out.append(try decodeRegion(item, at: i, id: rid)) }
        return out
    }

    static func decodeIDs(_ value: JSONValue?, id rid: RequestID?) throws(ProtocolError) -> [String]? {
        switch value {
        case nil, .null?: return nil
        case .array(let items)?:
            var ids: [String] = []
            for (i, item) in items.enumerated() {
                guard case .string(let s) = item else {
                    throw ProtocolError(.badField, "ids[\(i)] must be a string (a region id), not \(item.kindName)", id: rid)
                }
                ids.append(s)
            }
            return ids
        case let other?: throw ProtocolError(.badField, "ids must be an array of strings, not \(other.kindName)", id: rid)
        }
    }

    /// Decodes a region event line's object (clients).
    static func decodeEvent(_ o: [String: JSONValue]) throws(ServerMessage.DecodingError) -> RegionEvent {
        guard case .string(let k)? = o["event"], let kind = RegionEventKind(rawValue: k) else {
            throw ServerMessage.DecodingError("region event has no valid event")
        }
        guard let time = try ServerMessage.optionalTime(o, "time") else { throw ServerMessage.DecodingError("region event has no time") }
        return RegionEvent(region: try ServerMessage.string(o, "region"), kind: kind, time: time,
                           coordinate: Coordinate(latitude: try ServerMessage.number(o, "latitude"),
                                                  longitude: try ServerMessage.number(o, "longitude")),
                           inferred: o["inferred"] == .bool(true))
    }

    /// Decodes the `regions` array of a `regions` reply (clients).
    static func decodeRecords(_ value: JSONValue?) throws(ServerMessage.DecodingError) -> [RegionRecord] {
        guard case .array(let items)? = value else { throw ServerMessage.DecodingError("regions reply has no regions array") }
        var out: [RegionRecord] = []
        for (i, item) in items.enumerated() {
            let region: Region
            do { region = try decodeRegion(item, at: i, id: nil) } catch { throw ServerMessage.DecodingError(error.message) }
            guard case .string(let s)? = item["state"], let state = RegionState(rawValue: s) else {
                throw ServerMessage.DecodingError("regions[\(i)] has no valid state")
            }
            out.append(RegionRecord(region: region, state: state))
        }
        return out
    }
}

extension JSONWriter {
    /// Appends any JSON value (objects' keys sorted, so the text is canonical).
    public static func appendValue(_ v: JSONValue, to out: inout [UInt8]) {
        switch v {
        case .null: appendASCII("null", to: &out)
        case .bool(let b): appendASCII(b ? "true" : "false", to: &out)
        case .number(let n): appendNumber(n, to: &out)
        case .string(let s): appendString(s, to: &out)
        case .array(let a):
            out.append(UInt8(ascii: "["))
            for (i, e) in a.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                appendValue(e, to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let o):
            out.append(UInt8(ascii: "{"))
            for (i, k) in o.keys.sorted().enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                appendString(k, to: &out)
                out.append(UInt8(ascii: ":"))
                appendValue(o[k]!, to: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }
}

extension RegionCodec {
    /// The records from `offset` that fit one `regions` reply line of at most `maxLineBytes`
    /// (`id` included), and the offset of the rest — nil when this is the last page. A page
    /// holds at least one record, so paging always advances. *Reason:* a program may register
    /// 10,000 regions with 4 KB of metadata each; no client should have to read one 40 MB line.
    public static func page(_ records: [RegionRecord], from offset: Int, id: RequestID?) -> (records: ArraySlice<RegionRecord>, next: Int?) {
        let start = min(max(offset, 0), records.count)
        let end = Paging.end(from: start, count: records.count,
                             envelope: .regions(id: id, regions: [], next: Int(Int32.max))) { appendRegion(records[$0], to: &$1) }
        return (records[start..<end], end < records.count ? end : nil)
    }
}

/// The paged replies (`regions`, `status`'s `connections`; docs/protocol.md): one rule for
/// what fits one line.
enum Paging {
    /// The end of the page of entries from `start` (of `count`) that fits one line of at most
    /// `maxLineBytes` with `envelope` (the reply with an empty list and a `next`): at least one
    /// entry, so paging always advances.
    static func end(from start: Int, count: Int, envelope: ServerMessage, entry: (Int, inout [UInt8]) -> Void) -> Int {
        var bytes: [UInt8] = []
        envelope.append(to: &bytes)
        var used = bytes.count
        var end = start
        while end < count {
            bytes.removeAll(keepingCapacity: true)
            entry(end, &bytes)
            let size = bytes.count + (end > start ? 1 : 0)  // the comma
            if end > start && used + size > maxLineBytes { break }
            used += size
            end += 1
        }
        return end
    }
}
