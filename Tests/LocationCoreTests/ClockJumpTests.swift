import LocationCore
import Testing

/// docs/semantics.md, "Clock jumps": a fix whose time jumps is held until the next report goes
/// on from it (`ClockJumpGuard`). The glitches are one report an hour off, as a receiver may
/// stamp; the real jumps last (gpsd's bt451 log: 52 minutes back).
@Suite struct ClockJumpTests {
    static let a = SubscriberID(1)

    /// Subscriber 1 (locations and visits), bound to a program with `regions`.
    static func engine(_ regions: [Region] = []) throws -> Engine {
        var engine = Engine()
        _ = engine.handle(.subscribe(a, SubscriptionOptions(events: [.location, .visits])))
        let program = ProgramID("p")
        if !regions.isEmpty { try engine.addRegions(regions, for: program) }
        engine.bind(a, to: program)
        return engine
    }

    /// Subscriber 1's events for each fix, in order.
    static func feed(_ engine: inout Engine, _ fixes: [Fix]) -> [[Event]] {
        fixes.map { f in engine.handle(.fix(f)).filter { $0.subscriber == a }.map(\.event) }
    }

    static func visits(_ events: [[Event]]) -> [Visit] {
        events.joined().compactMap { if case .visit(let v) = $0 { v } else { nil } }
    }

    static func regionEvents(_ events: [[Event]]) -> [RegionEvent] {
        events.joined().compactMap { if case .region(let e) = $0 { e } else { nil } }
    }

    /// 51 s at a place with one report an hour ahead among them, then a walk to a second place
    /// and a stay there: one visit, the second, on the receiver's own timeline. The glitch made
    /// an arrival at once (its hour completed the stay), a departure an hour later, and every
    /// later time an hour off.
    @Test func aReportAnHourAheadMakesNoVisitAndShiftsNothing() throws {
        var engine = try Self.engine()
        let there = north(of: origin, metres: 2000)
        var fixes = (0..<51).map { fix(at: Double($0), origin) }
        fixes.insert(fix(at: 20 + 3600, origin), at: 21)
        fixes += (51..<251).map { fix(at: Double($0), north(of: origin, metres: 10 * Double($0 - 50))) }
        fixes += (251..<700).map { fix(at: Double($0), there) }
        fixes += (700..<800).map { fix(at: Double($0), north(of: there, metres: 10 * Double($0 - 699))) }
        let visits = Self.visits(Self.feed(&engine, fixes))
        #expect(visits.map(\.kind) == [.arrival, .departure], "\(visits)")
        #expect(visits.allSatisfy { $0.arrival >= t0.adding(seconds: 240) && $0.arrival <= t0.adding(seconds: 260) }, "\(visits)")
        #expect(visits.last?.departure.map { $0 < t0.adding(seconds: 710) } == true, "\(visits)")
        #expect(engine.clock.dropped == 1)
    }

    /// Parked 30 m outside a region, one noisy report inside it stamped an hour ahead: nothing.
    /// After the "gap" it confirmed an entry alone, and the next fix, "jumped back", an exit
    /// dated before the entry.
    @Test func aReportAnHourAheadMakesNoRegionTransition() throws {
        var engine = try Self.engine([Region(id: "r", center: origin, radius: 200)])
        var fixes = (0..<120).map { fix(at: Double($0), north(of: origin, metres: 230), accuracy: 10) }
        fixes.insert(fix(at: 60 + 3600, north(of: origin, metres: 190), accuracy: 10), at: 61)
        #expect(Self.regionEvents(Self.feed(&engine, fixes)).isEmpty)
    }

    /// Inside a region with a 600 s dwell for 70 s, one report stamped an hour ahead: no dwell.
    @Test func aReportAnHourAheadIsNoDwell() throws {
        var engine = try Self.engine([Region(id: "r", center: origin, radius: 200, dwell: 600)])
        var fixes = (0..<200).map { fix(at: Double($0), origin) }
        fixes.insert(fix(at: 70 + 3600, origin), at: 71)
        #expect(Self.regionEvents(Self.feed(&engine, fixes)).isEmpty)
    }

    /// A report an hour behind is dropped the same way; the locations go on as they were.
    @Test func aReportAnHourBehindIsDropped() throws {
        var engine = try Self.engine()
        var fixes = (3600..<3700).map { fix(at: Double($0), origin) }
        fixes.insert(fix(at: 3650 - 3600, origin), at: 51)
        let delivered = Self.feed(&engine, fixes).joined().compactMap { if case .location(let f) = $0 { f.time } else { nil } }
        #expect(delivered == (3600..<3700).map { t0.adding(seconds: Double($0)) })
        #expect(engine.clock.dropped == 1)
    }

    /// A jump that lasts (the receiver's clock went back 52 minutes and goes on from there) is
    /// taken at the next fix, with it, in order: one fix of delay.
    @Test func aJumpThatLastsIsTakenAtTheNextFix() throws {
        var engine = try Self.engine()
        let fixes = (3200..<3210).map { fix(at: Double($0), origin) } + (80..<85).map { fix(at: Double($0), origin) }
        let perFix = Self.feed(&engine, fixes).map { $0.compactMap { e -> Double? in
            if case .location(let f) = e { f.time - t0 } else { nil }
        } }
        #expect(perFix[10] == [] && perFix[11] == [80, 81] && perFix[12] == [82], "\(perFix)")
        #expect(engine.clock.dropped == 0)
    }

    /// A receiver with a fix every 5 minutes: its second fix waits for the third (nothing
    /// tells its pace before), and from then on none waits.
    @Test func aSparseReceiverWaitsOnceOnly() throws {
        var engine = try Self.engine()
        let perFix = Self.feed(&engine, (0..<6).map { fix(at: Double($0 * 300), origin) }).map { $0.compactMap { e -> Double? in
            if case .location(let f) = e { f.time - t0 } else { nil }
        } }
        #expect(perFix == [[0], [], [300, 600], [900], [1200], [1500]])
    }

    /// Two receivers behind one gpsd, the second's clock 70 s behind: each of its reports (every
    /// other fix) is a jump back, dropped at the first receiver's next report.
    @Test func aSecondReceiverFarBehindIsDropped() throws {
        var engine = try Self.engine()
        var fixes: [Fix] = []
        for i in 0..<20 { fixes += [fix(at: Double(1000 + i), origin), fix(at: Double(930 + i), origin)] }
        let delivered = Self.feed(&engine, fixes).joined().compactMap { if case .location(let f) = $0 { f.time - t0 } else { nil } }
        #expect(delivered == (0..<20).map { Double(1000 + $0) })
        #expect(engine.clock.dropped == 19 && engine.clock.held?.time == t0.adding(seconds: 949))
    }

    static func times(_ events: [[Event]]) -> [[Double]] {
        events.map { $0.compactMap { e -> Double? in if case .location(let f) = e { f.time - t0 } else { nil } } }
    }

    /// A receiver with a fix every 10 s, one report 70 s behind: dropped. The next report,
    /// 80 s after it, was within the ten-interval window and confirmed it as a real jump back.
    @Test func aReportBehindASlowerReceiverIsDropped() throws {
        var engine = try Self.engine()
        var fixes = (0..<20).map { fix(at: Double($0 * 10), origin) }
        fixes.insert(fix(at: 80, origin), at: 16)
        let delivered = Self.times(Self.feed(&engine, fixes)).joined()
        #expect(Array(delivered) == (0..<20).map { Double($0 * 10) })
        #expect(engine.clock.dropped == 1)
    }

    /// Two receivers a fix every 10 s, clocks 70 s apart: one timeline goes through, the other
    /// receiver's reports are dropped (the pace learned across the two had let both through).
    @Test func twoSlowerReceiversFarApartMakeOneTimeline() throws {
        var engine = try Self.engine()
        var fixes: [Fix] = []
        for i in 0..<20 { fixes += [fix(at: Double(1000 + 10 * i), origin), fix(at: Double(1070 + 10 * i), origin)] }
        let delivered = Array(Self.times(Self.feed(&engine, fixes)).joined())
        #expect(delivered == delivered.sorted() && Set(delivered).count == delivered.count, "\(delivered)")
        #expect(engine.clock.dropped >= 18, "\(engine.clock.dropped)")
    }

    /// A jump released by a timed no-fix report does not become the receiver's pace: a glitch
    /// an hour later still waits, and is dropped (the window had grown to ten hours).
    @Test func aJumpReleasedByANoFixReportIsNoPace() throws {
        var engine = try Self.engine()
        _ = Self.feed(&engine, (0..<10).map { fix(at: Double($0), origin) })
        #expect(Self.times(Self.feed(&engine, [fix(at: 3600, origin)])) == [[]])
        #expect(engine.handle(.noFix(t0.adding(seconds: 3601))).locations(for: Self.a).map { $0.time - t0 } == [3600])
        let after = Self.times(Self.feed(&engine, [fix(at: 7202, origin)] + (3603..<3606).map { fix(at: Double($0), origin) }))
        #expect(after == [[], [3603], [3604], [3605]], "\(after)")
        #expect(engine.clock.dropped == 1)
    }

    /// A second receiver without a fix, its no-fix reports stamped 70 s behind: the first
    /// receiver's fixes after its own 90 s silence go on through. Each of them was held and
    /// then dropped by the other's next no-fix report, for good.
    @Test func aSecondReceiversNoFixReportsDoNotLockTheFixesOut() throws {
        var engine = try Self.engine()
        var delivered: [Double] = []
        for t in 0..<200 {
            if t < 30 || t >= 120 {
                delivered += engine.handle(.fix(fix(at: Double(t), origin))).locations(for: Self.a).map { $0.time - t0 }
            }
            _ = engine.handle(.noFix(t0.adding(seconds: Double(t) + 0.5 - 70)))
        }
        #expect(delivered == (0..<30).map(Double.init) + (120..<200).map(Double.init), "\(delivered)")
        #expect(engine.clock.dropped == 0)
    }

    /// A receiver with a fix every 5 minutes and a second of jitter, and two tunnels in a row
    /// at 1 Hz: the fix after the first gap is confirmed by one a little more than the gap
    /// later (not lost as a glitch).
    @Test func aLongerSecondGapConfirmsTheFirst() throws {
        var sparse = try Self.engine()
        let jitter = Self.times(Self.feed(&sparse, [0, 300, 601, 902, 1203].map { fix(at: $0, origin) }))
        #expect(jitter == [[0], [], [300, 601], [902], [1203]], "\(jitter)")
        var tunnels = try Self.engine()
        let fixes = (0..<10).map { fix(at: Double($0), origin) } + [fix(at: 130, origin)] + (280..<283).map { fix(at: Double($0), origin) }
        let delivered = Array(Self.times(Self.feed(&tunnels, fixes)).joined())
        #expect(delivered == (0..<10).map(Double.init) + [130, 280, 281, 282], "\(delivered)")
    }

    /// After a silent gap a fix waits for the next; after no-fix reports with times it does
    /// not (they kept the timeline going), nor after untimed ones or a reconnection (there is
    /// no timeline to judge it by: it is a first fix).
    @Test func whatComesBetweenDecidesWhetherTheFirstFixAfterAGapWaits() throws {
        let cases: [(String, [EngineInput])] = [
            ("silence", []),
            ("timed no-fix reports", (10..<500).map { .noFix(t0.adding(seconds: Double($0))) }),
            ("an untimed no-fix report", [.noFix(nil)]),
            ("a reconnection", [.source(.disconnected), .source(.connected)]),
        ]
        for (name, between) in cases {
            var engine = try Self.engine()
            _ = Self.feed(&engine, (0..<10).map { fix(at: Double($0), origin) })
            for input in between { _ = engine.handle(input) }
            let first = engine.handle(.fix(fix(at: 500, origin))).locations(for: Self.a)
            #expect(first.count == (name == "silence" ? 0 : 1), "\(name)")
        }
    }
    /// gpsd passes on whatever time a receiver without a fix has: a reset receiver's clock
    /// (gp-320fw's cold boot wrote 2006 into a 2019 log, and counted on from there) or one
    /// report an hour ahead. Such a report is no fix, but untimed: its time stamped the precise
    /// subscriber's `noFix` status, and the approximate one was shown a location stamped an
    /// hour ahead (after the stale date, one in the middle of an epoch, at the fix that ended
    /// a 30-second loss).
    @Test func aNoFixReportOffTheTimelineTimesNothing() throws {
        for offset in [-13 * 365 * 86_400.0, 3600] {
            var engine = ApproximateLocationTests.withTwoSubscribers()
            for i in 0..<100 { _ = engine.handle(.fix(fix(at: Double(i), ApproximateLocationTests.truth))) }
            var shown: [Event] = []
            for i in 100..<130 {
                let glitch = offset < 0 || i == 100
                let out = engine.handle(.noFix(t0.adding(seconds: Double(i) + (glitch ? offset : 0))))
                if i == 100 {
                    #expect(out.filter { $0.subscriber == Self.a }.map(\.event) == [.status(.noFix, time: nil)], "\(offset)")
                }
                shown += out.filter { $0.subscriber == SubscriberID(2) }.map(\.event)
            }
            for i in 130..<700 {
                shown += engine.handle(.fix(fix(at: Double(i), ApproximateLocationTests.truth)))
                    .filter { $0.subscriber == SubscriberID(2) }.map(\.event)
            }
            let times = shown.compactMap { e -> Timestamp? in
                switch e {
                case .location(let f): f.time
                case .status(_, let t): t
                default: nil
                }
            }
            #expect(times == [t0.adding(seconds: 600)], "\(offset): \(shown)")
        }
    }

    /// Two no-fix reports ahead go on from each other only with no fix between them: a glitch
    /// an hour ahead, good fixes, then another glitch within the first one's window is as
    /// untimed as the first.
    @Test func noFixReportsAheadWithFixesBetweenDoNotConfirmEachOther() {
        var guardian = ClockJumpGuard()
        for i in 0..<10 { _ = guardian.admit(fix(at: Double(i), origin)) }
        _ = guardian.noFix(at: t0.adding(seconds: 3600))
        #expect(guardian.noFixTime == nil)
        for i in 10..<20 { _ = guardian.admit(fix(at: Double(i), origin)) }
        _ = guardian.noFix(at: t0.adding(seconds: 3605))
        #expect(guardian.noFixTime == nil, "the second glitch was taken as timed")
        _ = guardian.noFix(at: t0.adding(seconds: 3606))  // this one goes on from the one before
        #expect(guardian.noFixTime == t0.adding(seconds: 3606))
    }
}
