import LocationCore

/// Lines of the background queue (docs/protocol.md, "Background delivery"): an event that
/// waited for its program carries `"seq":N`, a per-program sequence number; a gap the bound
/// forced is told by an `overflow` event; `ack` lets the daemon forget what was received.
extension EventEncoder {
    /// The event's usual line with `"seq":N` as its last field.
    public func appendQueued(_ event: Event, seq: UInt64, to out: inout [UInt8]) {
        append(event, to: &out)
        // Every event line ends with `}\n`: the field goes in front of them.
        out.removeLast(2)
        Self.appendSeq(seq, to: &out)
    }

    /// `{"type":"overflow","lost":N,"seq":K}`: events K-N+1…K were dropped, oldest first,
    /// because the program's queue was full while it was away.
    public static func appendOverflow(lost: UInt64, seq: UInt64, to out: inout [UInt8]) {
        JSONWriter.appendASCII("{\"type\":\"overflow\",\"lost\":", to: &out)
        DecimalFormat.appendInteger(Int64(clamping: lost), to: &out)
        appendSeq(seq, to: &out)
    }

    static func appendSeq(_ seq: UInt64, to out: inout [UInt8]) {
        JSONWriter.appendASCII(",\"seq\":", to: &out)
        DecimalFormat.appendInteger(Int64(clamping: seq), to: &out)
        JSONWriter.appendASCII("}\n", to: &out)
    }
}

extension Request {
    /// `{"type":"ack","seq":N}`: a sequence number is a positive integer below 2^53 (exact in
    /// a JSON number).
    static func decodeAck(_ object: [String: JSONValue], id: RequestID?) throws(ProtocolError) -> Request {
        guard let value = object["seq"] else {
            throw ProtocolError(.missingField, "missing field seq (the last sequence number received)", id: id)
        }
        guard case .number(let n) = value else {
            throw ProtocolError(.badField, "seq must be a number, not \(value.kindName)", id: id)
        }
        guard n >= 0, n <= 9_007_199_254_740_991, n == n.rounded() else {
            throw ProtocolError(.outOfRange, "seq \(JSONWriter.numberText(n)) is not a sequence number; expected an integer 0…2^53-1", id: id)
        }
        return .ack(id: id, seq: UInt64(n))
    }
}

extension ServerMessage {
    /// `{"type":"acked","seq":N,"queued":M}`.
    static func appendAcked(id: RequestID?, seq: UInt64, queued: Int, to out: inout [UInt8]) {
        JSONWriter.appendASCII("{\"type\":\"acked\"", to: &out)
        if let id {
            JSONWriter.appendASCII(",\"id\":", to: &out)
            id.append(to: &out)
        }
        JSONWriter.appendASCII(",\"seq\":", to: &out)
        DecimalFormat.appendInteger(Int64(clamping: seq), to: &out)
        JSONWriter.appendASCII(",\"queued\":", to: &out)
        DecimalFormat.appendInteger(Int64(queued), to: &out)
        JSONWriter.appendASCII("}\n", to: &out)
    }

    static func sequenceNumber(_ o: [String: JSONValue]) throws(DecodingError) -> UInt64? {
        guard o["seq"] != nil else { return nil }
        let n = try int(o, "seq")
        guard n >= 0 else { throw DecodingError("seq \(n) is negative") }
        return UInt64(n)
    }
}

extension ServerMessage {
    /// The sequence number to acknowledge for a queued event or an overflow; nil otherwise.
    public var queueSequence: UInt64? {
        switch self {
        case .queued(let seq, _), .overflow(_, let seq): seq
        default: nil
        }
    }
}
