import Glibc
import LocationClient
import LocationCore
@testable import LocationDaemon
import LocationProtocol
import Logging
import NIOCore
import NIOEmbedded
import NIOPosix
import Testing

/// What the hub adds to the core's publication epochs (docs/privacy.md, "Publication epochs"):
/// ticks by its clock, background events of publications without a fix written at once, and
/// the backlog before the location a new approximate subscription is shown.
@Suite(.timeLimit(.minutes(5))) struct PublicationTests {
    static let t0 = CivilTime(year: 2026, month: 6, day: 1, hour: 8).timestamp  // an epoch start
    static let home = Coordinate(latitude: 52.52, longitude: 13.40)

    static var quiet: Logger {
        var logger = Logger(label: "test")
        logger.logLevel = .critical
        return logger
    }

    static func fix(_ s: Int, north: Double = 0) -> EngineInput {
        .fix(Fix(time: t0.adding(seconds: Double(s)),
                 coordinate: Coordinate(latitude: home.latitude + north / 111_195, longitude: home.longitude),
                 mode: .threeD, horizontalAccuracy: 5))
    }

    final class Recorder: HubSubscriber, @unchecked Sendable {
        let program = ProgramID("p")
        var events: [Event] = []
        func deliver(_ event: Event, encoded: ByteBuffer) { events.append(event) }
    }

    /// A live source's hub on a virtual clock, an approximate subscriber's recorder, and a fix
    /// each second for `fixes` seconds.
    static func liveHub(fixes: Int) -> (EmbeddedEventLoop, Hub, Recorder) {
        let loop = EmbeddedEventLoop()
        let hub = Hub(eventLoop: loop, sourceDescription: "test", logger: Self.quiet, publicationTicks: true)
        let recorder = Recorder()
        var o = SubscriptionOptions()
        o.accuracy = .approximate
        hub.subscribe(SubscriberID(1), options: o, subscriber: recorder)
        hub.submit(.source(.connected))
        for s in 0..<fixes {
            hub.submit(Self.fix(s))
            loop.advanceTime(by: .seconds(1))
        }
        return (loop, hub, recorder)
    }

    /// A live source's hub publishes by its clock: reports without a fix and without a time
    /// are shown at the epoch start the clock reaches, not when the fix comes back.
    @Test func aLiveHubTicksAtEpochStartsByItsClock() throws {
        let (loop, hub, recorder) = Self.liveHub(fixes: 100)
        recorder.events.removeAll()
        // Reports without a fix and without a time (gpsd's mode 1 may have none) until 2237 s.
        for _ in 100..<2237 {
            hub.submit(.noFix(nil))
            loop.advanceTime(by: .seconds(1))
        }
        #expect(recorder.events == [.status(.noFix, time: Self.t0.adding(seconds: 600))], "\(recorder.events)")
        recorder.events.removeAll()
        hub.submit(Self.fix(2237))
        #expect(recorder.events.isEmpty, "sent at the regained fix: \(recorder.events)")
        for s in 2238..<2400 {
            loop.advanceTime(by: .seconds(1))
            hub.submit(Self.fix(s))
        }
        #expect(recorder.events.isEmpty, "sent at a report: \(recorder.events)")
        // The clock passes 2400 s: the tick publishes (the report at 2400 s would not).
        loop.advanceTime(by: .seconds(1))
        hub.submit(Self.fix(2400))
        #expect(recorder.events.isEmpty, "sent at the report at 2400 s: \(recorder.events)")
        loop.advanceTime(by: .milliseconds(1))
        #expect(recorder.events.first == .status(.fix, time: Self.t0.adding(seconds: 2400)), "\(recorder.events)")
        try loop.syncShutdownGracefully()
    }

    /// A fix the engine holds (its time jumped: docs/semantics.md, "Time") does not set the
    /// hub's clock: one report an hour ahead just before an epoch start had the tick publish
    /// with the glitch's time.
    @Test func aHeldFixDoesNotSetTheClock() throws {
        let (loop, hub, recorder) = Self.liveHub(fixes: 599)
        recorder.events.removeAll()
        hub.submit(Self.fix(599 + 3600))
        loop.advanceTime(by: .milliseconds(1001))  // past the tick for 600 s
        let shown = recorder.events.compactMap { if case .location(let f) = $0 { f.time } else { nil } }
        #expect(shown == [Self.t0.adding(seconds: 600)], "\(recorder.events)")
        try loop.syncShutdownGracefully()
    }

    /// Nor does a no-fix report whose time is off the timeline (gpsd passes on whatever time a
    /// receiver without a fix has): one an hour ahead just before an epoch start had the tick
    /// publish with its time.
    @Test func aNoFixReportOffTheTimelineDoesNotSetTheClock() throws {
        let (loop, hub, recorder) = Self.liveHub(fixes: 599)
        recorder.events.removeAll()
        hub.submit(.noFix(Self.t0.adding(seconds: 599 + 3600)))
        loop.advanceTime(by: .milliseconds(1001))  // past the tick for 600 s
        let times = recorder.events.compactMap { e -> Timestamp? in
            switch e {
            case .location(let f): f.time
            case .status(_, let t): t
            default: nil
            }
        }
        #expect(!times.isEmpty && times.allSatisfy { $0 == Self.t0.adding(seconds: 600) }, "\(recorder.events)")
        try loop.syncShutdownGracefully()
    }

    /// A replay's hub does not tick: its reports' times are all there is (at any speed).
    @Test func aReplayHubDoesNotTick() throws {
        let loop = EmbeddedEventLoop()
        let hub = Hub(eventLoop: loop, sourceDescription: "test", logger: Self.quiet)
        let recorder = Recorder()
        var o = SubscriptionOptions()
        o.accuracy = .approximate
        hub.subscribe(SubscriberID(1), options: o, subscriber: recorder)
        hub.submit(.source(.connected))
        hub.submit(Self.fix(0))
        recorder.events.removeAll()
        loop.advanceTime(by: .hours(1))
        #expect(recorder.events.isEmpty, "\(recorder.events)")
        try loop.syncShutdownGracefully()
    }

    /// A publication at a report without a fix that makes a background event (an approximate
    /// significant change) writes it at once, not at the next fix: indoors for an hour, it
    /// would be held in memory (lost at a crash), and `queued` would rise when the fix returns.
    @Test func aBackgroundEventPublishedAtANoFixReportIsQueuedAtOnce() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let queue = try EventQueue(database: try Database(path: ":memory:"), limit: 100)
        let hub = Hub(eventLoop: group.next(), sourceDescription: "test", logger: Self.quiet, queue: queue)
        let program = ProgramID("p")
        var options = SubscriptionOptions(events: [.significant])
        options.accuracy = .approximate
        let o = options
        try await hub.eventLoop.submit { hub.restoreBackground(program, options: o) }.get()
        for s in 0..<700 { hub.submit(Self.fix(s)) }
        for s in 700..<1200 { hub.submit(Self.fix(s, north: 6000)) }  // another cell from 700 s
        await hub.processed()
        let before = try await hub.eventLoop.submit { queue.count(of: program) }.get()
        // Indoors from 1200 s: the epoch's first report has no fix, and publishes the new cell.
        for s in 1200..<1300 { hub.submit(.noFix(Self.t0.adding(seconds: Double(s)))) }
        await hub.processed()
        let indoors = try await hub.eventLoop.submit { queue.count(of: program) }.get()
        #expect(indoors == before + 1, "queued: \(before) → \(indoors)")
        try await group.shutdownGracefully()
    }

    /// An `always` approximate program subscribing gets its backlog right after the first
    /// status, before the location it is shown at once (docs/protocol.md, "Background delivery").
    @Test func theBacklogPrecedesThePublishedLocation() async throws {
        let queue = try EventQueue(database: try Database(path: ":memory:"), limit: 100)
        let h = try await ServerHarness.start(queue: queue)
        defer { h.stopIfRunning() }
        var policy = Policy()
        policy.ownerRule = false
        policy.rules = [PolicyRule(name: "me", user: getuid(), authorization: .always, accuracy: .approximate)]
        try await h.server.applyPolicy(policy)
        let program = PeerIdentity.resolve(PeerCredentials(pid: getpid(), uid: getuid(), gid: getgid())).program
        let old = Fix(time: Self.t0.adding(seconds: -3600), coordinate: Self.home, mode: .twoD, horizontalAccuracy: 2122)
        try await h.hub.eventLoop.submit { try queue.append([ProgramEvent(program: program, event: .significant(old))]) }.get()
        for s in 0..<10 { h.hub.submit(Self.fix(s)) }
        await h.hub.processed()
        let client = try await LocationClient.connect(path: h.path)
        try await client.startSession(.always)
        var reader = MessageReader(client)
        try client.send(.subscribe(id: .string("s"), options: SubscriptionOptions(events: [.location])))
        let seen = try await reader.read(timeout: 10) { $0.contains { if case .location = $0 { true } else { false } } }
        let kinds = seen.compactMap { m -> String? in
            switch m {
            case .subscribed: "subscribed"
            case .status: "status"
            case .queued: "queued"
            case .location: "location"
            default: nil
            }
        }
        #expect(kinds == ["subscribed", "status", "queued", "location"], "\(seen)")
        client.close()
        await h.stop()
    }
}
