import LocationCore

/// `places` requests and replies (docs/protocol.md, "Places").
public enum PlaceCodec {
    /// `{"id":"p7","latitude":…,"longitude":…,"visits":3,"totalSeconds":15000,"firstVisit":"…","lastVisit":"…"}`,
    /// and `"locality":{…}` when the place has one.
    public static func appendPlace(_ p: Place, to out: inout [UInt8]) {
        JSONWriter.appendASCII("{\"id\":", to: &out)
        JSONWriter.appendString(p.name, to: &out)
        EventEncoder.appendCoordinate(p.centre, to: &out)
        JSONWriter.appendASCII(",\"visits\":", to: &out)
        DecimalFormat.appendInteger(Int64(p.visits), to: &out)
        JSONWriter.appendASCII(",\"totalSeconds\":", to: &out)
        DecimalFormat.appendInteger(Int64(p.totalSeconds.rounded()), to: &out)
        JSONWriter.appendASCII(",\"firstVisit\":", to: &out)
        EventEncoder.appendTime(p.firstVisit, to: &out)
        JSONWriter.appendASCII(",\"lastVisit\":", to: &out)
        EventEncoder.appendTime(p.lastVisit, to: &out)
        if let locality = p.locality { EventEncoder.appendLocality(locality, to: &out) }
        out.append(UInt8(ascii: "}"))
    }

    static func decodePlaces(_ value: JSONValue?) throws(ServerMessage.DecodingError) -> [Place] {
        guard case .array(let items)? = value else { throw ServerMessage.DecodingError("places has no places array") }
        var places: [Place] = []
        for item in items {
            guard case .object(let o) = item, case .string(let name)? = o["id"], name.hasPrefix("p"), let id = UInt64(name.dropFirst()) else {
                throw ServerMessage.DecodingError("a place has no valid id")
            }
            let centre = Coordinate(latitude: try ServerMessage.number(o, "latitude"), longitude: try ServerMessage.number(o, "longitude"))
            let visits = try ServerMessage.int(o, "visits")
            guard let first = try ServerMessage.optionalTime(o, "firstVisit"), let last = try ServerMessage.optionalTime(o, "lastVisit") else {
                throw ServerMessage.DecodingError("a place has no visit times")
            }
            var place = Place(id: id, sum: Geodesy.unitVector(centre) * Double(max(visits, 1)), visits: visits,
                              totalSeconds: try ServerMessage.number(o, "totalSeconds"), firstVisit: first, lastVisit: last)
            if case .object(let l)? = o["locality"] {
                place.locality = Locality(name: try ServerMessage.string(l, "name"), countryCode: try ServerMessage.string(l, "countryCode"),
                                          admin1: try ServerMessage.string(l, "admin1"), distance: try ServerMessage.number(l, "distance"))
            }
            places.append(place)
        }
        return places
    }

    /// The places from `offset` that fit one `places` reply line, and the offset of the rest
    /// (nil on the last page): the rule of `regions` pages.
    public static func page(_ places: [Place], from offset: Int, id: RequestID?) -> (places: ArraySlice<Place>, next: Int?) {
        let start = min(max(offset, 0), places.count)
        let end = Paging.end(from: start, count: places.count,
                             envelope: .places(id: id, places: [], next: Int(Int32.max))) { appendPlace(places[$0], to: &$1) }
        return (places[start..<end], end < places.count ? end : nil)
    }
}
