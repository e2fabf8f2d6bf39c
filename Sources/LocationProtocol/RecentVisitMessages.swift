import LocationCore

/// `visits` requests and replies (docs/protocol.md, "Recent visits"): each entry is the visit
/// event the program was sent, without its locality.
public enum RecentVisitCodec {
    /// `{"type":"visit","event":"departure","arrival":…,…,"place":"p7"}`.
    public static func appendVisit(_ visit: Visit, to out: inout [UInt8]) {
        EventEncoder().appendVisit(visit, to: &out)
        out.removeLast()  // the line's newline
    }

    static func decodeVisits(_ value: JSONValue?) throws(ServerMessage.DecodingError) -> [Visit] {
        guard case .array(let items)? = value else { throw ServerMessage.DecodingError("visits has no visits array") }
        var visits: [Visit] = []
        for item in items {
            guard case .object(let o) = item else { throw ServerMessage.DecodingError("a visit is not an object") }
            visits.append(try ServerMessage.decodeVisit(o))
        }
        return visits
    }

    /// The visits from `offset` that fit one `visits` reply line, and the offset of the rest
    /// (nil on the last page): the rule of `regions` pages.
    public static func page(_ visits: [Visit], from offset: Int, id: RequestID?) -> (visits: ArraySlice<Visit>, next: Int?) {
        let start = min(max(offset, 0), visits.count)
        let end = Paging.end(from: start, count: visits.count,
                             envelope: .visits(id: id, visits: [], next: Int(Int32.max))) { appendVisit(visits[$0], to: &$1) }
        return (visits[start..<end], end < visits.count ? end : nil)
    }
}
