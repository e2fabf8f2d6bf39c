/// What the bridge owes: messages waiting for the broker, the broker's acknowledgements
/// (PUBACK, by message id) and which of locationd's sequence numbers may be acknowledged to
/// the daemon (docs/mqtt.md, "Durability"). Pure; the bridge feeds it and does what it says.
///
/// A `seq` is acknowledged to locationd only when it and every lower one are done: PUBACKed,
/// or never to be published (an event the configuration does not publish). Numbered events are
/// taken only in order, one after another: one that does not follow the last (a gap), or that
/// finds the outbox full, is refused with every later one, and the bridge subscribes again once
/// the outbox has drained (`needsResubscribe`): locationd keeps them and writes them again, so
/// the bound costs nothing and no acknowledgement ever passes an event it did not publish.
/// Messages without a `seq` (replies to commands, waypoint lists) are published the same way
/// but owe locationd nothing; past the bound the oldest of them go, counted for a `lost` message.
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
    /// The last numbered event taken since the subscription (re)started; nil: none yet.
    public private(set) var lastTaken: UInt64?
    /// A numbered event was refused: the rest come again after a new subscribe.
    public private(set) var needsResubscribe = false
    /// Messages in flight when the connection to the broker dropped. libmosquitto sends them
    /// again after its reconnect, but only after the connect callback, and it sends a message
    /// handed to it at that moment at once: handed before they are PUBACKed, a newer message
    /// would reach the broker before them. `next` is nil until they are all PUBACKed.
    public private(set) var resending: Set<Int32> = []
    public let limit: Int

    public init(limit: Int) { self.limit = max(1, limit) }

    public var waiting: Int { outbox.count - outboxStart }
    public var unacknowledged: Int { waiting + inFlight.count }

    /// An event arrived with `seq` (nil: not from the durable queue) and, when it is published,
    /// its message. Past the bound the oldest waiting message is dropped and counted.
    /// `first`: the lowest seq the message accounts for (an `overflow` for `lost` events ending
    /// at `seq`: `seq - lost + 1`); `seq` itself otherwise. Returns false when a numbered
    /// event was refused (`needsResubscribe`).
    @discardableResult
    public mutating func received(_ message: OutgoingMessage?, seq: UInt64?, first: UInt64? = nil) -> Bool {
        if let seq {
            if needsResubscribe { return false }
            if let last = lastTaken, seq <= last { return true }  // already taken (a backlog written again)
            if seq <= acknowledged { lastTaken = seq; return true }  // published and acknowledged before
            if let last = lastTaken, (first ?? seq) > last + 1 {
                needsResubscribe = true  // a gap: what is missing comes again from locationd
                return false
            }
            if message != nil && waiting >= limit {
                needsResubscribe = true
                return false
            }
            lastTaken = seq
            pending.append((seq, message == nil))
        }
        guard let message else { return true }
        outbox.append(Entry(message: message, seq: seq))
        while waiting > limit {
            let dropped = outbox[outboxStart]
            if dropped.seq != nil { break }  // only possible while numbered ones fill it: they stay
            outboxStart += 1
            lostSinceReport += 1
        }
        compact()
        return true
    }

    /// The next message to hand to the client, if any; `handed(mid:)` or `putBack()` follows.
    /// Nil while messages of an earlier connection are being sent again (`resending`).
    public var next: Entry? { waiting > 0 && resending.isEmpty ? outbox[outboxStart] : nil }

    /// The connection to the broker dropped: what is in flight goes again first.
    public mutating func brokerDisconnected() {
        resending.formUnion(inFlight.keys)
    }

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
        resending.remove(mid)
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

    /// Whether to subscribe again now: a numbered event was refused, and nothing numbered is
    /// waiting or in flight (so the backlog written again brings as few duplicates as can be).
    public var shouldResubscribe: Bool {
        needsResubscribe && waiting == 0 && !inFlight.values.contains { $0 != nil }
    }

    /// A new subscription (a reconnect to locationd, or `shouldResubscribe`): locationd writes
    /// everything above its last acknowledgement again, from its oldest. Numbered messages
    /// not yet handed to the client go (they come again); those in flight stay with the client
    /// (libmosquitto resends them) but acknowledge nothing: their copies in the backlog will.
    public mutating func resubscribed() {
        pending.removeAll()
        pendingStart = 0
        var kept: [Entry] = []
        for e in outbox[outboxStart...] where e.seq == nil { kept.append(e) }
        outbox = kept
        outboxStart = 0
        for (mid, seq) in inFlight where seq != nil { inFlight[mid] = .some(nil) }
        lastTaken = nil
        needsResubscribe = false
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
