import LocationCore
import Testing
@testable import LocationProtocol

/// `raw`, `pausesWhenStationary`, `activityType` and the `paused`/`resumed` events on the wire
/// (docs/protocol.md).
@Suite struct StreamOptionsTests {
    static var both: SubscriptionOptions {
        var o = SubscriptionOptions(distanceFilter: 10)
        o.raw = true
        o.pausesWhenStationary = true
        o.activityType = .automotive
        return o
    }

    @Test func subscribeDecodesThem() throws {
        #expect(try Request.decode(#"{"type":"subscribe","raw":true,"pausesWhenStationary":true,"activityType":"automotive","distanceFilter":10}"#)
            == .subscribe(id: nil, options: Self.both))
        // Absent, null or false: the defaults.
        #expect(try Request.decode(#"{"type":"subscribe","raw":false,"pausesWhenStationary":null,"activityType":null}"#)
            == .subscribe(id: nil, options: SubscriptionOptions()))
        var fitness = SubscriptionOptions()
        fitness.pausesWhenStationary = true
        fitness.activityType = .fitness
        #expect(try Request.decode(#"{"type":"subscribe","pausesWhenStationary":true,"activityType":"fitness"}"#)
            == .subscribe(id: nil, options: fitness))
    }

    @Test func badValuesAreRefusedWithTheRequestsID() {
        expectDecodeError(#"{"type":"subscribe","id":1,"raw":1}"#, code: .badField, text: "raw must be true or false, not a number")
        expectDecodeError(#"{"type":"subscribe","id":1,"pausesWhenStationary":"yes"}"#, code: .badField,
                          text: "pausesWhenStationary must be true or false, not a string")
        expectDecodeError(#"{"type":"subscribe","id":1,"activityType":"bicycle"}"#, code: .outOfRange,
                          text: "activityType \"bicycle\" is not one; expected automotive, fitness or other")
        expectDecodeError(#"{"type":"subscribe","id":1,"activityType":3}"#, code: .badField, text: "activityType must be a string, not a number")
    }

    @Test func subscribeAndSubscribedCarryThemOnlyWhenAsked() throws {
        let request = Request.subscribe(id: .number(1), options: Self.both).line
        #expect(request == #"{"type":"subscribe","distanceFilter":10,"minimumInterval":0,"raw":true,"pausesWhenStationary":true,"activityType":"automotive","id":1}"# + "\n")
        #expect(try Request.decode(String(request.dropLast())) == .subscribe(id: .number(1), options: Self.both))
        #expect(!Request.subscribe(id: nil, options: SubscriptionOptions()).line.contains("raw"))

        let reply = ServerMessage.subscribed(id: .number(1), options: Self.both)
        #expect(reply.line == #"{"type":"subscribed","id":1,"distanceFilter":10,"desiredAccuracy":null,"minimumInterval":0,"events":["location"],"raw":true,"pausesWhenStationary":true,"activityType":"automotive","accuracy":"precise"}"# + "\n")
        #expect(try ServerMessage.decode(String(reply.line.dropLast())) == reply)
        let plain = ServerMessage.subscribed(id: nil, options: SubscriptionOptions())
        #expect(!plain.line.contains("raw") && !plain.line.contains("pauses"))
    }

    @Test func pauseEventsRoundTrip() throws {
        let t = try #require(ISO8601.parse("2026-06-01T07:02:00.5Z"))
        var out: [UInt8] = []
        EventEncoder().append(.paused(t), to: &out)
        EventEncoder().append(.resumed(t.adding(seconds: 10)), to: &out)
        #expect(String(decoding: out, as: UTF8.self)
            == "{\"type\":\"paused\",\"time\":\"2026-06-01T07:02:00.5Z\"}\n{\"type\":\"resumed\",\"time\":\"2026-06-01T07:02:10.5Z\"}\n")
        #expect(try ServerMessage.decode(#"{"type":"paused","time":"2026-06-01T07:02:00.5Z"}"#) == .paused(t))
        #expect(try ServerMessage.decode(#"{"type":"resumed","time":"2026-06-01T07:02:10.5Z"}"#) == .resumed(t.adding(seconds: 10)))
        #expect(ServerMessage.paused(t).line == "{\"type\":\"paused\",\"time\":\"2026-06-01T07:02:00.5Z\"}\n")
        #expect(throws: ServerMessage.DecodingError.self) { try ServerMessage.decode(#"{"type":"paused"}"#) }
    }
}
