import LocationCore
import Testing
@testable import LocationProtocol

@Suite struct RequestTests {
    func error(_ line: String) -> ProtocolError? {
        do { _ = try Request.decode(line); return nil } catch { return error }
    }

    @Test func requests() throws {
        #expect(try Request.decode(#"{"type":"hello"}"#) == .hello(id: nil))
        #expect(try Request.decode(#"{"type":"hello","protocol":1,"id":"h"}"#) == .hello(id: .string("h")))
        #expect(try Request.decode(#"{"type":"subscribe","id":7}"#) == .subscribe(id: .number(7), options: SubscriptionOptions()))
        #expect(try Request.decode(#"{"type":"subscribe","distanceFilter":25,"desiredAccuracy":10.5,"minimumInterval":2,"id":"a"}"#)
            == .subscribe(id: .string("a"), options: SubscriptionOptions(distanceFilter: 25, desiredAccuracy: 10.5, minimumInterval: 2)))
        #expect(try Request.decode(#"{"type":"subscribe","desiredAccuracy":null}"#) == .subscribe(id: nil, options: SubscriptionOptions()))
        #expect(try Request.decode(#"{"type":"unsubscribe","id":1.5}"#) == .unsubscribe(id: .number(1.5)))
        #expect(try Request.decode(#"  {"type":"status","extra":[1,2]}  "#) == .status(id: nil))
    }

    @Test func encodeRoundTrip() throws {
        let requests: [Request] = [
            .hello(id: .number(1)), .status(id: .string("x\"y")), .unsubscribe(id: nil),
            .subscribe(id: .number(3), options: SubscriptionOptions(distanceFilter: 5, desiredAccuracy: 20, minimumInterval: 1.5)),
        ]
        for r in requests {
            var line = r.line
            #expect(line.last == "\n")
            line.removeLast()
            #expect(try Request.decode(line) == r)
        }
    }

    /// A purpose out of range says how long it is.
    @Test func purposeOutOfRangeNamesItsLength() {
        expectDecodeError(#"{"type":"session.start","id":1,"purpose":""}"#, code: .outOfRange,
                          text: "purpose of 0 bytes is out of range; a purpose key has 1…256 bytes")
        expectDecodeError(#"{"type":"session.start","id":1,"purpose":"\#(String(repeating: "é", count: 129))"}"#, code: .outOfRange,
                          text: "purpose of 258 bytes is out of range")
        expectDecodeError(#"{"type":"session.start","id":1,"purpose":7}"#, code: .badField, text: "purpose must be a string, not a number")
    }

    @Test func badJSON() {
        let e = error(#"{"type":"status""#)
        #expect(e?.code == .badJSON)
        #expect(e?.id == nil)
        #expect(e?.message.contains("at byte 16") == true)
    }

    @Test func notAnObject() {
        #expect(error("[1]")?.code == .notAnObject)
        #expect(error("\"status\"")?.code == .notAnObject)
    }

    @Test func missingType() {
        let e = error(#"{"id":4}"#)
        #expect(e?.code == .missingField)
        #expect(e?.id == .number(4))
        #expect(e?.message.contains("type") == true)
    }

    @Test func badFields() {
        #expect(error(#"{"type":5,"id":"x"}"#) == ProtocolError(.badField, "type must be a string, not a number", id: .string("x")))
        #expect(error(#"{"type":"subscribe","distanceFilter":"far","id":2}"#)
            == ProtocolError(.badField, "distanceFilter must be a number, not a string", id: .number(2)))
        #expect(error(#"{"type":"subscribe","minimumInterval":true}"#)?.code == .badField)
        #expect(error(#"{"type":"status","id":{}}"#)?.code == .badField)
        #expect(error(#"{"type":"hello","protocol":"1"}"#)?.code == .badField)
    }

    @Test func outOfRange() throws {
        #expect(error(#"{"type":"subscribe","distanceFilter":-3,"id":1}"#)
            == ProtocolError(.outOfRange, "distanceFilter -3 is out of range; expected 0…1000000 metres", id: .number(1)))
        #expect(error(#"{"type":"subscribe","desiredAccuracy":1e7}"#)?.message
            == "desiredAccuracy 10000000 is out of range; expected 0…1000000 metres")
        #expect(error(#"{"type":"subscribe","minimumInterval":86400.5}"#)?.message
            == "minimumInterval 86400.5 is out of range; expected 0…86400 seconds")
        #expect(error(#"{"type":"hello","protocol":2}"#)?.code == .outOfRange)
        // A string id as long as a line would make every reply echoing it longer than a client
        // accepts (a page of `regions.list` is the id plus at least one region).
        let long = String(repeating: "é", count: 129)
        #expect(error(#"{"type":"status","id":"\#(long)"}"#)
            == ProtocolError(.outOfRange, "id of 258 bytes is too long; a string id has at most 256 bytes", id: nil))
        let longest = String(repeating: "x", count: 256)
        #expect(try Request.decode(#"{"type":"status","id":"\#(longest)"}"#).id == .string(longest))
    }

    @Test func unknownType() {
        let e = error(#"{"type":"launch","id":"m"}"#)
        #expect(e?.code == .unknownType)
        #expect(e?.id == .string("m"))
        #expect(e?.message.contains("\"launch\"") == true)
    }

    @Test func lineTooLong() {
        let line = #"{"type":"status","pad":""# + String(repeating: "x", count: maxLineBytes) + #""}"#
        #expect(error(line)?.code == .lineTooLong)
    }

    @Test func errorReplyEncoding() {
        let e = ProtocolError(.outOfRange, "x \"quoted\"", id: .number(9))
        #expect(ServerMessage.error(e).line == #"{"type":"error","id":9,"code":"outOfRange","message":"x \"quoted\""}"# + "\n")
        #expect(ServerMessage.error(ProtocolError(.flood, "m")).line == #"{"type":"error","id":null,"code":"flood","message":"m"}"# + "\n")
    }

    @Test func everyErrorCodeRoundTrips() throws {
        for code in ErrorCode.allCases {
            let e = ProtocolError(code, "m", id: .string("i"))
            var line = ServerMessage.error(e).line
            line.removeLast()
            #expect(try ServerMessage.decode(line) == .error(e))
        }
    }
}
