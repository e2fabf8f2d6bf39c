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
