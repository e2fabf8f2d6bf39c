import Testing
@testable import LocationCore
#if canImport(Glibc)
import Glibc
#endif

/// Pause when stationary (docs/semantics.md, "Pause when stationary"), through the engine.
@Suite struct StationaryPauseTests {
    static let id = SubscriberID(1)

    /// What the subscription received, in order: `L` + second for a location, `paused@s`,
    /// `resumed@s`, `arrival`, `departure`.
    static func run(_ inputs: [EngineInput], activity: ActivityType = .other,
                    events: EventKinds = .location) -> [String] {
        var engine = Engine()
        var options = SubscriptionOptions(events: events)
        options.pausesWhenStationary = true
        options.activityType = activity
        _ = engine.handle(.subscribe(id, options))
        var log: [String] = []
        for input in inputs {
            for d in engine.handle(input) {
                switch d.event {
                case .location(let f): log.append("L\(Int(f.time - t0))")
                case .paused(let t): log.append("paused@\(Int(t - t0))")
                case .resumed(let t): log.append("resumed@\(Int(t - t0))")
                case .visit(let v): log.append(v.kind.rawValue)
                default: break
                }
            }
        }
        return log
    }

    static func fix(_ s: Int, _ metres: Double, speed: Double, accuracy: Double = 7) -> EngineInput {
        .fix(OutlierGateTests.moving(Double(s), north(of: origin, metres: metres), speed: speed, accuracy: accuracy))
    }

    /// Standing with ±6 m of noise and Doppler noise of a few cm/s, for `range`.
    static func standing(_ range: Range<Int>, at metres: Double = 0) -> [EngineInput] {
        range.map { s in fix(s, metres + Double(s % 5) * 3 - 6, speed: Double(s % 4) * 0.05) }
    }

    @Test func stillForTheActivitysTimePausesAndWalkingResumes() {
        var inputs = Self.standing(0..<300)
        // Walking north at 1.4 m/s from second 300.
        inputs += (300..<330).map { s in Self.fix(s, 1.4 * Double(s - 300), speed: 1.4) }
        let log = Self.run(inputs)
        // `other`: 120 s still from second 0; the fix that completes it is not delivered.
        #expect(Array(log.prefix(121)) == (0..<120).map { "L\($0)" } + ["paused@120"])
        // Nothing while paused; three moving fixes over 2 s resume, and the third is delivered.
        #expect(Array(log.dropFirst(121)) == ["resumed@302"] + (302..<330).map { "L\($0)" })
    }

    @Test(arguments: [(ActivityType.automotive, 300), (.fitness, 180), (.other, 120)])
    func eachActivityWaitsItsOwnTime(activity: ActivityType, seconds: Int) {
        let log = Self.run(Self.standing(0..<400), activity: activity)
        #expect(log.contains("paused@\(seconds)"))
        #expect(log.last == "paused@\(seconds)")
    }

    @Test func jitterAndSpikesNeverResume() {
        var inputs = Self.standing(0..<200)
        // Indoor jitter: ±110 m wandering, Doppler still near zero, and wider accuracies.
        inputs += (200..<800).map { s in
            let wander = 110 * sin(Double(s - 200) / 15)
            return Self.fix(s, wander, speed: 0.1, accuracy: 40)
        }
        // A 3-epoch multipath spike 400 m away (the outlier gate drops it), and one that
        // persists 4 epochs (accepted by the gate, but without speed: not movement).
        inputs[500] = Self.fix(500, 400, speed: 0); inputs[501] = Self.fix(501, 400, speed: 0); inputs[502] = Self.fix(502, 400, speed: 0)
        for s in 600..<604 { inputs[s] = Self.fix(s, 400, speed: 0.1) }
        let log = Self.run(inputs)
        #expect(log.filter { $0.hasPrefix("paused") } == ["paused@120"])
        #expect(!log.contains { $0.hasPrefix("resumed") })
    }

    @Test func walkingNeverPauses() {
        // An hour's walk at 1.2 m/s with stops of 60 s at crossings every 10 minutes.
        var inputs: [EngineInput] = []
        var position = 0.0
        for s in 0..<3600 {
            let stopped = s % 600 >= 540
            inputs.append(Self.fix(s, position, speed: stopped ? 0 : 1.2))
            if !stopped { position += 1.2 }
        }
        #expect(!Self.run(inputs).contains { $0.hasPrefix("paused") })
    }

    @Test func aRedLightNeverPausesACarButParkingDoes() {
        var inputs: [EngineInput] = []
        var position = 0.0
        // 14 m/s, a 120 s red light, on, then parked for 6 minutes.
        for s in 0..<600 {
            let stopped = (100..<220).contains(s) || s >= 240
            inputs.append(Self.fix(s, position + Double(s % 3), speed: stopped ? 0 : 14))
            if !stopped { position += 14 }
        }
        let log = Self.run(inputs, activity: .automotive)
        #expect(log.filter { $0.hasPrefix("paused") } == ["paused@540"])
    }

    @Test func fixesComingBackFarAwayAfterAGapResumeWithoutDoppler() {
        var inputs = Self.standing(0..<200)
        inputs += (200..<800).map { s in .noFix(t0.adding(seconds: Double(s))) }
        // Parked 2 km away, Doppler zero: resumed after 30 s of fixes all that far.
        inputs += (800..<840).map { s in Self.fix(s, 2000 + Double(s % 3), speed: 0) }
        let log = Self.run(inputs)
        #expect(log.contains("paused@120"))
        #expect(Array(log.drop { $0 != "resumed@830" }.prefix(2)) == ["resumed@830", "L830"])
    }

    @Test func visitsGoOnWhilePaused() {
        let log = Self.run(Self.standing(0..<400), events: [.location, .visits])
        let paused = log.firstIndex(of: "paused@120")!
        // The arrival comes after the dwell (300 s), while the locations are paused.
        #expect(log[paused...].contains("arrival"))
        #expect(!log[(paused + 1)...].contains { $0.hasPrefix("L") })
    }

    @Test func anApproximateSubscriptionNeverPauses() {
        var engine = Engine()
        var options = SubscriptionOptions()
        options.pausesWhenStationary = true
        options.accuracy = .approximate
        _ = engine.handle(.subscribe(Self.id, options))
        var events: [Event] = []
        for input in Self.standing(0..<400) { events += engine.handle(input).map(\.event) }
        #expect(!events.contains { if case .paused = $0 { true } else { false } })
        #expect(events.contains { if case .location = $0 { true } else { false } })
    }
}
