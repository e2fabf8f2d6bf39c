import LocationCore
import Testing
@testable import LocationProtocol

@Suite struct ISO8601Tests {
    func t(_ y: Int, _ mo: Int, _ d: Int, _ h: Int = 0, _ mi: Int = 0, _ s: Int = 0, ns: Int = 0) -> Timestamp {
        CivilTime(year: y, month: mo, day: d, hour: h, minute: mi, second: s, nanosecond: ns).timestamp
    }

    @Test func formatting() {
        #expect(ISO8601.string(t(2019, 3, 12, 10, 0, 1, ns: 250_000_000)) == "2019-03-12T10:00:01.25Z")
        #expect(ISO8601.string(t(2019, 3, 12, 10, 0, 1)) == "2019-03-12T10:00:01Z")
        #expect(ISO8601.string(t(2019, 3, 12, 10, 0, 1, ns: 1)) == "2019-03-12T10:00:01.000000001Z")
        #expect(ISO8601.string(t(2019, 3, 12, 10, 0, 1, ns: 123_456_789)) == "2019-03-12T10:00:01.123456789Z")
        #expect(ISO8601.string(Timestamp(nanoseconds: 0)) == "1970-01-01T00:00:00Z")
        #expect(ISO8601.string(t(2000, 1, 1)) == "2000-01-01T00:00:00Z")  // midnight
        #expect(ISO8601.string(t(1999, 12, 31, 23, 59, 59, ns: 999_999_999)) == "1999-12-31T23:59:59.999999999Z")
        #expect(ISO8601.string(t(2024, 2, 29, 12)) == "2024-02-29T12:00:00Z")  // leap day
        #expect(ISO8601.string(Timestamp(nanoseconds: -1)) == "1969-12-31T23:59:59.999999999Z")
        #expect(ISO8601.string(Timestamp(nanoseconds: -500_000_000)) == "1969-12-31T23:59:59.5Z")
        #expect(ISO8601.string(t(1900, 3, 1)) == "1900-03-01T00:00:00Z")
    }

    @Test func parsing() {
        #expect(ISO8601.parse("2019-03-12T10:00:01.25Z") == t(2019, 3, 12, 10, 0, 1, ns: 250_000_000))
        #expect(ISO8601.parse("2019-03-12T10:00:01Z") == t(2019, 3, 12, 10, 0, 1))
        #expect(ISO8601.parse("2019-03-12T10:00:01.000000001Z") == t(2019, 3, 12, 10, 0, 1, ns: 1))
        #expect(ISO8601.parse("2019-03-12T12:00:01+02:00") == t(2019, 3, 12, 10, 0, 1))
        #expect(ISO8601.parse("2019-03-12T09:30:01-00:30") == t(2019, 3, 12, 10, 0, 1))
        #expect(ISO8601.parse("2000-02-29T00:00:00Z") == t(2000, 2, 29))
        #expect(ISO8601.parse("1969-12-31T23:59:59.5Z") == Timestamp(nanoseconds: -500_000_000))
        #expect(ISO8601.parse("1916-12-31T23:59:60Z") == t(1917, 1, 1))  // leap second → next second
        #expect(ISO8601.parse("2261-12-31T23:59:59Z") == t(2261, 12, 31, 23, 59, 59))
        #expect(ISO8601.parse("1678-01-01T00:00:00Z") == t(1678, 1, 1))
    }

    @Test(arguments: [
        "", "2019-03-12", "2019-03-12T10:00:01", "2019-13-01T00:00:00Z", "2019-02-29T00:00:00Z",
        "1900-02-29T00:00:00Z", "2019-04-31T00:00:00Z", "2019-03-12T24:00:00Z", "2019-03-12T10:60:00Z",
        "2019-03-12T10:00:61Z", "2019-03-12T10:00:01.Z", "2019-03-12T10:00:01.1234567891Z",
        "2019-03-12T10:00:01Zjunk", "19-03-12T10:00:01Z", "2019-03-12T10:00:01+0200", "2019-00-10T00:00:00Z",
        // Beyond what 64-bit nanoseconds hold: they must not wrap into another century.
        "2300-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "1600-01-01T00:00:00Z", "2262-04-12T00:00:00Z",
    ])
    func rejects(text: String) {
        #expect(ISO8601.parse(text) == nil)
    }

    @Test func roundTripsManyTimes() {
        var ns: Int64 = -2_000_000_000_000_000_000
        while ns < 4_000_000_000_000_000_000 {
            let time = Timestamp(nanoseconds: ns)
            #expect(ISO8601.parse(ISO8601.string(time)) == time)
            ns += 97_654_321_123_456_789
        }
    }
}

@Suite struct EventEncoderTests {
    let time = CivilTime(year: 2019, month: 3, day: 12, hour: 10, minute: 0, second: 1, nanosecond: 250_000_000).timestamp

    func line(_ event: Event, skipped: Int = 0) -> String {
        var out: [UInt8] = []
        EventEncoder().append(event, skipped: skipped, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    @Test func fullLocation() {
        let fix = Fix(time: time, coordinate: Coordinate(latitude: 52.520008123, longitude: -13.404954),
                      mode: .threeD, altitudeHAE: 80.25, altitudeMSL: 34.5, horizontalAccuracy: 4.2,
                      verticalAccuracy: 7, speed: 1.23456, course: 359.9999)
        #expect(line(.location(fix)) == #"{"type":"location","time":"2019-03-12T10:00:01.25Z","latitude":52.520008123,"longitude":-13.404954,"horizontalAccuracy":4.2,"altitude":34.5,"ellipsoidalAltitude":80.25,"verticalAccuracy":7,"speed":1.235,"course":360,"mode":"3d"}"# + "\n")
    }

    @Test func minimalLocationAndSkipped() {
        let fix = Fix(time: time, coordinate: Coordinate(latitude: -0.0000000001, longitude: 0))
        #expect(line(.location(fix), skipped: 3) == #"{"type":"location","time":"2019-03-12T10:00:01.25Z","latitude":0,"longitude":0,"horizontalAccuracy":null,"mode":"2d","skipped":3}"# + "\n")
    }

    @Test func statusEvents() {
        #expect(line(.status(.fix, time: time)) == #"{"type":"status","state":"fix","time":"2019-03-12T10:00:01.25Z"}"# + "\n")
        #expect(line(.status(.disconnected, time: nil)) == #"{"type":"status","state":"disconnected","time":null}"# + "\n")
        for state in SourceState.allCases {
            var l = line(.status(state, time: nil))
            l.removeLast()
            #expect(try! ServerMessage.decode(l) == .status(state, nil))
        }
    }

    @Test func fixedPoint() {
        func f(_ v: Double, _ d: Int) -> String {
            var out: [UInt8] = []
            DecimalFormat.appendFixed(v, decimals: d, to: &out)
            return String(decoding: out, as: UTF8.self)
        }
        #expect(f(0, 3) == "0")
        #expect(f(-0.0004, 3) == "0")
        #expect(f(-0.0005, 3) == "-0.001")
        #expect(f(1.0005, 3) == "1.001")
        #expect(f(12.3, 3) == "12.3")
        #expect(f(-180, 9) == "-180")
        #expect(f(0.000000001, 9) == "0.000000001")
        #expect(f(179.999999999, 9) == "179.999999999")
        #expect(f(8848.86, 3) == "8848.86")
        #expect(f(1e300, 3) == "1e+300")
        #expect(f(.infinity, 3) == "null")
    }

    /// Encode → decode gives the same fix to the stated precision (1e-9° and 1e-3 m).
    @Test func roundTrip() throws {
        var rng = SystemRandomNumberGenerator()
        for i in 0..<2_000 {
            let fix = Fix(
                time: Timestamp(nanoseconds: Int64.random(in: -1_000_000_000_000_000_000...4_000_000_000_000_000_000, using: &rng)),
                coordinate: Coordinate(latitude: .random(in: -90...90, using: &rng), longitude: .random(in: -180...180, using: &rng)),
                mode: i % 2 == 0 ? .twoD : .threeD,
                altitudeHAE: i % 3 == 0 ? nil : .random(in: -500...9000, using: &rng),
                altitudeMSL: i % 5 == 0 ? nil : .random(in: -500...9000, using: &rng),
                horizontalAccuracy: i % 7 == 0 ? nil : .random(in: 0...5000, using: &rng),
                verticalAccuracy: i % 4 == 0 ? nil : .random(in: 0...5000, using: &rng),
                speed: i % 6 == 0 ? nil : .random(in: 0...400, using: &rng),
                course: i % 8 == 0 ? nil : .random(in: 0..<360, using: &rng))
            var out: [UInt8] = []
            EventEncoder().append(.location(fix), to: &out)
            #expect(out.last == 0x0A)
            guard case .location(let d, let skipped) = try ServerMessage.decode(out.dropLast()) else {
                Issue.record("not a location"); continue
            }
            #expect(skipped == 0)
            #expect(d.time == fix.time)
            #expect(d.mode == fix.mode)
            // Half the last of 9 decimals, plus the rounding of `value · 10^9` and of parsing
            // back: a few ulps of 180° (2.8e-14 each).
            let coordinateTolerance = 5e-10 + 1e-13
            #expect(abs(d.coordinate.latitude - fix.coordinate.latitude) <= coordinateTolerance)
            #expect(abs(d.coordinate.longitude - fix.coordinate.longitude) <= coordinateTolerance)
            func close(_ a: Double?, _ b: Double?) -> Bool {
                switch (a, b) {
                case (nil, nil): true
                case let (x?, y?): abs(x - y) <= 5.0001e-4
                default: false
                }
            }
            #expect(close(d.altitudeHAE, fix.altitudeHAE))
            #expect(close(d.altitudeMSL, fix.altitudeMSL))
            #expect(close(d.horizontalAccuracy, fix.horizontalAccuracy))
            #expect(close(d.verticalAccuracy, fix.verticalAccuracy))
            #expect(close(d.speed, fix.speed))
            #expect(close(d.course, fix.course))
        }
    }

    @Test func doesNotAllocatePerEventOnceGrown() {
        // Indirect check: capacity stays put over many encodes into a cleared buffer.
        var out: [UInt8] = []
        out.reserveCapacity(512)
        let fix = Fix(time: time, coordinate: Coordinate(latitude: 1, longitude: 2), horizontalAccuracy: 3)
        let capacity = out.capacity
        for _ in 0..<10_000 {
            out.removeAll(keepingCapacity: true)
            EventEncoder().append(.location(fix), to: &out)
        }
        #expect(out.capacity == capacity)
    }
}

@Suite struct ServerMessageTests {
    /// `subscribed` carries the session's accuracy (LocationClient.subscribe returned precise
    /// options under an approximate session); an older daemon's reply without it is precise.
    @Test func subscribedCarriesTheAccuracy() throws {
        var approximate = SubscriptionOptions()
        approximate.accuracy = .approximate
        #expect(ServerMessage.subscribed(id: nil, options: approximate).line.hasSuffix(#","accuracy":"approximate"}"# + "\n"))
        let older = #"{"type":"subscribed","id":1,"distanceFilter":0,"desiredAccuracy":null,"minimumInterval":0,"events":["location"]}"#
        guard case .subscribed(_, let o) = try ServerMessage.decode(older) else { Issue.record("not subscribed"); return }
        #expect(o.accuracy == .precise)
        #expect(throws: ServerMessage.DecodingError.self) {
            try ServerMessage.decode(#"{"type":"subscribed","distanceFilter":0,"minimumInterval":0,"events":["location"],"accuracy":"fuzzy"}"#)
        }
    }

    @Test func serverMessagesRoundTrip() throws {
        let t = Timestamp(seconds: 1_552_384_801, nanoseconds: 250_000_000)
        let messages: [ServerMessage] = [
            .hello(ServerHello()),
            .hello(ServerHello(id: .string("h"))),
            .subscribed(id: .number(1), options: SubscriptionOptions(distanceFilter: 10, desiredAccuracy: 50, minimumInterval: 0.5)),
            .subscribed(id: nil, options: SubscriptionOptions()),
            .subscribed(id: nil, options: { var o = SubscriptionOptions(); o.accuracy = .approximate; return o }()),
            .unsubscribed(id: .string("u")),
            .statusReply(StatusReply(id: .number(2), state: .fix, subscribers: 3, source: "gpsd \"local\"", lastFix: t)),
            .statusReply(StatusReply(id: nil, state: .disconnected, subscribers: 0, source: "replay", lastFix: nil)),
            .location(Fix(time: t, coordinate: Coordinate(latitude: 1.5, longitude: 2.25), horizontalAccuracy: 5), skipped: 0),
            .location(Fix(time: t, coordinate: Coordinate(latitude: 1.5, longitude: 2.25)), skipped: 12),
            .status(.noFix, t),
            .error(ProtocolError(.badField, "id must be a number", id: nil)),
        ]
        for m in messages {
            var line = m.line
            #expect(line.last == "\n")
            line.removeLast()
            #expect(try ServerMessage.decode(line) == m)
        }
    }

    @Test func helloShape() {
        #expect(ServerMessage.hello(ServerHello()).line
            == #"{"type":"hello","protocol":1,"server":"locationd","version":"0.1.0","maxLineBytes":65536}"# + "\n")
    }

    @Test func statusReplyShape() {
        let r = StatusReply(id: .string("s"), state: .fix, subscribers: 2, source: "gpsd", lastFix: Timestamp(nanoseconds: 0))
        #expect(ServerMessage.statusReply(r).line
            == #"{"type":"status","id":"s","state":"fix","subscribers":2,"source":"gpsd","lastFix":"1970-01-01T00:00:00Z"}"# + "\n")
    }

    static func statusWithConnections() -> StatusReply {
        var r = StatusReply(id: .number(3), state: .fix, subscribers: 1, source: "gpsd localhost:2947", lastFix: nil)
        r.sessions = 2
        r.regions = 12
        r.regionsSuspended = true
        r.receiver = "watching"
        r.identity = "uid=0 exe=/usr/local/bin/locationctl"
        r.grant = "no session; at most always precise (rule owner)"
        r.connected = 3
        r.connectionsShown = .all
        r.connections = [
            .init(connection: 1, pid: 812, uid: 1000, gid: 1000, executable: "/usr/bin/navit", rule: "nav",
                  session: .init(authorization: .always, accuracy: .precise), subscribed: true),
            .init(connection: 2, pid: 815, uid: 1001, gid: 100, executable: "/opt/weather/bin/weather \"beta\"", rule: "weather",
                  session: .init(authorization: .whenInUse, accuracy: .precise, temporaryPrecise: true, purpose: "radar"),
                  subscribed: false),
            .init(connection: 4, isSelf: true, pid: nil, uid: nil, gid: nil, executable: nil, rule: "default",
                  session: nil, subscribed: false),
        ]
        return r
    }

    @Test func statusReplyWithConnectionsRoundTrips() throws {
        var own = Self.statusWithConnections()
        own.connectionsShown = .own
        own.connections = [own.connections![2]]
        for r in [Self.statusWithConnections(), own] {
            var line = ServerMessage.statusReply(r).line
            line.removeLast()
            #expect(try ServerMessage.decode(line) == .statusReply(r))
        }
    }

    @Test func statusReplyRegionFields() throws {
        let line = ServerMessage.statusReply(Self.statusWithConnections()).line
        #expect(line.contains(#","sessions":2,"regions":12,"regionsSuspended":true,"receiver":"watching","#), "\(line)")
        let bad = #"{"type":"status","state":"fix","subscribers":0,"source":"gpsd","lastFix":null,"regionsSuspended":1}"#
        #expect(throws: (any Error).self) { try ServerMessage.decode(bad) }
    }

    @Test func statusReplyConnectionShape() {
        let line = ServerMessage.statusReply(Self.statusWithConnections()).line
        #expect(line.hasSuffix(#","connected":3,"connectionsShown":"all","connections":["#
            + #"{"connection":1,"self":false,"pid":812,"uid":1000,"gid":1000,"executable":"/usr/bin/navit","rule":"nav","session":{"authorization":"always","accuracy":"precise","temporaryPrecise":false,"purpose":null},"subscribed":true},"#
            + #"{"connection":2,"self":false,"pid":815,"uid":1001,"gid":100,"executable":"/opt/weather/bin/weather \"beta\"","rule":"weather","session":{"authorization":"when-in-use","accuracy":"precise","temporaryPrecise":true,"purpose":"radar"},"subscribed":false},"#
            + #"{"connection":4,"self":true,"pid":null,"uid":null,"gid":null,"executable":null,"rule":"default","session":null,"subscribed":false}]}"# + "\n"),
            "\(line)")
    }

    @Test(arguments: [
        (#""connections":{}"#, "connections must be an array, not an object"),
        (#""connections":[3]"#, "connections[0] must be an object, not a number"),
        (#""connections":[{"rule":"x"}]"#, "connections[0] has no connection"),
        (#""connections":[{"connection":1}]"#, "connections[0] has no rule"),
        (#""connections":[{"connection":1,"rule":"x","pid":-1.5}]"#, "connections[0].pid -1.5 is not a valid pid"),
        (#""connections":[{"connection":1,"rule":"x","uid":-1}]"#, "connections[0].uid -1 is not a valid uid"),
        (#""connections":[{"connection":1,"rule":"x","session":{"authorization":"sometimes","accuracy":"precise"}}]"#,
         "connections[0].session has no valid authorization; expected denied, when-in-use or always"),
        (#""connections":[{"connection":1,"rule":"x","session":"yes"}]"#, "connections[0].session must be an object or null, not a string"),
        (#""connections":[{"connection":1,"rule":"x","subscribed":1}]"#, "connections[0].subscribed must be a boolean, not a number"),
        (#""connectionsShown":"some""#, #"connectionsShown "some" is not all or own"#),
    ])
    func malformedConnectionListsAreNamed(fragment: String, message: String) {
        let line = #"{"type":"status","state":"fix","subscribers":0,"source":"s","lastFix":null,"# + fragment + "}"
        var expected = ServerMessage.DecodingError(message)
        expected.type = "status"  // what a client needs to skip it (docs/protocol.md, "Client library")
        #expect(throws: expected) { try ServerMessage.decode(line) }
    }

    @Test func rejectsGarbage() {
        #expect(throws: ServerMessage.DecodingError.self) { try ServerMessage.decode("{}") }
        #expect(throws: ServerMessage.DecodingError.self) { try ServerMessage.decode(#"{"type":"location"}"#) }
        #expect(throws: ServerMessage.DecodingError.self) { try ServerMessage.decode(#"{"type":"nope"}"#) }
    }
}
