import Testing
import LocationCore

@Suite struct DistanceFilterTests {
    let a = SubscriberID(1)

    @Test func firstFixIsDeliveredAtOnce() {
        var engine = Engine()
        _ = engine.handle(.subscribe(a, SubscriptionOptions(distanceFilter: 100)))
        #expect(engine.handle(.fix(fix(at: 0, origin))).locations(for: a).count == 1)
    }

    @Test func slowCreepPastTheThresholdIsDelivered() {
        // 1 m per second for 250 s with a 100 m filter: measured from the last *delivered*
        // fix this delivers at 0, 100 and 200 m; measured from the last seen fix it never would.
        var engine = Engine()
        _ = engine.handle(.subscribe(a, SubscriptionOptions(distanceFilter: 100)))
        var delivered: [Fix] = []
        for s in 0...250 {
            delivered += engine.handle(.fix(fix(at: Double(s), north(of: origin, metres: Double(s))))).locations(for: a)
        }
        #expect(delivered.count == 3)
        let metres = delivered.map { (Geodesy.distance(origin, $0.coordinate)).rounded() }
        #expect(metres == [0, 100, 200])
    }

    @Test func jitterBelowTheThresholdIsSuppressed() {
        var engine = Engine()
        _ = engine.handle(.subscribe(a, SubscriptionOptions(distanceFilter: 50)))
        var count = 0
        for s in 0..<100 {
            let wobble = Double(s % 7) * 6 - 18  // within ±18 m of the start
            count += engine.handle(.fix(fix(at: Double(s), north(of: origin, metres: wobble)))).locations(for: a).count
        }
        #expect(count == 1)
    }

    @Test func zeroFilterDeliversEveryFix() {
        var engine = Engine()
        _ = engine.handle(.subscribe(a, SubscriptionOptions()))
        let n = (0..<10).reduce(0) { n, s in n + engine.handle(.fix(fix(at: Double(s), origin))).locations(for: a).count }
        #expect(n == 10)
    }
}

@Suite struct AccuracyGateTests {
    let a = SubscriberID(1)

    @Test func gateRejectsWorseAndUnknownAccuracy() {
        var engine = Engine()
        _ = engine.handle(.subscribe(a, SubscriptionOptions(desiredAccuracy: 20)))
        #expect(engine.handle(.fix(fix(at: 0, origin, accuracy: 35))).locations(for: a).isEmpty)
        #expect(engine.handle(.fix(fix(at: 1, origin, accuracy: nil))).locations(for: a).isEmpty)
        #expect(engine.handle(.fix(fix(at: 2, origin, accuracy: 20))).locations(for: a).count == 1)
    }

    @Test func rejectedFixIsNotTheDistanceReference() {
        // A rejected (inaccurate) fix far away must not become the reference point.
        var engine = Engine()
        _ = engine.handle(.subscribe(a, SubscriptionOptions(distanceFilter: 100, desiredAccuracy: 20)))
        _ = engine.handle(.fix(fix(at: 0, origin)))
        _ = engine.handle(.fix(fix(at: 1, north(of: origin, metres: 500), accuracy: 80)))
        let d = engine.handle(.fix(fix(at: 2, north(of: origin, metres: 120)))).locations(for: a)
        #expect(d.count == 1)
    }
}

@Suite struct IntervalTests {
    let a = SubscriberID(1)

    @Test func minimumIntervalInFixTime() {
        var engine = Engine()
        _ = engine.handle(.subscribe(a, SubscriptionOptions(minimumInterval: 10)))
        var times: [Double] = []
        for s in 0..<35 {
            for f in engine.handle(.fix(fix(at: Double(s), origin))).locations(for: a) { times.append(f.time - t0) }
        }
        #expect(times == [0, 10, 20, 30])
    }

    @Test func laterPiecesOfTheSameEpochAreNotDeliveredAgain() {
        var engine = Engine()
        _ = engine.handle(.subscribe(a, SubscriptionOptions()))
        #expect(engine.handle(.fix(fix(at: 0, origin))).locations(for: a).count == 1)
        // gpsd's second TPV of the same epoch, now with more fields: same time, not delivered.
        #expect(engine.handle(.fix(fix(at: 0, north(of: origin, metres: 3), accuracy: 4))).locations(for: a).isEmpty)
        #expect(engine.handle(.fix(fix(at: 1, origin))).locations(for: a).count == 1)
    }

    @Test func clockJumpingBackwardsDoesNotSilenceTheSubscriber() {
        var engine = Engine()
        _ = engine.handle(.subscribe(a, SubscriptionOptions(minimumInterval: 60)))
        _ = engine.handle(.fix(fix(at: 1000, origin)))
        // The jump is held until the next report goes on from it (ClockJumpGuard), then passes.
        #expect(engine.handle(.fix(fix(at: 0, origin))).locations(for: a).isEmpty)
        #expect(engine.handle(.fix(fix(at: 1, origin))).locations(for: a).map(\.time) == [t0])
        #expect(engine.handle(.fix(fix(at: 30, origin))).locations(for: a).isEmpty)
    }

    /// Two receivers behind one gpsd, the second's reports 0.2 s behind the first's: the
    /// interval holds (one delivery a minute, not two a minute) and time never goes backwards.
    @Test(arguments: [0.0, 60.0]) func outOfOrderFixesDoNotRestartTheInterval(interval: Double) {
        var engine = Engine()
        _ = engine.handle(.subscribe(a, SubscriptionOptions(minimumInterval: interval)))
        var times: [Double] = []
        for s in 0..<150 {
            for t in [Double(s), Double(s) - 0.2] {
                for f in engine.handle(.fix(fix(at: t, origin))).locations(for: a) { times.append(f.time - t0) }
            }
        }
        #expect(times == (interval == 0 ? (0..<150).map(Double.init) : [0, 60, 120]))
    }
}

@Suite struct EngineTests {
    @Test func eachSubscriberHasItsOwnReference() {
        var engine = Engine()
        let coarse = SubscriberID(1), fine = SubscriberID(2)
        _ = engine.handle(.subscribe(coarse, SubscriptionOptions(distanceFilter: 100)))
        _ = engine.handle(.subscribe(fine, SubscriptionOptions(distanceFilter: 10)))
        var out: [Delivery] = []
        for s in 0...100 { engine.handle(.fix(fix(at: Double(s), north(of: origin, metres: Double(s)))), into: &out) }
        #expect(out.locations(for: coarse).count == 2)
        #expect(out.locations(for: fine).count == 11)
    }

    @Test func subscribeReportsCurrentStateAndStatusChangesReachEveryone() {
        var engine = Engine()
        #expect(engine.handle(.subscribe(SubscriberID(1), SubscriptionOptions())).statuses == [.disconnected])
        #expect(engine.handle(.source(.connected)).statuses == [.connected])
        _ = engine.handle(.subscribe(SubscriberID(2), SubscriptionOptions()))
        let changed = engine.handle(.noFix(nil))
        #expect(changed.map(\.subscriber) == [SubscriberID(1), SubscriberID(2)])
        #expect(changed.statuses == [.noFix, .noFix])
        #expect(engine.handle(.noFix(nil)).isEmpty)  // no change, no event
        let out = engine.handle(.fix(fix(at: 0, origin)))
        #expect(out.statuses == [.fix, .fix])
        #expect(out.locations(for: SubscriberID(1)).count == 1)
    }

    /// A new subscriber's status is the one the others were sent at the change, time included:
    /// the time at which the state was entered, not the last fix's (a `disconnected` stamped
    /// with a fix from before gpsd went away says the fix was lost later than it was).
    @Test func aNewSubscribersStatusCarriesTheTimeOfTheChange() {
        func status(_ out: [Delivery], _ id: SubscriberID) -> (SourceState, Timestamp?)? {
            for d in out where d.subscriber == id { if case .status(let s, let t) = d.event { return (s, t) } }
            return nil
        }
        var engine = Engine()
        let live = SubscriberID(1)
        _ = engine.handle(.subscribe(live, SubscriptionOptions()))
        _ = engine.handle(.fix(fix(at: 0, origin)))
        let entered = engine.handle(.fix(fix(at: 1, origin)))  // no change: no status
        #expect(entered.statuses.isEmpty)
        var id: UInt64 = 10
        func joiner() -> (SourceState, Timestamp?)? {
            id += 1
            return status(engine.handle(.subscribe(SubscriberID(id), SubscriptionOptions())), SubscriberID(id))
        }
        let fixing = joiner()
        #expect(fixing?.0 == .fix && fixing?.1 == t0, "fix since the first fix: \(String(describing: fixing))")
        for (input, expected) in [(EngineInput.source(.disconnected), SourceState.disconnected), (.source(.connected), .connected), (.noFix(nil), .noFix)] {
            let told = status(engine.handle(input), live)
            let joined = joiner()
            #expect(told?.0 == expected && joined?.0 == expected)
            #expect(joined?.1 == told?.1, "\(expected): a live subscriber was told \(String(describing: told?.1)), a new one \(String(describing: joined?.1))")
        }
        _ = engine.handle(.noFix(t0.adding(seconds: 5)))  // no change: the time stays the change's
        #expect(joiner()?.1 == nil)
    }

    @Test func statusPrecedesTheFixThatCausedIt() {
        var engine = Engine()
        let a = SubscriberID(7)
        _ = engine.handle(.subscribe(a, SubscriptionOptions()))
        let out = engine.handle(.fix(fix(at: 0, origin)))
        guard out.count == 2, case .status(.fix, _) = out[0].event, case .location = out[1].event else {
            Issue.record("expected [status fix, location], got \(out)")
            return
        }
    }

    @Test func unsubscribeStopsDeliveryAndKeepsOthers() {
        var engine = Engine()
        for i in 1...3 { _ = engine.handle(.subscribe(SubscriberID(UInt64(i)), SubscriptionOptions())) }
        _ = engine.handle(.unsubscribe(SubscriberID(1)))
        _ = engine.handle(.unsubscribe(SubscriberID(99)))  // unknown: ignored
        let out = engine.handle(.fix(fix(at: 0, origin)))
        #expect(Set(out.map(\.subscriber)) == [SubscriberID(2), SubscriberID(3)])
        #expect(engine.subscriberCount == 2)
    }

    @Test func resubscribingReplacesOptionsAndResetsTheReference() {
        var engine = Engine()
        let a = SubscriberID(1)
        _ = engine.handle(.subscribe(a, SubscriptionOptions(distanceFilter: 1000)))
        _ = engine.handle(.fix(fix(at: 0, origin)))
        #expect(engine.handle(.fix(fix(at: 1, origin))).locations(for: a).isEmpty)
        _ = engine.handle(.subscribe(a, SubscriptionOptions(distanceFilter: 5)))
        #expect(engine.options(of: a)?.distanceFilter == 5)
        #expect(engine.handle(.fix(fix(at: 2, origin))).locations(for: a).count == 1)
        #expect(engine.subscriberCount == 1)
    }

    @Test func replayIsDeterministic() {
        func run() -> [Delivery] {
            var engine = Engine()
            var out: [Delivery] = []
            engine.handle(.subscribe(SubscriberID(1), SubscriptionOptions(distanceFilter: 25, minimumInterval: 3)), into: &out)
            for s in 0..<500 {
                let c = Coordinate(latitude: origin.latitude + Double(s % 37) * 1e-4, longitude: origin.longitude + Double(s % 11) * 1e-4)
                engine.handle(.fix(fix(at: Double(s), c)), into: &out)
            }
            return out
        }
        let first = run()
        #expect(first.count > 10)
        #expect(first == run())
    }
}
