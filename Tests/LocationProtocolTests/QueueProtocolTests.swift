import LocationCore
import LocationProtocol
import Testing

/// The background queue's lines (docs/protocol.md, "Background delivery").
@Suite struct QueueProtocolTests {
    static let exit = RegionEvent(region: "home", kind: .exit, time: CivilTime(year: 2026, month: 5, day: 28, hour: 21).timestamp,
                                  coordinate: Coordinate(latitude: 52.5, longitude: 13.4))

    @Test func aQueuedEventIsTheUsualLineWithSeqLast() throws {
        var plain: [UInt8] = [], queued: [UInt8] = []
        EventEncoder().append(.region(Self.exit), to: &plain)
        EventEncoder().appendQueued(.region(Self.exit), seq: 41, to: &queued)
        let text = String(decoding: queued, as: UTF8.self)
        #expect(text == String(decoding: plain.dropLast(2), as: UTF8.self) + ",\"seq\":41}\n")
        #expect(try ServerMessage.decode(String(text.dropLast())) == .queued(seq: 41, .region(Self.exit)))
        // The same line through ServerMessage's own encoder.
        #expect(ServerMessage.queued(seq: 41, .region(Self.exit)).line == text)
        // Without seq it is a live event.
        #expect(try ServerMessage.decode(String(decoding: plain.dropLast(), as: UTF8.self)) == .region(Self.exit))
    }

    /// A durable subscription's location is numbered like any queued event (docs/protocol.md,
    /// "Durable subscriptions").
    @Test func aNumberedLocationDecodesAsQueued() throws {
        let fix = Fix(time: Self.exit.time, coordinate: Coordinate(latitude: 52.5, longitude: 13.4), horizontalAccuracy: 4)
        var line: [UInt8] = []
        EventEncoder().appendQueued(.location(fix), seq: 7, to: &line)
        #expect(try ServerMessage.decode(String(decoding: line.dropLast(), as: UTF8.self)) == .queued(seq: 7, .location(fix, skipped: 0)))
    }

    @Test func durableIsAskedAndEchoedOnlyWhenSet() throws {
        var durable = SubscriptionOptions(events: [.location, .visits])
        durable.durable = true
        let request = Request.subscribe(id: .number(1), options: durable)
        #expect(request.line.contains(#""durable":true"#))
        #expect(try Request.decode(Array(request.line.utf8.dropLast())) == request)
        #expect(!Request.subscribe(id: nil, options: SubscriptionOptions()).line.contains("durable"))
        #expect(throws: ProtocolError.self) { try Request.decode(Array(#"{"type":"subscribe","durable":1}"#.utf8)) }
        let reply = ServerMessage.subscribed(id: .number(1), options: durable)
        #expect(reply.line.contains(#""durable":true"#))
        #expect(try ServerMessage.decode(String(reply.line.dropLast())) == reply)
        #expect(!ServerMessage.subscribed(id: nil, options: SubscriptionOptions()).line.contains("durable"))
    }

    @Test func overflowAndAckedRoundTrip() throws {
        var line: [UInt8] = []
        EventEncoder.appendOverflow(lost: 3, seq: 40, to: &line)
        #expect(String(decoding: line, as: UTF8.self) == #"{"type":"overflow","lost":3,"seq":40}"# + "\n")
        #expect(try ServerMessage.decode(String(decoding: line.dropLast(), as: UTF8.self)) == .overflow(lost: 3, seq: 40))
        let acked = ServerMessage.acked(id: .number(7), seq: 42, queued: 0)
        #expect(acked.line == #"{"type":"acked","id":7,"seq":42,"queued":0}"# + "\n")
        #expect(try ServerMessage.decode(String(acked.line.dropLast())) == acked)
    }

    /// Values past what the protocol carries are refused, never a crash of the encoding or
    /// decoding process: an ack above 2^53-1 goes out clamped and the daemon answers outOfRange;
    /// a `skipped` that is no count is a decoding error.
    @Test func outOfRangeNumbersAreRefusedNotFatal() throws {
        let line = Request.ack(id: nil, seq: .max).line
        #expect(line == #"{"type":"ack","seq":9223372036854775807}"# + "\n")
        #expect(throws: ProtocolError.self) { try Request.decode(String(line.dropLast())) }
        var queued: [UInt8] = []
        EventEncoder().appendQueued(.region(Self.exit), seq: .max, to: &queued)
        #expect(String(decoding: queued, as: UTF8.self).hasSuffix(#""seq":9223372036854775807}"# + "\n"))
        func location(skipped: String) -> String {
            #"{"type":"location","time":"2026-05-28T21:00:00Z","latitude":1,"longitude":2,"mode":"3d","skipped":"# + skipped + "}"
        }
        #expect(throws: ServerMessage.DecodingError.self) { try ServerMessage.decode(location(skipped: "1e300")) }
        #expect(throws: ServerMessage.DecodingError.self) { try ServerMessage.decode(location(skipped: "-1")) }
        guard case .location(_, 2) = try ServerMessage.decode(location(skipped: "2")) else {
            Issue.record("the same line with a real count did not decode"); return
        }
    }

    @Test func ackRequestRoundTrips() throws {
        let request = try Request.decode(#"{"type":"ack","id":7,"seq":42}"#)
        #expect(request == .ack(id: .number(7), seq: 42))
        #expect(try Request.decode(String(request.line.dropLast())) == request)
    }

    @Test(arguments: [
        (#"{"type":"ack","id":1}"#, ErrorCode.missingField, "missing field seq"),
        (#"{"type":"ack","id":1,"seq":"4"}"#, .badField, "seq must be a number, not a string"),
        (#"{"type":"ack","id":1,"seq":-1}"#, .outOfRange, "seq -1 is not a sequence number"),
        (#"{"type":"ack","id":1,"seq":2.5}"#, .outOfRange, "seq 2.5 is not a sequence number"),
        (#"{"type":"ack","id":1,"seq":1e300}"#, .outOfRange, "expected an integer 0…2^53-1"),
    ])
    func badAcksAreClearErrors(line: String, code: ErrorCode, text: String) {
        expectDecodeError(line, code: code, text: text)
    }
}
