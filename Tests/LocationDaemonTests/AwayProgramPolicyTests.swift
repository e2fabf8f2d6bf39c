import Foundation
import LocationClient
import LocationCore
@testable import LocationDaemon
import LocationProtocol
import Logging
import NIOPosix
import Synchronization
import TestSupport
import Testing

/// What a program keeps while it is away, decided again by the policy at start and on reload
/// (docs/privacy.md, "Programs that are away"): the rule, the identity it is matched by, the
/// store, and the hub applying them to a real SQLite file.
@Suite struct AwayProgramPolicyTests {
    static let tracker = PeerIdentity(pid: 31337, uid: 4242, gid: 4242, groups: [900, 4242], executable: "/usr/bin/tracker")
    static let home = Coordinate(latitude: 52.5, longitude: 13.4)
    static let t0 = CivilTime(year: 2026, month: 6, day: 1, hour: 8).timestamp

    static func policy(group: UInt32 = 900, _ authorization: Authorization, _ accuracy: Accuracy, purposes: [String] = []) -> Policy {
        var p = Policy()
        p.ownerRule = false
        p.rules = [PolicyRule(name: "trackers", group: group, authorization: authorization, accuracy: accuracy, purposes: purposes)]
        return p
    }

    @Test func whatARuleLetsAProgramKeepWhileAway() {
        func rule(_ a: Authorization, _ c: Accuracy, purposes: [String] = []) -> PolicyRule {
            PolicyRule(name: "r", authorization: a, accuracy: c, purposes: purposes)
        }
        // (rule, queue, regions, precise background, approximate background)
        let table: [(PolicyRule, Bool, Bool, Bool, Bool)] = [
            (rule(.always, .precise), true, true, true, true),
            (rule(.always, .approximate), true, false, false, true),
            (rule(.always, .approximate, purposes: ["navigation"]), true, true, true, true),
            (rule(.whenInUse, .precise), false, false, false, false),
            (rule(.denied, .precise), false, false, false, false),
        ]
        for (r, queue, regions, precise, approximate) in table {
            #expect(r.keepsQueue == queue, "\(r)")
            #expect(r.monitorsRegions == regions, "\(r)")
            #expect(r.keepsBackground(at: .precise) == precise, "\(r)")
            #expect(r.keepsBackground(at: .approximate) == approximate, "\(r)")
        }
    }

    @Test func aProgramWithNoRecordedIdentityIsPresumedFromItsIDAndTheUserDatabase() throws {
        let root = try #require(PeerIdentity.presumed(for: ProgramID("uid=0 exe=/usr/sbin/agent")))
        #expect(root.uid == 0 && root.gid == 0 && root.groups.contains(0) && root.executable == "/usr/sbin/agent")
        // A uid the user database does not know: no groups to match.
        let stranger = try #require(PeerIdentity.presumed(for: ProgramID("uid=3999999 exe=?")))
        #expect(stranger.uid == 3_999_999 && stranger.groups.isEmpty && stranger.executable == nil)
        #expect(stranger.program == ProgramID("uid=3999999 exe=?"))
        #expect(PeerIdentity.presumed(for: ProgramID("unknown")) == nil)
        #expect(PeerIdentity.presumed(for: ProgramID("uid=x exe=/bin/true")) == nil)
    }

    /// A presumed identity's executable is unverified: nothing shows the file at the path made
    /// the program's state, so a rule naming the path does not decide alone. Taken as verified,
    /// an `always` precise rule for /usr/bin/tracker kept the regions and monitors of a program
    /// no other rule lets be `always` (the default denies).
    @Test func aPresumedIdentityDoesNotProveItsExecutable() async throws {
        #expect(PeerIdentity.presumed(for: ProgramID("uid=0 exe=/usr/sbin/agent"))?.executableVerified == false)
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        try await Self.withHub(path: dir.appendingPathComponent("locationd.db").path) { hub in
            let program = Self.tracker.program
            let kept = try await hub.eventLoop.submit {
                try hub.restoreRegions([RegionRecord(region: Region(id: "home", center: Self.home, radius: 100), state: .outside)], for: program)
                hub.restoreBackground(program, options: SubscriptionOptions(events: [.visits]))
                var policy = Policy()
                policy.ownerRule = false
                policy.rules = [PolicyRule(name: "tracker", executable: Self.tracker.executable, authorization: .always, accuracy: .precise)]
                hub.policy = policy
                hub.enforcePolicy()  // no identity recorded
                return (hub.regionsSuspended(of: program), hub.backgroundProgramIDs)
            }.get()
            #expect(kept.0, "regions monitored by the executable rule alone")
            #expect(kept.1.isEmpty, "background monitor kept by the executable rule alone")
        }
    }

    @Test func identitiesAreRecordedWithoutThePidAndSurviveAReopen() throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("locationd.db").path
        do {
            let identities = try ProgramIdentities(database: Database(path: path))
            identities.record(Self.tracker)
            var moved = Self.tracker
            moved.groups = [4242]
            identities.record(PeerIdentity(pid: 1, uid: 0, gid: 0, executable: nil))
            identities.record(moved)  // the last always session's identity wins
        }
        let reopened = try ProgramIdentities(database: Database(path: path))
        var expected = Self.tracker
        expected.pid = 0
        expected.groups = [4242]
        #expect(reopened.recorded(Self.tracker.program) == expected)
        #expect(reopened.recorded(ProgramID("uid=0 exe=?")) == PeerIdentity(pid: 0, uid: 0, gid: 0, executable: nil))
        #expect(reopened.recorded(ProgramID("uid=1 exe=?")) == nil)
    }

    /// A recorded identity lives as long as its program keeps something while away: a program
    /// whose last connection closes keeping nothing is forgotten, one with regions is not, and a
    /// reload or start forgets every row of a program that keeps nothing. (Every program an
    /// `always` rule ever let in kept a row for good: 4,000 programs, 4,000 rows, a MiB of memory.)
    @Test func identitiesLiveAsLongAsWhatTheProgramKeeps() async throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("locationd.db").path
        let database = try Database(path: path)
        let identities = try ProgramIdentities(database: database)
        let regions = try RegionStore(database: database)
        let h = try await ServerHarness.start(store: regions, identities: identities)
        defer { h.stopIfRunning() }
        let me = PeerIdentity.resolve(PeerCredentials(pid: getpid(), uid: getuid(), gid: getgid())).program
        func recorded() async throws -> Bool { try await h.hub.eventLoop.submit { identities.recorded(me) != nil }.get() }
        /// Until the server has handled every close.
        func allClosed() async throws {
            _ = try await waitUntil(timeout: 20) { try await h.hub.eventLoop.submit({ h.server.registry.all.isEmpty }).get() }
        }

        let first = try await LocationClient.connect(path: h.path)
        let second = try await LocationClient.connect(path: h.path)
        try await first.startSession(.always)
        #expect(try await recorded())
        first.close()
        _ = try await second.status()  // a round trip: the first's close is handled before it
        #expect(try await recorded(), "forgotten while another connection of the program is open")
        second.close()
        try await allClosed()
        #expect(try await !recorded(), "a program that keeps nothing keeps its identity")

        let keeper = try await LocationClient.connect(path: h.path)
        try await keeper.startSession(.always)
        _ = try await keeper.request { .regionsAdd(id: $0, regions: [Region(id: "home", center: Self.home, radius: 100)]) }
        keeper.close()
        try await allClosed()
        #expect(try await recorded(), "forgotten though the program has regions")

        // A start or reload forgets the rows of programs that keep nothing.
        let stranger = PeerIdentity(pid: 7, uid: 4343, gid: 4343, executable: "/opt/gone-1.0/bin/app")
        try await h.hub.eventLoop.submit {
            identities.record(stranger)
            h.hub.enforcePolicy()
        }.get()
        await h.stop()
        let reopened = try ProgramIdentities(database: Database(path: path))
        #expect(reopened.recorded(stranger.program) == nil)
        #expect(reopened.recorded(me) != nil)
    }

    /// A reload while a program's `always` subscription is open keeps its identity (it decides
    /// the hand-over), and the hand-over records it in any case: a reload forgot it, and after
    /// the close the program's background monitor was matched by the user database's groups.
    @Test func aReloadKeepsTheIdentityOfAnOpenAlwaysSubscription() async throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("locationd.db").path
        let database = try Database(path: path)
        let identities = try ProgramIdentities(database: database)
        let h = try await ServerHarness.start(queue: try EventQueue(database: database, limit: 100), identities: identities)
        defer { h.stopIfRunning() }
        let me = PeerIdentity.resolve(PeerCredentials(pid: getpid(), uid: getuid(), gid: getgid())).program
        let client = try await LocationClient.connect(path: h.path)
        try await client.startSession(.always)
        _ = try await client.subscribe(SubscriptionOptions(events: [.visits]))
        let kept = try await h.hub.eventLoop.submit { h.hub.enforcePolicy(); return identities.recorded(me) != nil }.get()
        #expect(kept, "a reload forgot the identity of an open always subscription")
        try await h.hub.eventLoop.submit { identities.forget(me) }.get()  // as a forgetful reload would
        client.close()
        _ = try await waitUntil(timeout: 20) { try await !h.hub.eventLoop.submit({ h.hub.backgroundProgramIDs.isEmpty }).get() }
        #expect(try await h.hub.eventLoop.submit { (h.hub.backgroundProgramIDs, identities.recorded(me) != nil) }.get() == ([me], true))
        await h.stop()
    }

    /// A program that is never verified (in a directory the daemon's user may not search) is
    /// recorded as it is, marked, and decides for itself: its `always` precise session resumes
    /// its regions (they stayed suspended, its identity never recorded).
    @Test func aProgramNeverVerifiedIsRecordedAsSuch() async throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("locationd.db").path
        let unverified = PeerIdentity(pid: 1, uid: Self.tracker.uid, gid: Self.tracker.gid, groups: Self.tracker.groups,
                                      executable: "/home/alice/bin/tracker", executableVerified: false)
        try await Self.withHub(path: path) { hub in
            let program = unverified.program
            let resumed = try await hub.eventLoop.submit {
                try hub.restoreRegions([RegionRecord(region: Region(id: "home", center: Self.home, radius: 100), state: .outside)], for: program)
                hub.policy = Self.policy(.whenInUse, .precise)
                hub.enforcePolicy()  // suspended: no identity recorded, the user database has no such user
                guard hub.regionsSuspended(of: program) else { return false }
                hub.policy = Self.policy(.always, .precise)
                hub.programSeen(unverified, rule: hub.policy.rule(for: unverified))
                return !hub.regionsSuspended(of: program)
            }.get()
            #expect(resumed)
        }
        let recorded = try ProgramIdentities(database: Database(path: path)).recorded(unverified.program)
        #expect(recorded?.executable == "/home/alice/bin/tracker" && recorded?.executableVerified == false)
    }

    /// Peers of a program with regions that subscribe (`always`, visits) and are gone before the
    /// daemon writes to them: nothing is left bound to the dead subscriptions, so the region events
    /// of the program, now away, are queued (a leaked binding would send them to a subscriber that
    /// no longer exists, and they would be lost). The bursts are longer than one read, so NIO also
    /// reads requests from inside the failed writes.
    @Test func regionEventsOfAProgramWhosePeersVanishedAreQueued() async throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let database = try Database(path: dir.appendingPathComponent("locationd.db").path)
        let queue = try EventQueue(database: database, limit: 100)
        let h = try await ServerHarness.start(store: try RegionStore(database: database), queue: queue,
                                              identities: try ProgramIdentities(database: database))
        defer { h.stopIfRunning() }
        let me = PeerIdentity.resolve(PeerCredentials(pid: getpid(), uid: getuid(), gid: getgid())).program
        let owner = try await LocationClient.connect(path: h.path)
        try await owner.startSession(.always)
        _ = try await owner.request { .regionsAdd(id: $0, regions: [Region(id: "home", center: Self.home, radius: 100)]) }
        owner.close()
        try await Self.feed(h.hub, seconds: 0..<3, metresNorth: 1000)  // outside

        let burst = String(repeating: #"""
            {"type":"session.start","authorization":"always"}
            {"type":"subscribe","events":["location","visits"]}
            {"type":"status"}

            """#, count: 40)
        try h.vanishingPeers(20, sending: burst)
        _ = try await waitUntil(timeout: 20) { try await h.hub.eventLoop.submit({ h.server.registry.all.isEmpty }).get() }

        try await Self.feed(h.hub, seconds: 40..<43, metresNorth: 0)  // enters home
        let queued = try await h.hub.eventLoop.submit { queue.backlog(of: me) }.get()
            .compactMap { try? ServerMessage.decode(String(decoding: $0.dropLast(), as: UTF8.self)) }
        #expect(queued.contains { if case .queued(_, .region(let e)) = $0 { e.kind == .enter } else { false } }, "\(queued)")
        #expect(try await h.hub.snapshot().subscriberCount == 0)
        await h.stop()
    }

    /// A process that may not be the program's file (an old binary after an upgrade, or one from
    /// a mount namespace of its own) does not speak for the program: its narrower rule does not
    /// discard the program's queue or suspend its regions, and its identity is not recorded.
    @Test func anUnverifiedProcessDoesNotDecideForItsProgram() async throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        try await Self.withHub(path: dir.appendingPathComponent("locationd.db").path) { hub in
            let program = Self.tracker.program
            try await hub.eventLoop.submit {
                hub.policy = Self.policy(.always, .precise)
                hub.programSeen(Self.tracker, rule: hub.policy.rule(for: Self.tracker))
                try hub.restoreRegions([RegionRecord(region: Region(id: "home", center: Self.home, radius: 100), state: .outside)], for: program)
                hub.restoreBackground(program, options: SubscriptionOptions(events: [.visits, .significant]))
            }.get()
            try await Self.feed(hub, seconds: 0..<5, metresNorth: 0)  // enter home, queued
            let queue = try #require(hub.queue)
            let impostor = PeerIdentity(pid: Self.tracker.pid, uid: Self.tracker.uid, gid: Self.tracker.gid, groups: Self.tracker.groups,
                                        executable: Self.tracker.executable, executableVerified: false)
            let (before, after) = try await hub.eventLoop.submit {
                let before = queue.count(of: program)
                hub.programSeen(impostor, rule: PolicyRule(name: "narrow", authorization: .whenInUse, accuracy: .approximate))
                return (before, (queue.count(of: program), hub.backgroundProgramIDs, hub.regionsSuspended(of: program),
                                 hub.identities?.recorded(program)))
            }.get()
            var expected = Self.tracker
            expected.pid = 0
            #expect(before >= 1 && after.0 == before && after.1 == [program] && !after.2 && after.3 == expected)
        }
    }

    /// The tracker (group 900 only through its recorded identity, as a service started with
    /// `SupplementaryGroups=` has it) registers a region and monitors visits, then is away.
    /// Taking `always` away ends its background monitoring, discards its queue and suspends its
    /// regions (the receiver is released); giving it back resumes the regions, and the backlog
    /// starts with an overflow accounting for what was discarded.
    @Test func revokingAlwaysStopsWhatTheProgramKeptAndRestoringItResumesRegions() async throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        try await Self.withHub(path: dir.appendingPathComponent("locationd.db").path) { hub in
        let program = Self.tracker.program
        let demand = DemandLog()
        try await hub.eventLoop.submit {
            hub.policy = Self.policy(.always, .precise)
            hub.onDemandChange { demand.append($0) }
            hub.programSeen(Self.tracker, rule: hub.policy.rule(for: Self.tracker))
            try hub.restoreRegions([RegionRecord(region: Region(id: "home", center: Self.home, radius: 100), state: .outside)], for: program)
            hub.restoreBackground(program, options: SubscriptionOptions(events: [.visits, .significant]))
        }.get()
        try await Self.feed(hub, seconds: 0..<5, metresNorth: 0)  // enter home (and a first significant change), queued
        let queue = try #require(hub.queue)
        let queuedBefore = try await hub.eventLoop.submit { queue.count(of: program) }.get()
        #expect(queuedBefore >= 1)

        // The same policy again: the recorded groups match, nothing changes.
        try await hub.eventLoop.submit { hub.enforcePolicy() }.get()
        #expect(try await hub.eventLoop.submit { (hub.backgroundProgramIDs, queue.count(of: program), hub.needsFixes) }.get()
                == ([program], queuedBefore, true))

        // always → when-in-use.
        try await hub.eventLoop.submit { hub.policy = Self.policy(.whenInUse, .precise); hub.enforcePolicy() }.get()
        let revoked = try await hub.eventLoop.submit {
            (hub.backgroundProgramIDs, queue.count(of: program), hub.regionsSuspended(of: program), hub.needsFixes,
             hub.regionRecords(of: program).map(\.region.id), try queue.loadBackground().map(\.program))
        }.get()
        #expect(revoked.0.isEmpty && revoked.1 == 0 && revoked.2 && !revoked.3)
        #expect(revoked.4 == ["home"], "regions stay registered")
        #expect(revoked.5.isEmpty, "the remembered background monitor is forgotten too")
        #expect(demand.values == [false, true, false])  // nothing restored yet; the first enforcement; revoked
        try await Self.feed(hub, seconds: 5..<10, metresNorth: 1000)  // leaves: nothing evaluated, nothing queued
        #expect(try await hub.eventLoop.submit { queue.count(of: program) }.get() == 0)

        // Back to always: regions resume from their last state; the next fix decides them.
        try await hub.eventLoop.submit { hub.policy = Self.policy(.always, .precise); hub.enforcePolicy() }.get()
        #expect(try await hub.eventLoop.submit { (hub.regionsSuspended(of: program), hub.needsFixes) }.get() == (false, true))
        #expect(demand.values == [false, true, false, true])
        try await Self.feed(hub, seconds: 10..<11, metresNorth: 1000)
        let backlog = try await hub.eventLoop.submit { queue.backlog(of: program) }.get()
            .map { try ServerMessage.decode(String(decoding: $0.dropLast(), as: UTF8.self)) }
        guard backlog.count == 2, case .overflow(let lost, let seq) = backlog[0],
              case .queued(let exitSeq, .region(let exit)) = backlog[1] else {
            Issue.record("backlog: \(backlog)")
            return
        }
        #expect(lost == queuedBefore && seq == UInt64(queuedBefore) && exitSeq == UInt64(queuedBefore) + 1)
        #expect(exit.kind == .exit && exit.time == Self.t0.adding(seconds: 10))
        }
    }

    /// Only programs that may keep something while away leave their identity behind: a
    /// when-in-use or denied program asking adds no row (one hard link after another would
    /// grow the table); a program recorded before is updated whatever its rule now.
    @Test func onlyProgramsThatMayBeAwayAreRecorded() async throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        try await Self.withHub(path: dir.appendingPathComponent("locationd.db").path) { hub in
            let linked = (0..<3).map { i in
                PeerIdentity(pid: 40 + Int32(i), uid: 4242, gid: 4242, groups: [900, 4242], executable: "/home/u/link\(i)")
            }
            let recorded = try await hub.eventLoop.submit {
                hub.policy = Self.policy(.whenInUse, .precise)
                for who in linked { hub.programSeen(who, rule: hub.policy.rule(for: who)) }
                let whenInUse = linked.map { hub.identities?.recorded($0.program) }
                hub.policy = Self.policy(.always, .precise)
                hub.programSeen(Self.tracker, rule: hub.policy.rule(for: Self.tracker))
                let stripped = { var who = Self.tracker; who.groups = [4242]; return who }()
                hub.programSeen(stripped, rule: hub.policy.rule(for: stripped))  // denied now
                return (whenInUse, hub.identities?.recorded(Self.tracker.program)?.groups)
            }.get()
            #expect(recorded.0.allSatisfy { $0 == nil }, "\(recorded.0)")
            #expect(recorded.1 == [4242])
        }
    }

    /// A program whose groups changed is caught when it next asks for a session, not only at
    /// the next reload; asking again with the group back resumes its regions.
    @Test func aSessionWithoutTheGroupStopsWhatTheProgramKeptAtOnce() async throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let stripped = { var who = Self.tracker; who.groups = [4242]; return who }()
        try await Self.withHub(path: dir.appendingPathComponent("locationd.db").path) { hub in
            let program = Self.tracker.program
            let (kept, after, back) = try await hub.eventLoop.submit {
                hub.policy = Self.policy(.always, .precise)
                hub.programSeen(Self.tracker, rule: hub.policy.rule(for: Self.tracker))
                try hub.restoreRegions([RegionRecord(region: Region(id: "home", center: Self.home, radius: 100), state: .outside)], for: program)
                hub.restoreBackground(program, options: SubscriptionOptions(events: [.visits]))
                let kept = (hub.backgroundProgramIDs, hub.regionsSuspended(of: program))
                hub.programSeen(stripped, rule: hub.policy.rule(for: stripped))  // [policy.default]: denied
                let after = (hub.backgroundProgramIDs, hub.regionsSuspended(of: program), hub.identities?.recorded(program)?.groups)
                hub.programSeen(Self.tracker, rule: hub.policy.rule(for: Self.tracker))
                return (kept, after, hub.regionsSuspended(of: program))
            }.get()
            #expect(kept.0 == [program] && !kept.1)
            #expect(after.0.isEmpty && after.1 && after.2 == [4242])
            #expect(!back)
        }
    }

    /// always precise → always approximate: a precise background monitor and the regions stop,
    /// an approximate monitor and the queue stay.
    @Test func losingPreciseStopsRegionsAndPreciseMonitorsOnly() async throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let coarse = { var c = Self.tracker; c.executable = "/usr/bin/coarse"; return c }()
        let approximate = { var o = SubscriptionOptions(events: [.visits]); o.accuracy = .approximate; return o }()
        try await Self.withHub(path: dir.appendingPathComponent("locationd.db").path) { hub in
        let queue = try #require(hub.queue)
        let after = try await hub.eventLoop.submit {
            hub.policy = Self.policy(.always, .precise)
            for who in [Self.tracker, coarse] { hub.programSeen(who, rule: hub.policy.rule(for: who)) }
            try hub.restoreRegions([RegionRecord(region: Region(id: "home", center: Self.home, radius: 100), state: .outside)], for: Self.tracker.program)
            hub.restoreBackground(Self.tracker.program, options: SubscriptionOptions(events: [.visits]))
            hub.restoreBackground(coarse.program, options: approximate)
            try queue.database.transaction {
                try queue.append([ProgramEvent(program: Self.tracker.program, event: .status(.fix, time: Self.t0))])
            }
            hub.policy = Self.policy(.always, .approximate)
            hub.enforcePolicy()
            return (hub.backgroundProgramIDs, hub.regionsSuspended(of: Self.tracker.program), queue.count(of: Self.tracker.program))
        }.get()
        #expect(after.0 == [coarse.program] && after.1 && after.2 == 1)
        }
    }

    // MARK: Support

    static func directory() throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("away-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir
    }

    /// A hub on its own loop with every store on the database at `path`, shut down after `body`.
    static var quiet: Logger {
        var logger = Logger(label: "test")
        logger.logLevel = .critical
        return logger
    }

    static func withHub(path: String, logger: Logger = quiet, _ body: (Hub) async throws -> Void) async throws {
        let database = try Database(path: path)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let hub = Hub(eventLoop: group.next(), sourceDescription: "test", logger: logger,
                      regionStore: try RegionStore(database: database), queue: try EventQueue(database: database, limit: 100),
                      identities: try ProgramIdentities(database: database))
        do { try await body(hub) } catch {
            try? await group.shutdownGracefully()
            throw error
        }
        try await group.shutdownGracefully()
    }

    /// One fix a second, `metresNorth` of home, 5 m accuracy, without a speed. A move of 1 km
    /// needs some 20 s since the previous fix, or the outlier gate holds it as a jump
    /// (docs/semantics.md, "Outliers").
    static func feed(_ hub: Hub, seconds: Range<Int>, metresNorth: Double) async throws {
        for s in seconds {
            let coordinate = Coordinate(latitude: home.latitude + metresNorth / 111_195, longitude: home.longitude)
            hub.submit(.fix(Fix(time: t0.adding(seconds: Double(s)), coordinate: coordinate, mode: .threeD, horizontalAccuracy: 5)))
        }
        await hub.processed()
    }
}

/// The receiver-demand changes the hub reported, in order.
final class DemandLog: Sendable {
    private let log = Mutex<[Bool]>([])
    func append(_ value: Bool) { log.withLock { $0.append(value) } }
    var values: [Bool] { log.withLock { $0 } }
}
