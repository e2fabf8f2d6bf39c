import Foundation
import LocationCore
@testable import LocationDaemon
import LocationProtocol
import NIOCore
#if canImport(Glibc)
import Glibc
#endif
import Testing

/// An `always` program's backlog is written a page at a time as its connection drains
/// (docs/protocol.md, "Background delivery"): a connection that subscribes and does not read
/// holds no more than the slow-reader bound, whatever the program has queued, and one that
/// reads gets all of it, in order, then the events that came meanwhile.
@Suite(.serialized, .timeLimit(.minutes(2))) struct BacklogPagingTests {
    static let events = 5_000

    @Test func aSubscriberThatDoesNotReadHoldsOnlyTheBoundAndOneThatReadsGetsEverything() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("backlog-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let queue = try EventQueue(database: Database(path: dir.appendingPathComponent("q.db").path), limit: Self.events)
        let h = try await ServerHarness.start(queue: queue)
        defer { h.stopIfRunning() }
        let program = PeerIdentity.resolve(PeerCredentials(pid: getpid(), uid: getuid(), gid: getgid())).program
        try await h.hub.eventLoop.submit {
            try queue.database.transaction {
                try queue.append((1...Self.events).map { ProgramEvent(program: program, event: .region(EventQueueTests.event($0))) })
            }
        }.get()

        // Three connections of the program subscribe and read nothing past the reply.
        var idle: [RawSocket] = []
        for _ in 0..<3 {
            let s = RawSocket(path: h.path)
            s.send(#"{"type":"session.start","id":1,"authorization":"always"}"# + "\n" + #"{"type":"subscribe","id":2}"# + "\n")
            while let line = s.readLine(), !line.contains(#""type":"subscribed""#) {}
            idle.append(s)
        }
        // Written at once, each would hold ≈ 1 MB beyond what the kernel's socket buffer takes.
        let buffered = try await h.hub.eventLoop.submit {
            h.server.registry.all.compactMap { try? $0.context?.channel.syncOptions?.getOption(ChannelOptions.bufferedWritableBytes) }
        }.get()
        #expect(buffered.count == 3)
        #expect(buffered.allSatisfy { $0 <= 128 * 1024 }, "bytes held per connection: \(buffered)")

        // An event that comes now waits behind the backlog.
        let later = RegionEvent(region: "later", kind: .enter, time: CivilTime(year: 2026, month: 6, day: 2, hour: 8).timestamp,
                                coordinate: Coordinate(latitude: 48.1, longitude: 11.5))
        try await h.hub.eventLoop.submit {
            for c in h.server.registry.all { c.deliver(.region(later), encoded: ByteBuffer(string: "{\"type\":\"region\",\"region\":\"later\"}\n")) }
        }.get()

        // One of them reads: every queued event once, in order, then the newer one.
        let reader = idle[0]
        var seqs: [UInt64] = []
        var after: String?
        while let line = reader.readLine() {
            if line.contains(#""region":"later""#) { after = line; break }
            guard line.contains(#""type":"region""#), let r = line.range(of: #""seq":"#) else { continue }
            seqs.append(UInt64(line[r.upperBound...].prefix { $0.isNumber }) ?? 0)
        }
        #expect(seqs == Array(1...UInt64(Self.events)))
        #expect(after != nil)
        idle.removeAll()
        await h.stop()
    }

    /// A harness with `events` queued for this process's program; `rule` replaces the owner rule.
    static func harness(queueLimit: Int = events, rule: PolicyRule? = nil) async throws -> (ServerHarness, EventQueue, ProgramID, URL) {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("backlog-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let queue = try EventQueue(database: Database(path: dir.appendingPathComponent("q.db").path), limit: queueLimit)
        let h = try await ServerHarness.start(queue: queue)
        if let rule {
            var policy = Policy()
            policy.ownerRule = false
            policy.rules = [rule]
            try await h.server.applyPolicy(policy)
        }
        let program = PeerIdentity.resolve(PeerCredentials(pid: getpid(), uid: getuid(), gid: getgid())).program
        try await h.hub.eventLoop.submit {
            try queue.database.transaction {
                try queue.append((1...Self.events).map { ProgramEvent(program: program, event: .region(EventQueueTests.event($0))) })
            }
        }.get()
        return (h, queue, program, dir)
    }

    /// A connection of the program that subscribes and reads nothing past the reply: its
    /// backlog stops at the watermark (checked on the loop, after the subscribe was handled).
    static func stalledSubscriber(_ h: ServerHarness) async throws -> RawSocket {
        let s = RawSocket(path: h.path)
        s.send(#"{"type":"session.start","id":1,"authorization":"always"}"# + "\n" + #"{"type":"subscribe","id":2}"# + "\n")
        while let line = s.readLine(), !line.contains(#""type":"subscribed""#) {}
        let inProgress = try await h.hub.eventLoop.submit { h.server.registry.all.first?.backlog != nil }.get()
        try #require(inProgress, "the backlog did not stop at the watermark")
        return s
    }

    static func later(_ region: String) -> (RegionEvent, ByteBuffer) {
        (RegionEvent(region: region, kind: .enter, time: CivilTime(year: 2026, month: 6, day: 2).timestamp,
                     coordinate: Coordinate(latitude: 48.1, longitude: 11.5)),
         ByteBuffer(string: "{\"type\":\"region\",\"region\":\"\(region)\"}\n"))
    }

    /// A reload changes the session's accuracy while live events wait behind the backlog, a
    /// location of the old accuracy held among them: what waited is written before the
    /// `changed` event, the held location is dropped, and nothing of the old accuracy comes after
    /// the news (upgraded, the re-subscription must not flush the held approximate location after
    /// it).
    @Test(arguments: [(Accuracy.precise, Accuracy.approximate), (.approximate, .precise)])
    func whatWaitedBehindTheBacklogDoesNotFollowTheNews(from old: Accuracy, to new: Accuracy) async throws {
        var rule = PolicyRule(name: "me", user: getuid(), authorization: .always, accuracy: old)
        let (h, _, _, dir) = try await Self.harness(rule: rule)
        defer { h.stopIfRunning(); try? FileManager.default.removeItem(at: dir) }
        let slow = try await Self.stalledSubscriber(h)
        for i in 0..<20 { h.hub.submit(.fix(testFix(i))) }
        await h.hub.processed()
        try #require(try await h.server.connectionStats().first?.hasPendingLocation == true, "no location held back")
        let (event, line) = Self.later("later")
        try await h.hub.eventLoop.submit { for c in h.server.registry.all { c.deliver(.region(event), encoded: line) } }.get()
        rule.accuracy = new
        var policy = Policy()
        policy.ownerRule = false
        policy.rules = [rule]
        try await h.server.applyPolicy(policy)
        // After `changed` the backlog starts again; once it is through (seq 5000), an unsubscribe's
        // reply marks the end of what was written.
        let oldLocation = old == .precise ? #""horizontalAccuracy":5"# : #""horizontalAccuracy":2122"#
        var changed = false, oldAfter = 0, laterAfter = false
        while let line = slow.readLine() {
            if line.contains(#""state":"changed""#) { changed = true; continue }
            guard changed else { continue }
            if line.contains(#""type":"location""#), line.contains(oldLocation) { oldAfter += 1 }
            if line.contains(#""region":"later""#) { laterAfter = true }
            if line.contains(#""seq":\#(Self.events)"#) { slow.send(#"{"type":"unsubscribe","id":9}"# + "\n") }
            if line.contains(#""type":"unsubscribed""#) { break }
        }
        #expect(changed)
        #expect(oldAfter == 0 && !laterAfter, "after the news: \(oldAfter) location(s) of the old accuracy, region event \(laterAfter)")
        await h.stop()
    }

    /// The program's session leaves `always` (its own `session.start`, the rule still allowing
    /// it; or a reload) while its backlog is being written: what waited behind the backlog is written before
    /// the reply, and the rest of the backlog stays queued, not written, numbered, to a session
    /// that may not acknowledge it.
    @Test func aSessionLeavingAlwaysStopsTheBacklogBeforeTheReply() async throws {
        let rule = PolicyRule(name: "me", user: getuid(), authorization: .always, accuracy: .precise)
        let (h, queue, program, dir) = try await Self.harness(rule: rule)
        defer { h.stopIfRunning(); try? FileManager.default.removeItem(at: dir) }
        let slow = try await Self.stalledSubscriber(h)
        let (event, line) = Self.later("later")
        try await h.hub.eventLoop.submit { for c in h.server.registry.all { c.deliver(.region(event), encoded: line) } }.get()
        // Handled while the backlog is in progress, as for a client that reads as fast as it is
        // written (this one does not, so its request would wait until the backlog is through).
        try await h.hub.eventLoop.submit {
            for c in h.server.registry.all { c.startSession(requested: .whenInUse, purpose: nil, id: .number(3)) }
        }.get()
        var replied = false, laterBefore = false, numberedAfter = 0
        while let line = slow.readLine() {
            if line.contains(#""type":"session""#), line.contains(#""id":3"#) {
                replied = true
                slow.send(#"{"type":"status","id":9}"# + "\n")
                continue
            }
            if line.contains(#""type":"status""#), line.contains(#""id":9"#) { break }
            if line.contains(#""region":"later""#) { laterBefore = !replied }
            if replied, line.contains(#""seq":"#) { numberedAfter += 1 }
        }
        #expect(replied && laterBefore)
        #expect(numberedAfter == 0, "\(numberedAfter) queued events written to the when-in-use session")
        // Nothing was acknowledged: the whole queue is still there for the next always session.
        #expect(try await h.hub.eventLoop.submit { queue.count(of: program) }.get() == Self.events)
        await h.stop()
    }

    /// Events queued while the backlog is being written (another connection of the program went
    /// away) are the next subscribe's: not written ahead of an older live event; and events the
    /// queue's bound drops meanwhile are told by an `overflow`, not skipped in silence.
    @Test func eventsQueuedMeanwhileWaitAndDroppedOnesAreTold() async throws {
        let (h, queue, program, dir) = try await Self.harness()
        defer { h.stopIfRunning(); try? FileManager.default.removeItem(at: dir) }
        let slow = try await Self.stalledSubscriber(h)
        let (event, line) = Self.later("live")
        try await h.hub.eventLoop.submit {
            for c in h.server.registry.all { c.deliver(.region(event), encoded: line) }
            // 4,000 more at the bound of 5,000: the oldest 4,000 are dropped.
            try queue.database.transaction {
                try queue.append((1...4_000).map { ProgramEvent(program: program, event: .region(EventQueueTests.event(10_000 + $0))) })
            }
        }.get()
        var seqs: [UInt64] = []
        var overflows: [String] = []
        while let line = slow.readLine() {
            if line.contains(#""type":"overflow""#) { overflows.append(line) }
            if line.contains(#""region":"live""#) { break }
            guard line.contains(#""type":"region""#), let r = line.range(of: #""seq":"#) else { continue }
            seqs.append(UInt64(line[r.upperBound...].prefix { $0.isNumber }) ?? 0)
        }
        #expect(seqs.allSatisfy { $0 <= 5_000 }, "events queued after the live one came before it")
        #expect(seqs.last == 5_000)
        let gaps = zip(seqs, seqs.dropFirst()).filter { $1 != $0 + 1 }
        #expect(gaps.count == 1 && overflows.count == 1, "gaps \(gaps), overflows \(overflows)")
        if let gap = gaps.first, let o = overflows.first {
            #expect(o.contains(#""lost":\#(gap.1 - gap.0 - 1)"#) && o.contains(#""seq":\#(gap.1 - 1)"#), "\(o) for the gap \(gap)")
        }
        await h.stop()
    }
}
