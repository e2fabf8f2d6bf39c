import Testing
@testable import LocationCore

/// The outlier gate (docs/semantics.md, "Outliers"), through the engine: what a subscriber with
/// default options receives, against a raw subscriber.
@Suite struct OutlierGateTests {
    static let plain = SubscriberID(1), raw = SubscriberID(2)

    /// A fix with a Doppler speed and a 95 % accuracy of 7 m (the demo trip's receiver).
    static func moving(_ seconds: Double, _ coordinate: Coordinate, speed: Double? = 0, accuracy: Double? = 7) -> Fix {
        Fix(time: t0.adding(seconds: seconds), coordinate: coordinate, mode: .threeD,
            horizontalAccuracy: accuracy, speed: speed)
    }

    /// Runs `inputs` with a default and a raw subscriber; returns the times (seconds after t0)
    /// each was sent a location, and the fix time of the input that sent each of the default's.
    static func run(_ inputs: [EngineInput]) -> (plain: [Double], raw: [Double], sentAt: [Double: Double]) {
        var engine = Engine()
        var rawOptions = SubscriptionOptions()
        rawOptions.raw = true
        _ = engine.handle(.subscribe(plain, SubscriptionOptions()))
        _ = engine.handle(.subscribe(raw, rawOptions))
        var plainTimes: [Double] = [], rawTimes: [Double] = [], sentAt: [Double: Double] = [:]
        var now = 0.0
        for input in inputs {
            if case .fix(let f) = input { now = f.time - t0 }
            for d in engine.handle(input) {
                guard case .location(let f) = d.event else { continue }
                if d.subscriber == plain {
                    plainTimes.append(f.time - t0)
                    sentAt[f.time - t0] = now
                } else {
                    rawTimes.append(f.time - t0)
                }
            }
        }
        return (plainTimes, rawTimes, sentAt)
    }

    /// The seconds of `range` but `except`, as `run` reports them.
    static func seconds(_ range: Range<Int>, except: [Int] = []) -> [Double] {
        range.filter { !except.contains($0) }.map { Double($0) }
    }

    /// A device standing still for 60 s, with a spike of `length` epochs 250 m away from second 20.
    static func standing(spike length: Int) -> [EngineInput] {
        (0..<60).map { s in
            let offset = (20..<20 + length).contains(s) ? 250.0 : Double(s % 3)
            return .fix(moving(Double(s), north(of: origin, metres: offset)))
        }
    }

    @Test(arguments: [1, 2, 3])
    func aSpikeOfUpToThreeEpochsReachesNoOneButRawSubscribers(length: Int) {
        let r = Self.run(Self.standing(spike: length))
        #expect(r.plain == Self.seconds(0..<60, except: Array(20..<20 + length)))
        #expect(r.raw == Self.seconds(0..<60))
        // The fix after the spike is back on the track: delivered at once.
        #expect(r.sentAt[Double(20 + length)] == Double(20 + length))
    }

    @Test func aJumpThatPersistsIsDeliveredWholeAfterThreeMoreFixes() {
        // 250 m away from second 20 on, still standing: not a spike, the device is there.
        let inputs: [EngineInput] = (0..<40).map { s in .fix(Self.moving(Double(s), north(of: origin, metres: s >= 20 ? 250 : 0))) }
        let r = Self.run(inputs)
        #expect(r.plain == Self.seconds(0..<40))
        #expect(r.sentAt[20] == 23 && r.sentAt[21] == 23 && r.sentAt[22] == 23 && r.sentAt[23] == 23)
        #expect(r.sentAt[24] == 24)
    }

    @Test func aRealJumpAfterATunnelIsDeliveredAtOnce() {
        // 20 m/s north, 40 s without a fix, out of the tunnel 800 m on.
        var inputs: [EngineInput] = (0..<30).map { s in .fix(Self.moving(Double(s), north(of: origin, metres: 20 * Double(s)), speed: 20)) }
        inputs += (30..<70).map { s in .noFix(t0.adding(seconds: Double(s))) }
        inputs += (70..<80).map { s in .fix(Self.moving(Double(s), north(of: origin, metres: 20 * Double(s)), speed: 20)) }
        let r = Self.run(inputs)
        #expect(r.plain == r.raw)
        #expect(r.sentAt[70] == 70)
    }

    @Test func aUTurnIsNoOutlier() {
        // 15 m/s north, braking at 5 m/s² to a stop, then back south, accelerating at 3 m/s².
        var inputs: [EngineInput] = []
        var position = 0.0, speed = 15.0, heading = 1.0, second = 0.0
        for s in 0..<60 {
            inputs.append(.fix(Self.moving(Double(s), north(of: origin, metres: position), speed: speed)))
            if s >= 10 && heading > 0 { speed = max(0, speed - 5); if speed == 0 { heading = -1 } }
            else if heading < 0 { speed = min(15, speed + 3) }
            position += heading * speed
            second += 1
        }
        let r = Self.run(inputs)
        #expect(r.plain.count == 60)
        #expect(r.plain == r.raw)
    }

    @Test func aFastCarIsNoOutlier() {
        // 70 m/s (252 km/h) with Doppler, and a fix every 2 s.
        let inputs: [EngineInput] = (0..<50).map { i in
            .fix(Self.moving(Double(2 * i), north(of: origin, metres: 140 * Double(i) + Double(i % 2) * 5), speed: 70))
        }
        let r = Self.run(inputs)
        #expect(r.plain.count == 50)
        #expect(r.plain == r.raw)
    }

    @Test func aStaleRepeatedFixDoesNotHoldTheFixAfterIt() {
        // Driving at 10 m/s; from second 10 the receiver repeats its last fix for 30 s (no speed
        // change: it repeats the whole fix), then reports where the device really is, 300 m on.
        var inputs: [EngineInput] = (0..<10).map { s in .fix(Self.moving(Double(s), north(of: origin, metres: 10 * Double(s)), speed: 10)) }
        let stale = north(of: origin, metres: 90)
        inputs += (10..<40).map { s in .fix(Self.moving(Double(s), stale, speed: 10)) }
        inputs += (40..<45).map { s in .fix(Self.moving(Double(s), north(of: origin, metres: 10 * Double(s)), speed: 10)) }
        let r = Self.run(inputs)
        #expect(r.plain == Self.seconds(0..<45))
        #expect(r.sentAt[40] == 40)
    }

    @Test func fixesOfUnknownAccuracyAndSpeedAreJudgedWithWideDefaults() {
        // A walk at 1.4 m/s from a receiver with neither accuracy nor speed: nothing held.
        var inputs: [EngineInput] = (0..<60).map { s in
            .fix(Self.moving(Double(s), north(of: origin, metres: 1.4 * Double(s)), speed: nil, accuracy: nil))
        }
        // A fix 1 km off is still beyond 70 m/s and two 50 m accuracies.
        inputs[30] = .fix(Self.moving(30, north(of: origin, metres: 1000), speed: nil, accuracy: nil))
        let r = Self.run(inputs)
        #expect(r.plain == Self.seconds(0..<60, except: [30]))
        #expect(r.raw.count == 60)
    }

    @Test func anHonestAccuracyIsNoOutlier() {
        // A fix 250 m off that says it may be 300 m off is a bad fix, not an impossible one:
        // the accuracy gate is the subscriber's to set.
        var inputs = Self.standing(spike: 0)
        inputs[20] = .fix(Self.moving(20, north(of: origin, metres: 250), accuracy: 300))
        #expect(Self.run(inputs).plain.count == 60)
    }

    @Test func aSpikeReachesNoVisitSignificantChangeOrRegion() throws {
        // 10 minutes standing with a 3-epoch spike 2 km away: a visit, no significant change
        // after the first, and a region at the spike's place never entered.
        var engine = Engine()
        var options = SubscriptionOptions(events: [.visits, .significant])
        options.significantParameters.interval = 0
        _ = engine.handle(.subscribe(Self.plain, options))
        let program = ProgramID("p")
        engine.bind(Self.plain, to: program)
        try engine.addRegions([Region(id: "far", center: north(of: origin, metres: 2000), radius: 100)], for: program)
        var events: [Event] = []
        for s in 0..<600 {
            let metres = (300..<303).contains(s) ? 2000.0 : Double(s % 3)
            events += engine.handle(.fix(Self.moving(Double(s), north(of: origin, metres: metres)))).map(\.event)
        }
        #expect(events.filter { if case .significant = $0 { true } else { false } }.count == 1)
        #expect(!events.contains { if case .region(let e) = $0 { e.kind == .enter } else { false } })
        let visits = events.compactMap { if case .visit(let v) = $0 { v } else { nil } }
        #expect(visits.map(\.kind) == [.arrival])
        #expect(engine.outliers.dropped == 3)
    }

    @Test func theSourceGoingAwayDropsWhatIsHeld() {
        var engine = Engine()
        _ = engine.handle(.subscribe(Self.plain, SubscriptionOptions()))
        _ = engine.handle(.fix(Self.moving(0, origin)))
        #expect(engine.handle(.fix(Self.moving(1, north(of: origin, metres: 500)))).locations(for: Self.plain).isEmpty)
        _ = engine.handle(.source(.disconnected))
        #expect(engine.outliers.held.isEmpty)
        // After the reconnection the next fix is a first one, wherever it is.
        _ = engine.handle(.source(.connected))
        #expect(engine.handle(.fix(Self.moving(2, north(of: origin, metres: 5000)))).locations(for: Self.plain).count == 1)
    }
}
