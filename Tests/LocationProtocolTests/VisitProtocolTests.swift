import LocationCore
import LocationProtocol
import Testing

@Suite struct VisitProtocolTests {
    @Test func subscribeEvents() throws {
        guard case .subscribe(_, let plain) = try Request.decode(#"{"type":"subscribe"}"#) else { Issue.record("not subscribe"); return }
        #expect(plain.events == .location)
        guard case .subscribe(_, let o) = try Request.decode(#"{"type":"subscribe","events":["visits","significant"]}"#) else {
            Issue.record("not subscribe"); return
        }
        #expect(o.events == [.visits, .significant])
        #expect(!o.events.contains(.location))
        #expect(throws: ProtocolError.self) { try Request.decode(#"{"type":"subscribe","events":["visit"]}"#) }
        #expect(throws: ProtocolError.self) { try Request.decode(#"{"type":"subscribe","events":[]}"#) }
        #expect(throws: ProtocolError.self) { try Request.decode(#"{"type":"subscribe","events":"visits"}"#) }
        do { _ = try Request.decode(#"{"type":"subscribe","id":4,"events":["visits","parking"]}"#) } catch {
            #expect(error.code == .outOfRange && error.id == .number(4) && error.message.contains("\"parking\""))
        }
        // The client's request line round-trips.
        let line = Request.subscribe(id: .number(1), options: o).line
        guard case .subscribe(_, let back) = try Request.decode(String(line.dropLast())) else { Issue.record("round trip"); return }
        #expect(back.events == o.events)
    }

    @Test func visitAndSignificantEventsRoundTrip() throws {
        let t = CivilTime(year: 2026, month: 5, day: 4, hour: 8, minute: 30).timestamp
        let arrival = Visit(kind: .arrival, arrival: t, departure: nil,
                            coordinate: Coordinate(latitude: 52.5200083, longitude: -13.4049539), horizontalAccuracy: 7.3125)
        var out: [UInt8] = []
        EventEncoder().append(.visit(arrival), to: &out)
        let line = String(decoding: out, as: UTF8.self)
        #expect(line == #"{"type":"visit","event":"arrival","arrival":"2026-05-04T08:30:00Z","departure":null,"latitude":52.5200083,"longitude":-13.4049539,"horizontalAccuracy":7.313}"# + "\n")
        #expect(try ServerMessage.decode(String(line.dropLast())) == .visit(Visit(
            kind: .arrival, arrival: t, departure: nil, coordinate: arrival.coordinate, horizontalAccuracy: 7.313)))

        var departure = arrival
        departure.kind = .departure
        departure.departure = t.adding(seconds: 333.5)
        guard case .visit(let d) = try ServerMessage.decode(String(ServerMessage.visit(departure).line.dropLast())) else {
            Issue.record("not a visit"); return
        }
        #expect(d.kind == .departure && d.departure == t.adding(seconds: 333.5) && d.arrival == t)

        let fix = Fix(time: t, coordinate: Coordinate(latitude: 1.5, longitude: 2.25), horizontalAccuracy: nil)
        let sig = ServerMessage.significant(fix).line
        #expect(sig == #"{"type":"significant","time":"2026-05-04T08:30:00Z","latitude":1.5,"longitude":2.25,"horizontalAccuracy":null}"# + "\n")
        guard case .significant(let f) = try ServerMessage.decode(String(sig.dropLast())) else { Issue.record("not significant"); return }
        #expect(f.time == t && f.coordinate == fix.coordinate && f.horizontalAccuracy == nil)
    }

    @Test func subscribedEchoesEvents() throws {
        let m = ServerMessage.subscribed(id: .number(1), options: SubscriptionOptions(events: [.location, .visits]))
        #expect(m.line.contains(#""events":["location","visits"]"#))
        guard case .subscribed(_, let o) = try ServerMessage.decode(String(m.line.dropLast())) else { Issue.record("not subscribed"); return }
        #expect(o.events == [.location, .visits])
    }

    /// With a gazetteer a visit and a significant change carry their locality, JSON-escaped, and
    /// queued lines keep it before their `seq`; a location line does not carry one.
    @Test func localityJoinsVisitAndSignificantLines() throws {
        let g = Gazetteer(places: [
            GazetteerPlace(name: "Sankt \"Quote\" Ort", coordinate: Coordinate(latitude: 52.53, longitude: -13.40), countryCode: "DE", admin1: "16"),
            GazetteerPlace(name: "Elsewhere", coordinate: Coordinate(latitude: 10, longitude: 10), countryCode: "XX", admin1: ""),
        ])
        let encoder = EventEncoder(gazetteer: g)
        let t = CivilTime(year: 2026, month: 5, day: 4, hour: 8, minute: 30).timestamp
        let at = Coordinate(latitude: 52.52, longitude: -13.40)
        let metres = Int64(Geodesy.distance(at, Coordinate(latitude: 52.53, longitude: -13.40)).rounded())
        let locality = #","locality":{"name":"Sankt \"Quote\" Ort","countryCode":"DE","admin1":"16","distance":\#(metres)}"#
        var out: [UInt8] = []
        encoder.append(.visit(Visit(kind: .arrival, arrival: t, departure: nil, coordinate: at, horizontalAccuracy: 5)), to: &out)
        #expect(String(decoding: out, as: UTF8.self) == #"{"type":"visit","event":"arrival","arrival":"2026-05-04T08:30:00Z","departure":null,"latitude":52.52,"longitude":-13.4,"horizontalAccuracy":5"# + locality + "}\n")
        out = []
        let fix = Fix(time: t, coordinate: at, mode: .threeD, horizontalAccuracy: 5)
        encoder.append(.significant(fix), to: &out)
        #expect(String(decoding: out, as: UTF8.self) == #"{"type":"significant","time":"2026-05-04T08:30:00Z","latitude":52.52,"longitude":-13.4,"horizontalAccuracy":5"# + locality + "}\n")
        out = []
        encoder.appendQueued(.significant(fix), seq: 7, to: &out)
        #expect(String(decoding: out, as: UTF8.self).hasSuffix(locality + ",\"seq\":7}\n"))
        out = []
        encoder.append(.location(fix), to: &out)
        #expect(!String(decoding: out, as: UTF8.self).contains("locality"))
        // An empty gazetteer adds nothing.
        out = []
        EventEncoder(gazetteer: Gazetteer(places: [])).append(.significant(fix), to: &out)
        #expect(!String(decoding: out, as: UTF8.self).contains("locality"))
    }
}

/// `places` requests and replies (docs/protocol.md, "Places").
@Suite struct PlaceProtocolTests {
    static func place(_ id: UInt64) -> Place {
        let t = Timestamp(seconds: 1_777_000_000 + Int64(id) * 3600)
        let centre = Coordinate(latitude: 48 + Double(id) * 1e-3, longitude: 11.5)
        return Place(id: id, sum: Geodesy.unitVector(centre) * 2, visits: 2, totalSeconds: 5400, firstVisit: t, lastVisit: t.adding(seconds: 7200))
    }

    @Test func requestAndReplyRoundTrip() throws {
        #expect(try Request.decode(#"{"type":"places","id":3,"offset":7}"#) == .places(id: .number(3), offset: 7))
        #expect(try Request.decode(String(Request.places(id: .number(1), offset: 0).line.dropLast())) == .places(id: .number(1), offset: 0))
        let line = ServerMessage.places(id: .number(3), places: [Self.place(7)], next: nil).line
        #expect(line == #"{"type":"places","id":3,"places":[{"id":"p7","latitude":48.007,"longitude":11.5,"visits":2,"totalSeconds":5400,"firstVisit":"2026-04-24T10:06:40Z","lastVisit":"2026-04-24T12:06:40Z"}]}"# + "\n")
        guard case .places(let id, let places, let next) = try ServerMessage.decode(String(line.dropLast())) else { Issue.record("not places"); return }
        #expect(id == .number(3) && next == nil && places.map(\.name) == ["p7"] && places[0].visits == 2)
        #expect(Geodesy.distance(places[0].centre, Self.place(7).centre) < 0.01)
        #expect(places[0].locality == nil)

        // A place listed with its locality keeps it through the line.
        var named = Self.place(8)
        named.locality = Locality(name: "Garching \"b.\" München", countryCode: "DE", admin1: "02", distance: 1234.4)
        let namedLine = ServerMessage.places(id: nil, places: [named]).line
        #expect(namedLine.hasSuffix(#""lastVisit":"2026-04-24T13:06:40Z","locality":{"name":"Garching \"b.\" München","countryCode":"DE","admin1":"02","distance":1234}}]}"# + "\n"))
        guard case .places(_, let back, _) = try ServerMessage.decode(String(namedLine.dropLast())) else { Issue.record("not places"); return }
        #expect(back.first?.locality == Locality(name: "Garching \"b.\" München", countryCode: "DE", admin1: "02", distance: 1234))
    }

    /// Pages fit one line and together hold every place once, in order.
    @Test func pagesFitALineAndCoverAll() throws {
        let all = (1...3000).map { Self.place(UInt64($0)) }
        var offset = 0, seen: [UInt64] = []
        while true {
            let page = PlaceCodec.page(all, from: offset, id: .number(1))
            #expect(ServerMessage.places(id: .number(1), places: Array(page.places), next: page.next).line.utf8.count <= LocationProtocol.maxLineBytes)
            seen += page.places.map(\.id)
            guard let next = page.next else { break }
            #expect(next > offset)
            offset = next
        }
        #expect(seen == all.map(\.id))
    }
}

/// `visits` requests and replies (docs/protocol.md, "Recent visits").
@Suite struct RecentVisitProtocolTests {
    static func visit(_ n: Int, open: Bool = false) -> Visit {
        let t = Timestamp(seconds: 1_777_000_000 + Int64(n) * 3600)
        var v = Visit(kind: open ? .arrival : .departure, arrival: t, departure: open ? nil : t.adding(seconds: 600),
                      coordinate: Coordinate(latitude: 48 + Double(n) * 1e-3, longitude: 11.5), horizontalAccuracy: 7.25)
        v.place = UInt64(n)
        return v
    }

    @Test func requestAndReplyRoundTrip() throws {
        #expect(try Request.decode(#"{"type":"visits","id":3,"offset":7}"#) == .visits(id: .number(3), offset: 7))
        #expect(try Request.decode(String(Request.visits(id: .number(1), offset: 0).line.dropLast())) == .visits(id: .number(1), offset: 0))
        let visits = [Self.visit(1), Self.visit(2, open: true)]
        let line = ServerMessage.visits(id: .number(3), visits: visits, next: 2).line
        #expect(line == #"{"type":"visits","id":3,"visits":[{"type":"visit","event":"departure","arrival":"2026-04-24T04:06:40Z","departure":"2026-04-24T04:16:40Z","latitude":48.001,"longitude":11.5,"horizontalAccuracy":7.25,"place":"p1"},"#
                + #"{"type":"visit","event":"arrival","arrival":"2026-04-24T05:06:40Z","departure":null,"latitude":48.002,"longitude":11.5,"horizontalAccuracy":7.25,"place":"p2"}],"next":2}"# + "\n")
        guard case .visits(let id, let back, let next) = try ServerMessage.decode(String(line.dropLast())) else { Issue.record("not visits"); return }
        #expect(id == .number(3) && next == 2 && back == visits)
    }

    /// Pages fit one line and together hold every visit once, in order.
    @Test func pagesFitALineAndCoverAll() throws {
        let all = (1...3000).map { Self.visit($0) }
        var offset = 0, seen: [Visit] = []
        while true {
            let page = RecentVisitCodec.page(all, from: offset, id: .number(1))
            #expect(ServerMessage.visits(id: .number(1), visits: Array(page.visits), next: page.next).line.utf8.count <= LocationProtocol.maxLineBytes)
            seen += page.visits
            guard let next = page.next else { break }
            #expect(next > offset)
            offset = next
        }
        #expect(seen == all)
    }
}
