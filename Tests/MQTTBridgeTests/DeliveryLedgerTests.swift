import OwnTracks
import Testing

/// Which of locationd's sequence numbers the bridge may acknowledge, and the bound of what it
/// holds while the broker is away (docs/mqtt.md, "Durability").
@Suite struct DeliveryLedgerTests {
    func message(_ n: Int) -> OutgoingMessage { OutgoingMessage(topic: "t", payload: Array("\(n)".utf8), retain: false) }

    /// Hands every waiting message to the "client", numbering them from `mid`.
    func handAll(_ ledger: inout DeliveryLedger, from mid: inout Int32) -> [Int32] {
        var mids: [Int32] = []
        while ledger.next != nil { ledger.handed(mid: mid); mids.append(mid); mid += 1 }
        return mids
    }

    @Test func aSeqIsAcknowledgedOnlyWhenItAndEveryLowerOneArePubacked() {
        var ledger = DeliveryLedger(limit: 10)
        var mid: Int32 = 1
        for seq in UInt64(5)...7 { ledger.received(message(Int(seq)), seq: seq) }
        let mids = handAll(&ledger, from: &mid)
        #expect(ledger.puback(mid: mids[1]) == nil, "6 before 5: nothing yet")
        #expect(ledger.puback(mid: mids[0]) == 6, "5 and 6 done")
        #expect(ledger.puback(mid: mids[0]) == nil, "a PUBACK twice changes nothing")
        #expect(ledger.puback(mid: mids[2]) == 7)
        #expect(ledger.acknowledged == 7 && ledger.unacknowledged == 0)
    }

    @Test func unpublishedEventsAndMessagesWithoutSeqDoNotHoldAcknowledgementsBack() {
        var ledger = DeliveryLedger(limit: 10)
        var mid: Int32 = 1
        ledger.received(message(1), seq: 1)
        ledger.received(nil, seq: 2)  // not published (e.g. a dwell event)
        ledger.received(message(0), seq: nil)  // a reply to a command
        let mids = handAll(&ledger, from: &mid)
        #expect(ledger.skipped(seq: 2) == nil, "1 still in flight")
        #expect(ledger.puback(mid: mids[1]) == nil, "a message without seq acknowledges nothing")
        #expect(ledger.puback(mid: mids[0]) == 2)
    }

    @Test func aBacklogResentAfterAReconnectIsNotPublishedTwiceOnceAcknowledged() {
        var ledger = DeliveryLedger(limit: 10)
        var mid: Int32 = 1
        ledger.received(message(1), seq: 1)
        ledger.received(message(2), seq: 2)
        let mids = handAll(&ledger, from: &mid)
        #expect(ledger.puback(mid: mids[0]) == 1)
        ledger.resubscribed()
        // locationd resends everything above its last ack: 2 again, then 3.
        ledger.received(message(1), seq: 1)
        ledger.received(message(2), seq: 2)
        ledger.received(message(3), seq: 3)
        #expect(ledger.waiting == 2, "1 was acknowledged: dropped; 2 and 3 published (2 again)")
        #expect(ledger.puback(mid: mids[1]) == nil, "the old copy of 2 no longer counts")
        let again = handAll(&ledger, from: &mid)
        #expect(ledger.puback(mid: again[0]) == 2)
        #expect(ledger.puback(mid: again[1]) == 3)
    }

    /// libmosquitto resends what was in flight only after its connect callback, and sends a
    /// message handed to it then at once: nothing newer is handed until those are PUBACKed, or
    /// the newer would reach the broker first (a seq arriving after later ones).
    @Test func afterABrokerReconnectNothingNewIsHandedBeforeTheResentArePubacked() {
        var ledger = DeliveryLedger(limit: 10)
        var mid: Int32 = 1
        ledger.received(message(1), seq: 1)
        ledger.received(message(2), seq: 2)
        let old = handAll(&ledger, from: &mid)
        ledger.brokerDisconnected()
        for seq in UInt64(3)...5 { ledger.received(message(Int(seq)), seq: seq) }
        #expect(ledger.next == nil, "1 and 2 go again first")
        #expect(ledger.puback(mid: old[1]) == nil)
        #expect(ledger.next == nil, "1 is still being sent again")
        #expect(ledger.puback(mid: old[0]) == 2)
        #expect(ledger.next?.seq == 3)
        let new = handAll(&ledger, from: &mid)
        #expect(new.count == 3)
        ledger.brokerDisconnected()
        ledger.resubscribed()  // in flight without a seq now: still resent first
        ledger.received(message(6), seq: 6)
        #expect(ledger.next == nil)
        for m in new { _ = ledger.puback(mid: m) }
        #expect(ledger.next != nil)
    }

    @Test func aFullOutboxRefusesNumberedEventsUntilASubscribeWritesThemAgain() {
        var ledger = DeliveryLedger(limit: 3)
        for seq in UInt64(1)...5 { ledger.received(message(Int(seq)), seq: seq) }
        #expect(ledger.waiting == 3, "4 and 5 refused: locationd keeps them")
        #expect(ledger.needsResubscribe && !ledger.shouldResubscribe, "not before the outbox drained")
        var mid: Int32 = 1
        let mids = handAll(&ledger, from: &mid)
        #expect(!ledger.shouldResubscribe, "not while they are in flight")
        for m in mids { _ = ledger.puback(mid: m) }
        #expect(ledger.acknowledged == 3, "never past what was published")
        #expect(ledger.shouldResubscribe)
        ledger.resubscribed()
        for seq in UInt64(4)...6 { ledger.received(message(Int(seq)), seq: seq) }
        #expect(ledger.waiting == 3 && ledger.next?.seq == 4)
        #expect(ledger.takeLost() == 0, "nothing numbered is ever dropped by the bridge")
    }

    @Test func aGapIsNeverAcknowledgedOver() {
        var ledger = DeliveryLedger(limit: 10)
        ledger.received(message(1), seq: 1)
        let third = ledger.received(message(3), seq: 3)
        #expect(!third, "2 is missing")
        let fourth = ledger.received(message(4), seq: 4)
        #expect(!fourth, "and so is everything after it, until a subscribe")
        var mid: Int32 = 1
        let mids = handAll(&ledger, from: &mid)
        #expect(mids.count == 1)
        #expect(ledger.puback(mid: mids[0]) == 1)
        #expect(ledger.shouldResubscribe)
    }

    @Test func anOverflowContinuesTheSequence() {
        var ledger = DeliveryLedger(limit: 10)
        ledger.received(message(1), seq: 1)
        // locationd dropped 2…5: the overflow accounts for them.
        let overflow = ledger.received(message(0), seq: 5, first: 2)
        #expect(overflow)
        let sixth = ledger.received(message(6), seq: 6)
        #expect(sixth)
        #expect(!ledger.needsResubscribe)
        var mid: Int32 = 1
        let mids = handAll(&ledger, from: &mid)
        for m in mids { _ = ledger.puback(mid: m) }
        #expect(ledger.acknowledged == 6)
    }

    @Test func messagesWithoutSeqPastTheBoundGoOldestFirstAndAreCounted() {
        var ledger = DeliveryLedger(limit: 2)
        for n in 1...5 { ledger.received(message(n), seq: nil) }
        #expect(ledger.waiting == 2 && ledger.next?.message == message(4))
        #expect(ledger.takeLost() == 3)
        #expect(ledger.takeLost() == 0)
    }

    @Test func longRunsStayCompact() {
        var ledger = DeliveryLedger(limit: 100)
        var mid: Int32 = 1
        for seq in UInt64(1)...10_000 {
            ledger.received(message(0), seq: seq)
            ledger.handed(mid: mid)
            #expect(ledger.puback(mid: mid) == seq)
            mid += 1
        }
        #expect(ledger.outbox.count < 200)
    }
}
