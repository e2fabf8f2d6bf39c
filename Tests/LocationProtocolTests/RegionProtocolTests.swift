import LocationCore
import LocationProtocol
import Testing

@Suite struct RegionProtocolTests {
    @Test func regionsAddDecodesEveryFieldAndRoundTrips() throws {
        let line = #"{"type":"regions.add","id":4,"regions":[{"id":"home","latitude":52.5,"longitude":13.4,"radius":150,"dwell":300,"notifyInitialState":true,"metadata":{"name":"Home","floor":2}},{"id":"work","latitude":52.52,"longitude":13.41,"radius":80,"notifyOnExit":false}]}"#
        let request = try Request.decode(line)
        guard case .regionsAdd(let id, let regions) = request else { Issue.record("\(request)"); return }
        #expect(id == .number(4))
        #expect(regions.count == 2)
        #expect(regions[0] == Region(id: "home", center: Coordinate(latitude: 52.5, longitude: 13.4), radius: 150,
                                     notifyInitialState: true, dwell: 300, metadata: #"{"floor":2,"name":"Home"}"#))
        #expect(regions[1].notifyOnExit == false && regions[1].notifyOnEntry)
        #expect(try Request.decode(request.line.trimmingCharacters()) == request)
    }

    @Test func regionsRemoveTakesIdsOrAll() throws {
        #expect(try Request.decode(#"{"type":"regions.remove","id":1,"all":true}"#) == .regionsRemove(id: .number(1), ids: nil))
        #expect(try Request.decode(#"{"type":"regions.remove","id":1,"all":true,"ids":null}"#) == .regionsRemove(id: .number(1), ids: nil))
        #expect(try Request.decode(#"{"type":"regions.remove","id":1,"all":false,"ids":["a"]}"#) == .regionsRemove(id: .number(1), ids: ["a"]))
    }

    /// Found by fuzz-request: a latitude with more than 9 decimals came back from
    /// `Request.append` rounded, so the request changed on its way through the client library.
    /// The decoder keeps region geometry to the wire's precision, so what the daemon monitors is
    /// what it lists and what a client re-sends.
    @Test func regionGeometryIsKeptToTheWirePrecision() throws {
        let line = #"{"type":"regions.add","id":1,"regions":[{"id":"home","latitude":52.53330006459703,"longitude":-13.4000000006,"radius":150.00049,"dwell":300}]}"#
        let request = try Request.decode(line)
        guard case .regionsAdd(_, let regions) = request, let region = regions.first else { Issue.record("\(request)"); return }
        #expect(region.center == Coordinate(latitude: 52.533300065, longitude: -13.400000001))
        #expect(region.radius == 150)
        let again = try Request.decode(request.line.trimmingCharacters())
        #expect(again == request)
        #expect(again.line == request.line)
    }

    @Test(arguments: [
        (#"{"type":"regions.add","id":1}"#, ErrorCode.missingField, "missing field regions"),
        (#"{"type":"regions.add","id":1,"regions":{}}"#, .badField, "regions must be an array"),
        (#"{"type":"regions.add","id":1,"regions":[{"id":"a","latitude":1,"longitude":2}]}"#, .missingField, "regions[0] (a) has no radius"),
        (#"{"type":"regions.add","id":1,"regions":[{"id":"a","latitude":1,"longitude":2,"radius":5}]}"#, .invalidRegion, "regions[0]: region a: radius 5 is out of range; expected 10…100000 metres"),
        (#"{"type":"regions.add","id":1,"regions":[{"id":"a","latitude":100,"longitude":2,"radius":50}]}"#, .invalidRegion, "regions[0]: region a: latitude 100 is out of range; expected -90…90 degrees"),
        (#"{"type":"regions.add","id":1,"regions":[{"id":"a","latitude":1,"longitude":200,"radius":50}]}"#, .invalidRegion, "regions[0]: region a: longitude 200 is out of range; expected -180…180 degrees"),
        (#"{"type":"regions.add","id":1,"regions":[{"id":7,"latitude":1,"longitude":2,"radius":50}]}"#, .badField, "regions[0].id must be a string, not a number"),
        (#"{"type":"regions.add","id":1,"regions":[{"latitude":1,"longitude":2,"radius":50}]}"#, .missingField, "regions[0] has no id (a string of 1…256 bytes)"),
        (#"{"type":"regions.add","id":1,"regions":[{"id":"a","latitude":1,"longitude":2,"radius":50,"notifyOnEntry":1}]}"#, .badField, "notifyOnEntry must be a boolean"),
        (#"{"type":"regions.remove","id":1}"#, .missingField, "missing field ids"),
        // Both at once: "all" would delete what the ids do not name.
        (#"{"type":"regions.remove","id":1,"all":true,"ids":["x"]}"#, .badField, #"give either ids or "all":true, not both"#),
        (#"{"type":"regions.remove","id":1,"all":"true"}"#, .badField, "all must be true or false, not a string"),
        (#"{"type":"regions.remove","id":1,"all":false}"#, .missingField, "missing field ids"),
        (#"{"type":"regions.state","id":1,"ids":["a",1]}"#, .badField, "ids[1] must be a string (a region id), not a number"),
    ])
    func badRegionRequestsAreClearErrors(line: String, code: ErrorCode, text: String) {
        expectDecodeError(line, code: code, text: text)
    }

    @Test func regionEventAndRepliesRoundTrip() throws {
        let event = RegionEvent(region: "home", kind: .enter, time: Timestamp(seconds: 1_780_000_000, nanoseconds: 500_000_000),
                                coordinate: Coordinate(latitude: 52.5, longitude: 13.4), inferred: true)
        var out: [UInt8] = []
        EventEncoder().append(.region(event), to: &out)
        let line = String(decoding: out, as: UTF8.self)
        #expect(line == #"{"type":"region","event":"enter","region":"home","time":"2026-05-28T20:26:40.5Z","latitude":52.5,"longitude":13.4,"inferred":true}"# + "\n")
        #expect(try ServerMessage.decode(line.trimmingCharacters()) == .region(event))
        let records = [RegionRecord(region: Region(id: "a", center: Coordinate(latitude: 1, longitude: 2), radius: 50, dwell: 60,
                                                   metadata: #"{"k":"v"}"#), state: .inside)]
        let reply = ServerMessage.regions(id: .string("x"), regions: records)
        #expect(try ServerMessage.decode(reply.line.trimmingCharacters()) == reply)
        let changed = ServerMessage.regionsChanged(id: .number(2), added: 3, removed: 0, registered: 10)
        #expect(try ServerMessage.decode(changed.line.trimmingCharacters()) == changed)
    }
}

extension String {
    func trimmingCharacters() -> String { hasSuffix("\n") ? String(dropLast()) : self }
}
