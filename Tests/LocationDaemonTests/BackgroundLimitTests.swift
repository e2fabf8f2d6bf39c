import Glibc
import LocationClient
import LocationCore
@testable import LocationDaemon
import LocationProtocol
import Logging
import NIOCore
import NIOEmbedded
import Testing

/// `[store] max_background_programs_per_user` (docs/configuration.md): a program is a uid and
/// an executable, and a user can make as many executables as it likes (copies, hard links);
/// each kept a background monitor in memory and a queue of up to `queue_limit` rows.
@Suite(.serialized, .timeLimit(.minutes(5))) struct BackgroundLimitTests {
    static let visits = SubscriptionOptions(events: [.location, .visits])

    /// Over the socket: at the bound, an `always` subscribe with visits from another program of
    /// the user is refused, naming the setting, and logged; one without visits or significant
    /// changes is not, nor is another user's program counted, nor root under the owner rule.
    @Test func aUsersProgramsShareABackgroundLimit() async throws {
        let log = CapturedLog()
        let h = try await ServerHarness.start(log: log, maxBackgroundProgramsPerUser: 1)
        defer { h.stopIfRunning() }
        var policy = Policy()
        policy.ownerRule = false
        policy.rules = [PolicyRule(name: "me", user: getuid(), authorization: .always, accuracy: .precise)]
        try await h.server.applyPolicy(policy)
        let copy = ProgramID("uid=\(getuid()) exe=/opt/copy-1/app")
        let stranger = ProgramID("uid=\(getuid() &+ 4242) exe=/opt/copy-2/app")
        try await h.hub.eventLoop.submit {
            h.hub.restoreBackground(copy, options: Self.visits)
            h.hub.restoreBackground(stranger, options: Self.visits)
        }.get()
        let client = try await LocationClient.connect(path: h.path)
        defer { client.close() }
        try await client.startSession(.always)
        do {
            _ = try await client.subscribe(Self.visits)
            Issue.record("a second program of the user kept background monitoring")
        } catch let e as ProtocolError {
            #expect(e.code == .tooManyBackgroundPrograms)
            #expect(e.message.hasPrefix("uid \(getuid())'s programs keep 1 background monitors, the most one user may ([store] max_background_programs_per_user = 1); "), "\(e.message)")
        }
        #expect(log.messages(.warning).contains { $0.hasPrefix("refusing background monitoring to a program: uid \(getuid())'s programs keep 1") },
                "\(log.messages(.warning))")
        _ = try await client.subscribe(SubscriptionOptions(events: [.location]))  // nothing kept away: not refused
        #expect(try await h.hub.eventLoop.submit { h.hub.backgroundPrograms(ofUser: getuid()) }.get() == 1)
        // The owner rule: root and the daemon's user are not limited (this test runs as one).
        if getuid() == 0 || getuid() == Policy().ownerUID {
            try await h.server.applyPolicy(Policy())
            _ = try await client.subscribe(Self.visits)
            #expect(try await h.hub.eventLoop.submit { h.hub.backgroundPrograms(ofUser: getuid()) }.get() == 2)
        }
        await h.stop()
    }

    /// A reload that takes `always` from the user's away program and gives it to a connected
    /// one frees the slot the connected one needs: it is kept, not refused (the connections
    /// were reconsidered before the away programs, and the one that gained `always` was refused
    /// with room to spare, its warning logged).
    @Test func aReloadThatFreesASlotKeepsTheSubscriptionItUpgrades() async throws {
        let log = CapturedLog()
        let queue = try EventQueue(database: try Database(path: ":memory:"), limit: 100)
        let h = try await ServerHarness.start(queue: queue, log: log, maxBackgroundProgramsPerUser: 1)
        defer { h.stopIfRunning() }
        let me = try #require(PeerIdentity.resolve(PeerCredentials(pid: getpid(), uid: getuid(), gid: getgid())).executable)
        let away = ProgramID("uid=\(getuid()) exe=/opt/copy-1/app")
        func policy(whenInUse executable: String) -> Policy {
            var p = Policy()
            p.ownerRule = false
            p.rules = [PolicyRule(name: "narrow", executable: executable, authorization: .whenInUse, accuracy: .precise),
                       PolicyRule(name: "me", user: getuid(), authorization: .always, accuracy: .precise)]
            return p
        }
        try await h.server.applyPolicy(policy(whenInUse: me))
        try await h.hub.eventLoop.submit { h.hub.restoreBackground(away, options: Self.visits) }.get()
        let client = try await LocationClient.connect(path: h.path)
        defer { client.close() }
        #expect(try await client.startSession(.always).authorization == .whenInUse)
        _ = try await client.subscribe(Self.visits)

        try await h.server.applyPolicy(policy(whenInUse: "/opt/copy-1/app"))
        let (background, refused, kept) = try await h.hub.eventLoop.submit {
            (h.hub.backgroundProgramIDs, h.hub.backgroundRefusedSubscribers, h.hub.backgroundPrograms(ofUser: getuid()))
        }.get()
        #expect(!background.contains(away))
        #expect(refused.isEmpty, "the upgraded subscription was refused")
        #expect(kept == 1, "the upgraded subscription is not kept")
        let refusals = log.messages(.warning).filter { $0.hasPrefix("refusing background monitoring") }
        #expect(refusals.isEmpty, "\(refusals)")
        await h.stop()
    }

    /// A reload that makes a subscription `always` at the bound, with no slot freed: it goes on
    /// live, and the journal says so once; a later reload that changes the policy but not its
    /// lot offers it the slot again without warning again (it is not refused anew).
    @Test func aReloadAtTheBoundWarnsOnceOfTheSubscriptionItCannotKeep() async throws {
        let log = CapturedLog()
        let clock = AdvancingClock()
        let queue = try EventQueue(database: try Database(path: ":memory:"), limit: 100)
        let h = try await ServerHarness.start(queue: queue, log: log, maxBackgroundProgramsPerUser: 1) { $0.clock = clock.shellClock; $0.stallBeat = .hours(1) }
        defer { h.stopIfRunning() }
        let me = try #require(PeerIdentity.resolve(PeerCredentials(pid: getpid(), uid: getuid(), gid: getgid())).executable)
        func policy(_ rules: [PolicyRule]) -> Policy {
            var p = Policy()
            p.ownerRule = false
            p.rules = rules + [PolicyRule(name: "me", user: getuid(), authorization: .always, accuracy: .precise)]
            return p
        }
        try await h.server.applyPolicy(policy([PolicyRule(name: "narrow", executable: me, authorization: .whenInUse, accuracy: .precise)]))
        try await h.hub.eventLoop.submit { h.hub.restoreBackground(ProgramID("uid=\(getuid()) exe=/opt/copy-1/app"), options: Self.visits) }.get()
        let client = try await LocationClient.connect(path: h.path)
        defer { client.close() }
        _ = try await client.startSession(.always)
        _ = try await client.subscribe(Self.visits)
        func warnings() -> [String] { log.messages(.warning).filter { $0.hasPrefix("refusing background monitoring") } }

        try await h.server.applyPolicy(policy([]))
        #expect(try await h.hub.eventLoop.submit { h.hub.backgroundRefusedSubscribers.count }.get() == 1)
        #expect(warnings().count == 1 && warnings().allSatisfy { $0.contains("; this subscription goes on while connected, not in the background") },
                "\(warnings())")
        clock.advance(by: .minutes(2))  // past the warnings' pace: a second one would be logged
        try await h.server.applyPolicy(policy([PolicyRule(name: "other", user: getuid() &+ 1, authorization: .denied, accuracy: .approximate)]))
        #expect(try await h.hub.eventLoop.submit { h.hub.backgroundRefusedSubscribers.count }.get() == 1)
        #expect(warnings().count == 1, "\(warnings())")
        await h.stop()
    }

    final class Subscriber: HubSubscriber, @unchecked Sendable {
        let program: ProgramID
        init(_ program: ProgramID) { self.program = program }
        func deliver(_ event: Event, encoded: ByteBuffer) {}
    }

    /// A subscription that became `always` at the bound (a reload, a `session.start`) is not kept
    /// in the background: not remembered, and not handed over when its connection goes away.
    /// A program keeping monitoring already, or another user's, is not refused.
    @Test func aSubscriptionTheBoundRefusedIsNotHandedOver() {
        var logger = Logger(label: "test")
        logger.logLevel = .critical
        let hub = Hub(eventLoop: EmbeddedEventLoop(), sourceDescription: "test", logger: logger, maxBackgroundProgramsPerUser: 1)
        var policy = Policy()
        policy.ownerRule = false
        hub.policy = policy
        let kept = ProgramID("uid=4242 exe=/opt/a"), copy = ProgramID("uid=4242 exe=/opt/b"), other = ProgramID("uid=4343 exe=/opt/b")
        hub.restoreBackground(kept, options: Self.visits)
        #expect(hub.backgroundRefusal(of: kept) == nil)
        #expect(hub.backgroundRefusal(of: other) == nil)
        #expect(hub.backgroundRefusal(of: copy) != nil)

        let refused = SubscriberID(1)
        hub.subscribe(refused, options: Self.visits, subscriber: Subscriber(copy))
        #expect(!hub.subscriptionKept(refused, of: copy, always: Self.visits))
        hub.handOver(refused, to: copy, options: Self.visits)
        #expect(hub.backgroundProgramIDs == [kept])
        #expect(hub.loopSnapshot.subscriberCount == 0)

        // A slot that comes free later (another program's subscription ends) does not make the
        // refused one kept at its hand-over: it was told to go on while connected only, and is
        // never written to the store.
        let first = SubscriberID(3), second = SubscriberID(4)
        let a = ProgramID("uid=4545 exe=/opt/a"), b = ProgramID("uid=4545 exe=/opt/b")
        hub.subscribe(first, options: Self.visits, subscriber: Subscriber(a))
        #expect(hub.subscriptionKept(first, of: a, always: Self.visits))
        hub.subscribe(second, options: Self.visits, subscriber: Subscriber(b))
        #expect(!hub.subscriptionKept(second, of: b, always: Self.visits))
        hub.unsubscribe(first)
        #expect(hub.backgroundRefusal(of: b) == nil)
        hub.handOver(second, to: b, options: Self.visits)
        #expect(!hub.backgroundProgramIDs.contains(b))
        #expect(hub.backgroundRefusedSubscribers.isEmpty, "a refusal outlived its subscription")

        let allowed = SubscriberID(2)
        hub.subscribe(allowed, options: Self.visits, subscriber: Subscriber(other))
        #expect(hub.subscriptionKept(allowed, of: other, always: Self.visits))
        hub.handOver(allowed, to: other, options: Self.visits)
        #expect(Set(hub.backgroundProgramIDs) == [kept, other])
    }
}
