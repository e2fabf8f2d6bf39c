import LocationCore
import NIOCore
import Testing
@testable import LocationDaemon

@Suite("Hub.Subscribers: the hub's subscribers by id, found in any order")
struct HubSubscribersTests {
    final class Probe: HubSubscriber {
        let program: ProgramID
        init(_ name: String) { program = ProgramID(name) }
        func deliver(_ event: Event, encoded: ByteBuffer) {}
    }

    func name(_ subscriber: (any HubSubscriber)?) -> String? { subscriber?.program.rawValue }

    @Test func findsEachInAnyOrderAfterInsertsReplacementsAndRemovals() {
        var subscribers = Subscribers()
        // Ids given out of order, as a test's or a restart's may be.
        for raw: UInt64 in [5, 1, 9, 3, 7] { subscribers[SubscriberID(raw)] = Probe("p\(raw)") }
        subscribers[SubscriberID(3)] = Probe("p3-again")
        #expect(name(subscribers.removeValue(forKey: SubscriberID(9))) == "p9")
        #expect(subscribers.removeValue(forKey: SubscriberID(9)) == nil)
        subscribers[SubscriberID(1)] = nil
        subscribers[SubscriberID(2)] = nil  // absent: nothing happens
        let expected: [UInt64: String?] = [1: nil, 2: nil, 3: "p3-again", 5: "p5", 7: "p7", 9: nil]
        for raw in expected.keys.sorted() {
            #expect(name(subscribers[SubscriberID(raw)]) == expected[raw]!)
        }
        // Fan-out order, then another, each lookup with the hint from the one before.
        for order: [UInt64] in [[3, 5, 7], [7, 3, 9, 5], [5, 7, 3, 1]] {
            for raw in order {
                #expect(name(subscribers.lookUp(SubscriberID(raw))) == expected[raw]!)
            }
        }
    }
}
