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
        ledger.locationdReconnected()
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

    @Test func pastTheBoundTheOldestGoAndAreCounted() {
        var ledger = DeliveryLedger(limit: 3)
        for seq in UInt64(1)...5 { ledger.received(message(Int(seq)), seq: seq) }
        #expect(ledger.waiting == 3)
        #expect(ledger.next?.seq == 3)
        #expect(ledger.takeLost() == 2)
        #expect(ledger.takeLost() == 0)
        var mid: Int32 = 1
        let mids = handAll(&ledger, from: &mid)
        #expect(ledger.puback(mid: mids[0]) == 3, "the dropped 1 and 2 count as done")
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
