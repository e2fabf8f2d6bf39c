/// What the bridge owes: messages waiting for the broker, the broker's acknowledgements
/// (PUBACK, by message id) and which of locationd's sequence numbers may be acknowledged to
/// the daemon (docs/mqtt.md, "Durability"). Pure; the bridge feeds it and does what it says.
///
/// A `seq` is acknowledged to locationd only when it and every lower one are done: PUBACKed,
/// or never to be published (an event the configuration does not publish, or one dropped at
/// the bound and counted in a `lost` message). Messages without a `seq` (replies to commands,
/// waypoint lists) are published the same way but owe locationd nothing.
public struct DeliveryLedger: Sendable {
    public struct Entry: Hashable, Sendable {
        public var message: OutgoingMessage
        public var seq: UInt64?
    }

    /// Messages not yet handed to the MQTT client, oldest first.
    public private(set) var outbox: [Entry] = []
    private var outboxStart = 0
    /// Handed to the client, waiting for their PUBACK: message id → seq (nil: none).
    public private(set) var inFlight: [Int32: UInt64?] = [:]
    /// Sequence numbers received and not yet done, in order, with whether each is done.
    private var pending: [(seq: UInt64, done: Bool)] = []
    private var pendingStart = 0
    /// The highest seq acknowledged to locationd (or to be).
    public private(set) var acknowledged: UInt64 = 0
    /// Messages dropped at the bound since the last `takeLost()`.
    public private(set) var lostSinceReport: UInt64 = 0
    public let limit: Int

    public init(limit: Int) { self.limit = max(1, limit) }

    public var waiting: Int { outbox.count - outboxStart }
    public var unacknowledged: Int { waiting + inFlight.count }

    /// An event arrived with `seq` (nil: not from the durable queue) and, when it is published,
    /// its message. Past the bound the oldest waiting message is dropped and counted.
    public mutating func received(_ message: OutgoingMessage?, seq: UInt64?) {
        if let seq {
            guard seq > acknowledged, pending.last.map({ seq > $0.seq }) ?? true else { return }  // a duplicate from a backlog
            pending.append((seq, message == nil))
        }
        guard let message else { return }
        outbox.append(Entry(message: message, seq: seq))
        while waiting > limit {
            let dropped = outbox[outboxStart]
            outboxStart += 1
            lostSinceReport += 1
            if let s = dropped.seq { markDone(s) }
        }
        compact()
    }

    /// The next message to hand to the client, if any; `handed(mid:)` or `putBack()` follows.
    public var next: Entry? { waiting > 0 ? outbox[outboxStart] : nil }

    /// The client took `next` under message id `mid`.
    public mutating func handed(mid: Int32) {
        let e = outbox[outboxStart]
        outboxStart += 1
        inFlight[mid] = e.seq
        compact()
    }

    /// The broker acknowledged message `mid`. Returns the seq now to acknowledge to locationd,
    /// if it moved.
    public mutating func puback(mid: Int32) -> UInt64? {
        guard let entry = inFlight.removeValue(forKey: mid) else { return nil }
        if let seq = entry { markDone(seq) }
        return advance()
    }

    /// A received seq that will not be published. Returns the seq to acknowledge, if it moved.
    public mutating func skipped(seq: UInt64) -> UInt64? {
        markDone(seq)
        return advance()
    }

    /// The count of messages lost at the bound since the last call (for a `lost` message).
    public mutating func takeLost() -> UInt64 {
        defer { lostSinceReport = 0 }
        return lostSinceReport
    }

    /// The in-flight messages, when a client is replaced: libmosquitto keeps and resends its
    /// own while it lives, so only a new client needs them again (none here: one client).
    /// A new connection to locationd restarts the numbering of what it resends: forget
    /// pending seqs above the acknowledged one (they will come again in the backlog).
    public mutating func locationdReconnected() {
        pending.removeAll()
        pendingStart = 0
        var kept: [Entry] = []
        for e in outbox[outboxStart...] where e.seq == nil { kept.append(e) }
        outbox = kept
        outboxStart = 0
        for (mid, seq) in inFlight where seq != nil { inFlight[mid] = .some(nil) }
    }

    private mutating func markDone(_ seq: UInt64) {
        // Binary search: pending is sorted by seq.
        var lo = pendingStart, hi = pending.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if pending[mid].seq < seq { lo = mid + 1 } else { hi = mid }
        }
        if lo < pending.count, pending[lo].seq == seq { pending[lo].done = true }
    }

    private mutating func advance() -> UInt64? {
        var moved: UInt64?
        while pendingStart < pending.count, pending[pendingStart].done {
            moved = pending[pendingStart].seq
            pendingStart += 1
        }
        if let moved { acknowledged = moved }
        compact()
        return moved
    }

    private mutating func compact() {
        if outboxStart > 64 && outboxStart * 2 > outbox.count {
            outbox.removeFirst(outboxStart)
            outboxStart = 0
        }
        if pendingStart > 64 && pendingStart * 2 > pending.count {
            pending.removeFirst(pendingStart)
            pendingStart = 0
        }
    }
}
