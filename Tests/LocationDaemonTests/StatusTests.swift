import Foundation
import LocationClient
import LocationCore
import LocationProtocol
import Testing
@testable import LocationDaemon

/// The status reply's connection list through the socket (in process: every client is this
/// test executable running as root, so the built-in owner rule applies unless a test turns it off).
@Suite(.serialized, .timeLimit(.minutes(5))) struct StatusConnectionTests {
    static var me: String { URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path }

    @Test func ownerSeesEverySessionWithItsGrant() async throws {
        let h = try await ServerHarness.start()
        defer { h.stopIfRunning() }
        let navigator = try await LocationClient.connect(path: h.path)
        let weather = try await LocationClient.connect(path: h.path)
        let asker = try await LocationClient.connect(path: h.path)
        try await navigator.startSession(.always)
        try await navigator.subscribe()
        try await weather.startSession(.whenInUse, purpose: "radar")

        let status = try await asker.status()
        #expect(status.connected == 3 && status.sessions == 2 && status.subscribers == 1)
        #expect(status.connectionsShown == .all)
        let entries = try #require(status.connections)
        #expect(entries.count == 3)
        #expect(entries.map(\.connection) == entries.map(\.connection).sorted())
        let owner = Policy().owner.name
        for e in entries {
            #expect(e.pid == getpid() && e.uid == getuid() && e.gid == getgid())
            #expect(e.executable == Self.me && e.rule == owner)
        }
        #expect(entries[0].session == StatusReply.SessionGrant(authorization: .always, accuracy: .precise))
        #expect(entries[0].subscribed && !entries[0].isSelf)
        // An owner is precise already: the purpose is kept but grants nothing more.
        #expect(entries[1].session == StatusReply.SessionGrant(authorization: .whenInUse, accuracy: .precise, purpose: "radar"))
        #expect(!entries[1].subscribed && !entries[1].isSelf)
        #expect(entries[2].session == nil && !entries[2].subscribed && entries[2].isSelf)

        // The asker's own view of itself changes with its session.
        try await asker.startSession(.whenInUse)
        let again = try #require(try await asker.status().connections)
        #expect(again[2].session == StatusReply.SessionGrant(authorization: .whenInUse, accuracy: .precise))
        try await navigator.endSession()
        let ended = try #require(try await asker.status().connections)
        #expect(ended[0].session == nil && !ended[0].subscribed)
        for c in [navigator, weather, asker] { c.close() }
        await h.stop()
    }

    @Test func nonOwnerSeesOnlyItsOwnEntryAndTheCounts() async throws {
        let h = try await ServerHarness.start(onlyRule: PolicyRule(name: "me", user: getuid(), authorization: .whenInUse, accuracy: .approximate, purposes: ["nav"]))
        defer { h.stopIfRunning() }
        let other = try await LocationClient.connect(path: h.path)
        try await other.startSession(.always)
        try await other.subscribe()
        let asker = try await LocationClient.connect(path: h.path)
        try await asker.startSession(.always, purpose: "nav")

        let status = try await asker.status()
        #expect(status.connected == 2 && status.sessions == 2 && status.subscribers == 1)
        #expect(status.connectionsShown == .own)
        let entries = try #require(status.connections)
        #expect(entries.count == 1)
        #expect(entries.first?.isSelf == true && entries.first?.rule == "me" && entries.first?.pid == getpid())
        #expect(entries.first?.session == StatusReply.SessionGrant(
            authorization: .whenInUse, accuracy: .precise, temporaryPrecise: true, purpose: "nav"))
        other.close()
        asker.close()
        await h.stop()
    }

    /// Without a session a non-owner learns only whether the source is reachable: not whether
    /// or since when the device has a fix, nor whether the receiver is watched. With one, all.
    @Test func withoutASessionANonOwnerLearnsNothingOfTheFix() async throws {
        let h = try await ServerHarness.start(onlyRule: PolicyRule(name: "me", user: getuid(), authorization: .whenInUse, accuracy: .precise))
        defer { h.stopIfRunning() }
        let subscriber = try await LocationClient.connect(path: h.path)
        try await subscriber.startSession(.whenInUse)
        try await subscriber.subscribe()
        h.hub.submit(.source(.connected))
        h.hub.submit(.fix(testFix(0)))
        await h.hub.processed()
        let asker = try await LocationClient.connect(path: h.path)
        let without = try await asker.status()
        #expect(without.state == .connected && without.lastFix == nil && without.receiver == nil, "\(without)")
        try await asker.startSession(.whenInUse)
        let with = try await asker.status()
        #expect(with.state == .fix && with.lastFix == testFix(0).time, "\(with)")
        subscriber.close()
        asker.close()
        await h.stop()
    }

    /// Under an approximate session the reply shows what the session's events show: the state
    /// and the epoch as published, not the second the receiver lost its fix.
    @Test func anApproximateSessionLearnsTheStateAsPublished() async throws {
        let h = try await ServerHarness.start(onlyRule: PolicyRule(name: "me", user: getuid(), authorization: .whenInUse, accuracy: .approximate))
        defer { h.stopIfRunning() }
        let asker = try await LocationClient.connect(path: h.path)
        try await asker.startSession(.whenInUse)
        h.hub.submit(.source(.connected))
        for i in 0..<10 { h.hub.submit(.fix(testFix(i))) }
        h.hub.submit(.noFix(testFix(10).time))
        await h.hub.processed()
        let epoch = Timestamp(seconds: 1_552_384_800, nanoseconds: 0)  // testFix(0)'s epoch
        let lost = try await asker.status()
        #expect(lost.state == .fix && lost.lastFix == epoch, "\(lost)")
        for i in 11...600 { h.hub.submit(.noFix(testFix(i).time)) }  // 600: the next epoch's first
        await h.hub.processed()
        let published = try await asker.status()
        #expect(published.state == .noFix && published.lastFix == nil, "\(published)")
        asker.close()
        await h.stop()
    }

    /// With more connections than one line holds, the reply comes in pages, each a line within
    /// the limit, and `LocationClient.status()` (so `locationctl status`) gets them all.
    @Test func manyConnectionsArePagedAndTheClientGetsThemAll() async throws {
        let h = try await ServerHarness.start()
        defer { h.stopIfRunning() }
        let peers = (0..<400).map { _ in RawSocket(path: h.path) }
        for p in peers { _ = p.readLine() }  // each one's hello: it is open on the server's side
        let client = try await LocationClient.connect(path: h.path)
        let status = try await client.status()
        #expect(status.connected == 401)
        #expect(status.connections?.count == 401 && status.next == nil)
        #expect(status.connections.map { $0.map(\.connection) == $0.map(\.connection).sorted() } == true)
        // The raw first page: within the line limit, `next` naming where the second starts.
        let raw = RawSocket(path: h.path)
        _ = raw.readLine()
        raw.send(#"{"type":"status","id":1}"# + "\n")
        let line = try #require(raw.readLine())
        #expect(line.utf8.count <= maxLineBytes)
        guard case .statusReply(let first) = try ServerMessage.decode(line), let next = first.next else { Issue.record("\(line.prefix(200))"); return }
        raw.send(#"{"type":"status","id":2,"offset":\#(next)}"# + "\n")
        guard case .statusReply(let second) = try ServerMessage.decode(try #require(raw.readLine())) else { Issue.record("no second page"); return }
        #expect(second.connections?.first?.connection == UInt64(next))
        client.close()
        withExtendedLifetime(peers) {}
        await h.stop()
    }

    @Test func visibleConnectionsFilter() {
        func entry(_ n: UInt64) -> StatusReply.ConnectionEntry {
            .init(connection: n, pid: Int32(n), uid: 1000, gid: 1000, executable: "/bin/p\(n)", rule: "r", session: nil, subscribed: false)
        }
        let all = [entry(7), entry(2), entry(5)]
        let owner = Connection.visibleConnections(all, asker: 5, showAll: true)
        #expect(owner.map(\.connection) == [2, 5, 7])
        #expect(owner.map(\.isSelf) == [false, true, false])
        let other = Connection.visibleConnections(all, asker: 5, showAll: false)
        #expect(other.map(\.connection) == [5] && other[0].isSelf && other[0].executable == "/bin/p5")
        #expect(Connection.visibleConnections(all, asker: 9, showAll: false).isEmpty)
    }

    @Test func ownerIsRootAndTheDaemonsUserWhicheverRuleMatches() {
        var p = Policy()
        p.ownerUID = 999
        p.rules = [PolicyRule(name: "root-nav", user: 0, authorization: .whenInUse, accuracy: .approximate)]
        let root = PeerIdentity(pid: 1, uid: 0, gid: 0, executable: "/usr/bin/navit")
        #expect(p.rule(for: root).name == "root-nav")
        #expect(p.isOwner(root))
        #expect(p.isOwner(PeerIdentity(pid: 1, uid: 999, gid: 999, executable: nil)))
        #expect(!p.isOwner(PeerIdentity(pid: 1, uid: 1000, gid: 1000, executable: nil)))
        #expect(!p.isOwner(nil))
        p.ownerRule = false
        #expect(!p.isOwner(root))
    }
}
