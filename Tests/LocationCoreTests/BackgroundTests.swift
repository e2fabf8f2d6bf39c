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

    /// What one uninterrupted subscription asking for visits and significant changes gets.
    static let uninterrupted: [Event] = {
        var reference = Engine()
        var out: [Delivery] = []
        reference.handle(.subscribe(SubscriberID(1), monitoring), into: &out)
        for f in day { reference.handle(.fix(f), into: &out) }
        return monitorEvents(out)
    }()

    @Test func detectionIsOneStreamAcrossHandOverAndTakeBack() {
        let expected = Self.uninterrupted
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
                        let handedOver = engine.handOver(id, to: program, options: Self.monitoring) != nil
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
        let handedOver1 = engine.handOver(SubscriberID(1), to: program, options: Self.monitoring) != nil
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
        let handedOver = engine.handOver(SubscriberID(2), to: program, options: SubscriptionOptions()) != nil
        #expect(!handedOver)
        #expect(engine.backgroundProgramIDs.isEmpty)
    }

    /// Two connections of one program, one asking for visits and one for significant changes,
    /// both go away: both kinds continue, as they would with one subscription asking for both.
    @Test func connectionsThatHandOverInTurnJoinTheirDetectors() {
        let expected = Self.uninterrupted
        var out: [Delivery] = []

        var engine = Engine()
        let program = ProgramID("p")
        let visits = SubscriptionOptions(events: [.visits])
        var significant = SubscriptionOptions(events: [.significant])
        significant.significantParameters.distance = 400
        significant.desiredAccuracy = 40
        engine.handle(.subscribe(SubscriberID(1), visits), into: &out)
        engine.handle(.subscribe(SubscriberID(2), significant), into: &out)
        let first = engine.handOver(SubscriberID(1), to: program, options: visits)
        #expect(first == visits)
        let joined = engine.handOver(SubscriberID(2), to: program, options: significant)
        // What a restart starts again: both kinds, each with the parameters it was asked with.
        var both = visits
        both.events = [.visits, .significant]
        both.significantParameters = significant.significantParameters
        both.desiredAccuracy = 40
        #expect(joined == both)
        #expect(engine.backgroundProgramIDs == [program])

        var events: [ProgramEvent] = []
        var received: [Event] = []
        out.removeAll()
        for f in Self.day {
            engine.handle(.fix(f), into: &out)
            engine.drainProgramEvents(into: &events)
            received += events.map(\.event)
        }
        #expect(out.isEmpty)
        let visitEvents = received.filter { if case .visit = $0 { true } else { false } }
        #expect(visitEvents == expected.filter { if case .visit = $0 { true } else { false } })
        #expect(received.contains { if case .significant = $0 { true } else { false } })

        // A connection of the same kind and accuracy adds nothing: the running detector stays.
        engine.handle(.subscribe(SubscriberID(3), visits), into: &out)
        let again = engine.handOver(SubscriberID(3), to: program, options: visits)
        #expect(again == both)
    }

    /// A program's background detectors run at one accuracy: a connection handing over at the
    /// other accuracy replaces them (the latest session's), and the program keeps monitoring.
    @Test func aHandOverAtTheOtherAccuracyReplacesTheDetectors() {
        var engine = Engine()
        let program = ProgramID("p")
        var approximate = SubscriptionOptions(events: [.visits])
        approximate.accuracy = .approximate
        var out: [Delivery] = []
        engine.handle(.subscribe(SubscriberID(1), Self.monitoring), into: &out)
        engine.handle(.subscribe(SubscriberID(2), approximate), into: &out)
        _ = engine.handOver(SubscriberID(1), to: program, options: Self.monitoring)
        #expect(engine.backgroundAccuracy(of: program) == .precise)
        let replaced = engine.handOver(SubscriberID(2), to: program, options: approximate)
        #expect(replaced == approximate)
        #expect(engine.backgroundAccuracy(of: program) == .approximate)
        #expect(engine.backgroundProgramIDs == [program])
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
