import LocationCore
import Testing

/// Durable subscriptions away (docs/semantics.md, "Durable subscriptions away"): the locations
/// a durable subscription gets connected and away together are those of one uninterrupted
/// subscription, whatever the points it goes away and comes back at.
@Suite struct DurableAwayEngineTests {
    static var options: SubscriptionOptions {
        var o = SubscriptionOptions(distanceFilter: 25, minimumInterval: 5, events: [.location, .visits, .significant])
        o.durable = true
        return o
    }

    static func locations(_ events: [Event]) -> [Fix] {
        events.compactMap { if case .location(let f) = $0 { f } else { nil } }
    }

    @Test func locationsAreOneStreamAcrossAwayAndBack() {
        var reference = Engine()
        var out: [Delivery] = []
        reference.handle(.subscribe(SubscriberID(1), Self.options), into: &out)
        for f in BackgroundTests.day { reference.handle(.fix(f), into: &out) }
        let expected = Self.locations(out.map(\.event))
        #expect(expected.count > 100)

        for cuts in [[600, 1500, 1800, 3100], [100, 4000], [1300, 1301, 2000, 2900], [10, 4300]] {
            var engine = Engine()
            let program = ProgramID("p")
            var id = SubscriberID(1)
            var deliveries: [Delivery] = []
            var programEvents: [ProgramEvent] = []
            var received: [Event] = []
            engine.handle(.subscribe(id, Self.options), into: &deliveries)
            var away = false
            for (n, f) in BackgroundTests.day.enumerated() {
                if cuts.contains(n) {
                    if away {
                        id = SubscriberID(id.rawValue + 1)
                        engine.resumeAway(of: program, as: id)
                        engine.handle(.subscribe(id, Self.options), into: &deliveries)
                        engine.takeBack(program, into: id)
                        #expect(engine.awayProgramIDs.isEmpty && engine.subscriberCount == 1)
                    } else {
                        engine.handOver(id, to: program, options: Self.options, keepingLocations: true)
                        #expect(engine.awayProgramIDs == [program] && engine.subscriberCount == 0)
                    }
                    away.toggle()
                }
                engine.handle(.fix(f), into: &deliveries)
                engine.drainProgramEvents(into: &programEvents)
                // The shell queues program events and a connection writes them in order: both
                // are what the program receives, in the order made.
                received += deliveries.map(\.event) + programEvents.map(\.event)
                #expect(deliveries.allSatisfy { $0.subscriber == id } && programEvents.allSatisfy { $0.program == program })
                deliveries.removeAll()
            }
            #expect(Self.locations(received) == expected, "cuts \(cuts)")
        }
    }

    @Test func endedByASubscribeWithoutDurableOrEndAway() {
        var engine = Engine()
        let program = ProgramID("p")
        var out: [Delivery] = []
        engine.handle(.subscribe(SubscriberID(1), Self.options), into: &out)
        engine.handOver(SubscriberID(1), to: program, options: Self.options, keepingLocations: true)
        #expect(engine.awayAccuracy(of: program) == .precise)
        let ended = engine.endAway(program)
        #expect(ended)
        var events: [ProgramEvent] = []
        for f in BackgroundTests.day.prefix(100) { engine.handle(.fix(f), into: &out) }
        engine.drainProgramEvents(into: &events)
        #expect(!events.contains { if case .location = $0.event { true } else { false } })
        #expect(engine.awayProgramIDs.isEmpty && !engine.hasAwaySubscriptions)
    }
}
