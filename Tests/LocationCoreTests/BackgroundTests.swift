import LocationCore
import Testing

/// Background monitoring (docs/semantics.md, "Background"): an `always` program's detectors
/// keep running while it is away, and its region events wait for it as program events.
@Suite struct BackgroundTests {
    /// Three stays of 20 minutes, 3 km apart, joined by 5-minute drives, at 1 Hz.
    static let day: [Fix] = {
        var fixes: [Fix] = []
        var t = 0.0
        let stays = [offset(0, 0), offset(3000, 0), offset(3000, 3000)]
        for (i, stay) in stays.enumerated() {
            for _ in 0..<1200 { fixes.append(fix(at: t, stay)); t += 1 }
            guard i + 1 < stays.count else { break }
            let next = stays[i + 1]
            for k in 1...300 {
                let f = Double(k) / 300
                fixes.append(fix(at: t, Coordinate(latitude: stay.latitude + (next.latitude - stay.latitude) * f,
                                                   longitude: stay.longitude + (next.longitude - stay.longitude) * f)))
                t += 1
            }
        }
        return fixes
    }()

    static let monitoring = SubscriptionOptions(events: [.visits, .significant])

    static func monitorEvents(_ deliveries: [Delivery]) -> [Event] {
        deliveries.compactMap { d in
            switch d.event {
            case .visit, .significant: d.event
            default: nil
            }
        }
    }

    @Test func detectionIsOneStreamAcrossHandOverAndTakeBack() {
        var reference = Engine()
        var out: [Delivery] = []
        reference.handle(.subscribe(SubscriberID(1), Self.monitoring), into: &out)
        for f in Self.day { reference.handle(.fix(f), into: &out) }
        let expected = Self.monitorEvents(out)
        #expect(expected.filter { if case .visit = $0 { true } else { false } }.count == 5)  // 3 arrivals, 2 departures
        #expect(expected.contains { if case .significant = $0 { true } else { false } })

        // Away and back at points inside stays and drives, including mid-visit.
        for cuts in [[600, 1500, 1800, 3100], [100, 4000], [1300, 1301, 2000, 2900], [10, 4300]] {
            var engine = Engine()
            let program = ProgramID("p")
            var id = SubscriberID(1)
            var deliveries: [Delivery] = []
            var programEvents: [ProgramEvent] = []
            var received: [Event] = []
            engine.handle(.subscribe(id, Self.monitoring), into: &deliveries)
            var away = false
            for (i, f) in Self.day.enumerated() {
                if cuts.contains(i) {
                    if away {
                        id = SubscriberID(id.rawValue + 1)
                        engine.handle(.subscribe(id, Self.monitoring), into: &deliveries)
                        let tookBack = engine.takeBack(program, into: id)
                        #expect(tookBack)
                    } else {
                        let handedOver = engine.handOver(id, to: program)
                        #expect(handedOver)
                        #expect(engine.subscriberCount == 0 && engine.backgroundProgramIDs == [program])
                    }
                    away.toggle()
                }
                deliveries.removeAll()
                engine.handle(.fix(f), into: &deliveries)
                engine.drainProgramEvents(into: &programEvents)
                received += Self.monitorEvents(deliveries)
                received += programEvents.map { $0.event }
                #expect(programEvents.allSatisfy { $0.program == program })
                #expect(!away || deliveries.isEmpty)
            }
            #expect(received == expected, "cuts \(cuts)")
        }
    }

    @Test func takeBackEndsTheKindsTheNewSubscriptionDoesNotAskFor() {
        var engine = Engine()
        let program = ProgramID("p")
        var out: [Delivery] = []
        engine.handle(.subscribe(SubscriberID(1), Self.monitoring), into: &out)
        for f in Self.day.prefix(700) { engine.handle(.fix(f), into: &out) }
        let handedOver1 = engine.handOver(SubscriberID(1), to: program)
        #expect(handedOver1)
        engine.handle(.subscribe(SubscriberID(2), SubscriptionOptions()), into: &out)
        let tookBack = engine.takeBack(program, into: SubscriberID(2))
        #expect(tookBack)
        #expect(engine.backgroundProgramIDs.isEmpty)
        out.removeAll()
        var programEvents: [ProgramEvent] = []
        for f in Self.day.dropFirst(700) {
            engine.handle(.fix(f), into: &out)
            engine.drainProgramEvents(into: &programEvents)
            #expect(programEvents.isEmpty)
        }
        #expect(Self.monitorEvents(out).isEmpty)
        // A location-only subscription had nothing to hand over.
        let handedOver = engine.handOver(SubscriberID(2), to: program)
        #expect(!handedOver)
        #expect(engine.backgroundProgramIDs.isEmpty)
    }

    @Test func restoredMonitorsStartFreshAndCanBeEnded() {
        var engine = Engine()
        let program = ProgramID("p")
        engine.restoreBackground(program, options: Self.monitoring)
        engine.restoreBackground(ProgramID("q"), options: SubscriptionOptions())  // nothing to monitor
        #expect(engine.backgroundProgramIDs == [program])
        var out: [Delivery] = []
        var events: [ProgramEvent] = []
        var all: [ProgramEvent] = []
        for f in Self.day.prefix(1300) {
            engine.handle(.fix(f), into: &out)
            engine.drainProgramEvents(into: &events)
            all += events
        }
        #expect(out.isEmpty)
        #expect(all.contains { if case .visit(let v) = $0.event { v.kind == .arrival } else { false } })
        let ended = engine.endBackground(program)
        #expect(ended)
        let endedAgain = engine.endBackground(program)
        #expect(!endedAgain)
        #expect(engine.backgroundProgramIDs.isEmpty)
    }

    /// An engine with program "p"'s region at the second stay, and what it queues for "p".
    struct AwayRegions {
        var engine = Engine()
        let program = ProgramID("p")
        var out: [Delivery] = []
        var queued: [RegionEvent] = []
        private var events: [ProgramEvent] = []

        init() throws {
            try engine.addRegions([Region(id: "home", center: BackgroundTests.day[1600].coordinate, radius: 100)], for: program)
        }

        mutating func feed(_ fixes: ArraySlice<Fix>) {
            for f in fixes {
                engine.handle(.fix(f), into: &out)
                engine.drainProgramEvents(into: &events)
                queued += events.compactMap { if case .region(let e) = $0.event { e } else { nil } }
            }
        }
    }

    @Test func regionEventsOfAProgramWithoutSubscriberAreProgramEvents() throws {
        var r = try AwayRegions()
        r.feed(Self.day[0..<1700])
        #expect(r.queued.map(\.kind) == [.enter])
        #expect(r.out.isEmpty)
        // Bound to a subscriber: delivered, not queued.
        r.engine.handle(.subscribe(SubscriberID(7), SubscriptionOptions(events: [])), into: &r.out)
        r.engine.bind(SubscriberID(7), to: r.program)
        r.out.removeAll()
        r.feed(Self.day[1700..<3100])
        #expect(r.queued.count == 1)
        let delivered: [RegionEvent] = r.out.compactMap { if case .region(let e) = $0.event { e } else { nil } }
        #expect(delivered.map(\.kind) == [.exit])
    }

    /// docs/privacy.md, "Programs that are away": suspended regions see no fix; resumed, they
    /// start from their last state and the next fix decides them, as after a restart.
    @Test func suspendedRegionsAreNotEvaluatedAndResumeFromTheirLastState() throws {
        var r = try AwayRegions()
        r.feed(Self.day[0..<1700])
        #expect(r.queued.map(\.kind) == [.enter])

        let suspended = r.engine.suspendRegions(of: r.program)
        let suspendedAgain = r.engine.suspendRegions(of: r.program)
        let suspendedWithoutRegions = r.engine.suspendRegions(of: ProgramID("no regions"))
        #expect(suspended && !suspendedAgain && !suspendedWithoutRegions)
        #expect(r.engine.regionsSuspended(of: r.program) && !r.engine.monitorsRegions)
        #expect(r.engine.regionProgramIDs == [r.program])
        r.feed(Self.day[1700..<3100])  // leaves home at 2700
        #expect(r.queued.map(\.kind) == [.enter] && r.out.isEmpty)

        let resumed = r.engine.resumeRegions(of: r.program)
        let resumedAgain = r.engine.resumeRegions(of: r.program)
        #expect(resumed && !resumedAgain)
        #expect(r.engine.monitorsRegions && r.engine.regionRecords(of: r.program).map(\.state) == [.inside])
        r.feed(Self.day[3100..<3200])
        #expect(r.queued.map(\.kind) == [.enter, .exit])
        #expect(r.queued.last?.time == Self.day[3100].time, "decided by the first fix after resuming, not back-dated into the suspension")
    }

    @Test func backgroundAccuracyIsTheHandedOverSubscriptions() {
        var engine = Engine()
        var approximate = Self.monitoring
        approximate.accuracy = .approximate
        engine.restoreBackground(ProgramID("a"), options: approximate)
        engine.restoreBackground(ProgramID("p"), options: Self.monitoring)
        #expect(engine.backgroundAccuracy(of: ProgramID("a")) == .approximate)
        #expect(engine.backgroundAccuracy(of: ProgramID("p")) == .precise)
        #expect(engine.backgroundAccuracy(of: ProgramID("none")) == nil)
    }
}
