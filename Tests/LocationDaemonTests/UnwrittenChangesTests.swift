import Foundation
import LocationCore
@testable import LocationDaemon
import LocationProtocol
import NIOCore
import Testing

/// A fix whose write fails (disk full, a lock held past the busy timeout) loses nothing: its
/// region states and background events wait in memory and are written, first and in order,
/// with the next fix's (docs/protocol.md, "Background delivery").
@Suite struct UnwrittenChangesTests {
    typealias Away = AwayProgramPolicyTests
    let a = ProgramID("uid=1 exe=/a"), b = ProgramID("uid=2 exe=/b")

    func event(_ n: Int, _ p: ProgramID) -> ProgramEvent {
        ProgramEvent(program: p, event: .region(EventQueueTests.event(n)))
    }

    @Test func pastTheBoundEachProgramsOldestAreCountedAsLostAndTheRestKeepTheirOrder() {
        var unwritten = UnwrittenChanges()
        unwritten.keep(states: [], events: [event(1, a), event(2, b), event(3, a)], limit: 2)
        #expect(unwritten.events == [event(1, a), event(2, b), event(3, a)] && unwritten.lost.isEmpty)
        unwritten.keep(states: [], events: [event(4, a), event(5, a)], limit: 2)
        #expect(unwritten.events == [event(2, b), event(4, a), event(5, a)])
        #expect(unwritten.lost == [a: 2])
        #expect(unwritten.discardEvents(of: b) == 1)
        #expect(unwritten.events == [event(4, a), event(5, a)] && unwritten.lost == [a: 2, b: 1])
    }

    /// A fix with nothing of its own retries only every `retryInterval`; after
    /// `attemptsBeforeGivingUp` failures the held events become lost counts (an overflow once
    /// writing works) and the held states are dropped, so one bad batch cannot block forever.
    @Test func retriesArePacedAndAStubbornFailureGivesTheHeldChangesUp() {
        let home = Region(id: "home", center: Away.home, radius: 100)
        var unwritten = UnwrittenChanges()
        let t0 = NIODeadline.now()
        #expect(!unwritten.isDue(t0), "nothing held")
        unwritten.keep(states: [(a, [RegionRecord(region: home, state: .inside)])], events: [event(1, a), event(2, b)], limit: 10)
        #expect(unwritten.isDue(t0), "never tried")
        for i in 1..<UnwrittenChanges.attemptsBeforeGivingUp {
            let at = t0 + UnwrittenChanges.retryInterval * i
            let gaveUp = unwritten.failed(at: at)
            #expect(!gaveUp)
            #expect(!unwritten.isDue(at + .seconds(1)) && unwritten.isDue(at + UnwrittenChanges.retryInterval))
        }
        let gaveUp = unwritten.failed(at: t0 + .seconds(3600))
        #expect(gaveUp, "given up")
        #expect(unwritten.events.isEmpty && unwritten.states.isEmpty && unwritten.lost == [a: 1, b: 1])
        #expect(unwritten.stale == [a], "its current states are to be written")
        #expect(!unwritten.isEmpty, "the lost counts still have to be written")
    }

    /// Region states given up after six failed writes are written from memory once writing
    /// works: dropped, the database would keep the state from before, and a restart would send a
    /// transition again (an `exit` the program already had).
    @Test func statesGivenUpAreWrittenFromMemoryOnceWritingWorks() async throws {
        let dir = try Away.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("locationd.db").path
        let program = Away.tracker.program
        let log = CapturedLog()
        try await Away.withHub(path: path, logger: log.logger) { hub in
            let holder = try await Self.giveUpInsideWhileLocked(hub, path: path)
            #expect(log.messages(.error).filter { $0.hasPrefix("store: writes keep failing") }.count == 1, "\(log.entries)")
            try holder.exec("COMMIT")
            try await hub.eventLoop.submit { hub.writeUnwritten() }.get()
        }
        let stored = try RegionStore(database: Database(path: path)).load()
        #expect(stored.first { $0.program == program }?.records.map(\.state) == [.inside], "the state sent last, not the one from before the failures")
        #expect(log.messages(.notice).contains { $0.hasPrefix("store: the region states given up earlier are written") }, "\(log.entries)")
    }

    /// Writing the stale programs' states keeps failing (an error tied to their rows): tried at
    /// most every 10 s and logged once, not at every backlog read and commit (an error each
    /// time); a graceful stop makes the last attempt.
    @Test func aStaleWriteThatKeepsFailingIsLoggedOnceAndTriedAtTheStop() async throws {
        let dir = try Away.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("locationd.db").path
        let program = Away.tracker.program
        let log = CapturedLog()
        try await Away.withHub(path: path, logger: log.logger) { hub in
            let holder = try await Self.giveUpInsideWhileLocked(hub, path: path)
            try holder.exec("CREATE TRIGGER refuse BEFORE UPDATE ON regions BEGIN SELECT RAISE(ABORT, 'refused'); END")
            try holder.exec("COMMIT")
            for _ in 0..<5 { try await hub.eventLoop.submit { hub.writeUnwritten() }.get() }
            #expect(log.messages(.error).filter { $0.hasPrefix("store: cannot write the region states given up earlier") }.count == 1, "\(log.entries)")
            try holder.exec("DROP TRIGGER refuse")
            try await hub.eventLoop.submit { hub.releaseHeldVisits() }.get()  // the stop: due or not
        }
        let stored = try RegionStore(database: Database(path: path)).load()
        #expect(stored.first { $0.program == program }?.records.map(\.state) == [.inside])
    }

    /// A program's identity whose write failed (the disk full at its session's start) is written
    /// at the next write that works, or when its last connection closes, whichever comes first:
    /// written only when it changes, it would never be, and with the program away a restart
    /// would find no identity, discard its queue and suspend its regions.
    enum Retry: CaseIterable, Sendable { case theNextWrite, itsLastConnectionClosing, aFixThatWritesNothing }

    @Test(arguments: Retry.allCases)
    func anIdentityWhoseWriteFailedIsWrittenLater(by retry: Retry) async throws {
        let dir = try Away.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("locationd.db").path
        let program = Away.tracker.program
        try await Away.withHub(path: path) { hub in
            let holder = try Database(path: path)
            try holder.exec("BEGIN IMMEDIATE")
            try await hub.eventLoop.submit {
                hub.policy = Away.policy(.always, .precise)
                hub.programSeen(Away.tracker, rule: hub.policy.rule(for: Away.tracker))
            }.get()
            try holder.exec("COMMIT")
            #expect(try ProgramIdentities(database: Database(path: path)).recorded(program) == nil, "the write failed")
            switch retry {
            case .theNextWrite:
                try await hub.eventLoop.submit {
                    _ = try hub.addRegions([Region(id: "home", center: Away.home, radius: 100)], for: program)
                }.get()
                try await Away.feed(hub, seconds: 0..<1, metresNorth: 1000)  // the initial state, written
            case .itsLastConnectionClosing:
                try await hub.eventLoop.submit {
                    _ = try hub.addRegions([Region(id: "home", center: Away.home, radius: 100)], for: program)
                    hub.programClosed(program)
                }.get()
            case .aFixThatWritesNothing:
                try await Away.feed(hub, seconds: 0..<1, metresNorth: 1000)  // no regions: nothing to write
            }
        }
        let recorded = try ProgramIdentities(database: Database(path: path)).recorded(program)
        #expect(recorded?.uid == Away.tracker.uid && recorded?.executable == Away.tracker.executable)
    }

    @Test func theLatestStateOfARegionIsKeptUntilItsProgramsRegionsAreWrittenAgain() {
        let home = Region(id: "home", center: Away.home, radius: 100)
        var unwritten = UnwrittenChanges()
        unwritten.keep(states: [(a, [RegionRecord(region: home, state: .inside, enteredAt: Away.t0)])], events: [], limit: 10)
        unwritten.keep(states: [(a, [RegionRecord(region: home, state: .outside)])], events: [], limit: 10)
        #expect(unwritten.states == [a: ["home": RegionRecord(region: home, state: .outside)]])
        unwritten.forgetStates(of: a)
        #expect(unwritten.isEmpty)
    }

    /// Events lost before they were written take their sequence numbers, after everything
    /// queued, and one `overflow` covers them all.
    @Test func eventsLostBeforeTheyWereWrittenAreAnOverflowAtTheBottom() throws {
        let dir = try Away.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let queue = try EventQueue(database: Database(path: dir.appendingPathComponent("q.db").path), limit: 10)
        try queue.database.transaction { try queue.append((1...3).map { event($0, a) }) }
        try queue.database.transaction {
            try queue.appendLost(2, for: a)
            try queue.append([event(6, a)])
        }
        let backlog = try queue.backlog(of: a).map { try ServerMessage.decode(String(decoding: $0.dropLast(), as: UTF8.self)) }
        #expect(backlog == [.overflow(lost: 5, seq: 5), .queued(seq: 6, .region(EventQueueTests.event(6)))])
    }

    /// The away tracker with a region `home`, outside it, then entering it while another
    /// process holds the database's write lock: that fix's write failed. Returns the holder,
    /// still holding the lock (`COMMIT` releases it).
    static func enterHomeWhileLocked(_ hub: Hub, path: String) async throws -> Database {
        try await hub.eventLoop.submit {
            hub.policy = Away.policy(.always, .precise)
            hub.programSeen(Away.tracker, rule: hub.policy.rule(for: Away.tracker))
            _ = try hub.addRegions([Region(id: "home", center: Away.home, radius: 100)], for: Away.tracker.program)
        }.get()
        try await Away.feed(hub, seconds: 0..<1, metresNorth: 1000)  // outside (the initial state, no event)
        let holder = try Database(path: path)
        try holder.exec("BEGIN IMMEDIATE")
        try await Away.feed(hub, seconds: 30..<33, metresNorth: 0)  // enters home; cannot be written
        return holder
    }

    /// `enterHomeWhileLocked`, then leaves, enters, leaves and enters (attempts 2–5) and tries
    /// once more without a fix (attempt 6): the held states are given up with the tracker inside
    /// and the database still saying `outside`. The lock is still held.
    static func giveUpInsideWhileLocked(_ hub: Hub, path: String) async throws -> Database {
        let holder = try await enterHomeWhileLocked(hub, path: path)
        for k in 0..<4 {
            try await Away.feed(hub, seconds: (60 + 30 * k)..<(63 + 30 * k), metresNorth: k % 2 == 0 ? 1000 : 0)
        }
        try await hub.eventLoop.submit { hub.writeUnwritten() }.get()
        return holder
    }

    /// Another process holds the database's write lock while the away tracker enters its
    /// region: that fix's write fails. Once the lock is gone, the entry is written (seq 1) before
    /// the next fix's exit (seq 2), and the region's stored state is the latest.
    @Test func aFixWhoseWriteFailedIsWrittenWithTheNext() async throws {
        let dir = try Away.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("locationd.db").path
        let program = Away.tracker.program
        try await Away.withHub(path: path) { hub in
            let holder = try await Self.enterHomeWhileLocked(hub, path: path)
            let queue = try #require(hub.queue)
            #expect(try await hub.eventLoop.submit { queue.count(of: program) }.get() == 0)
            try holder.exec("COMMIT")
            // A subscribe reads the backlog after writing what waits in memory, without a fix.
            #expect(try await hub.eventLoop.submit { hub.writeUnwritten(); return queue.count(of: program) }.get() == 1)
            try await Away.feed(hub, seconds: 60..<63, metresNorth: 1000)  // leaves
            let backlog = try await hub.eventLoop.submit { queue.backlog(of: program) }.get()
                .map { try ServerMessage.decode(String(decoding: $0.dropLast(), as: UTF8.self)) }
            let kinds = backlog.compactMap { m -> (UInt64, RegionEventKind)? in
                guard case .queued(let seq, .region(let e)) = m else { return nil }
                return (seq, e.kind)
            }
            #expect(kinds.map(\.0) == [1, 2] && kinds.map(\.1) == [.enter, .exit], "\(backlog)")
        }
        let stored = try RegionStore(database: Database(path: path)).load()
        #expect(stored.first { $0.program == program }?.records.map(\.state) == [.outside])
    }

    /// A graceful stop (`systemctl stop`, a restart for an upgrade) soon after a fix's write
    /// failed — a backup held the lock a moment — writes what was held, due or not. It waited for
    /// a retry that never came (the next fix with changes, or one at most every 10 s) and was
    /// gone with the process, with no line saying so: the away program's entry was never queued
    /// and the region's stored state stayed `outside`.
    @Test func aGracefulStopWritesWhatWasHeld() async throws {
        let dir = try Away.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("locationd.db").path
        let program = Away.tracker.program
        try await Away.withHub(path: path) { hub in
            let holder = try await Self.enterHomeWhileLocked(hub, path: path)
            try holder.exec("COMMIT")
            let queue = try #require(hub.queue)
            // The stop's last step on the hub (DaemonService.run).
            #expect(try await hub.eventLoop.submit { hub.releaseHeldVisits(); return queue.count(of: program) }.get() == 1)
        }
        let stored = try RegionStore(database: Database(path: path)).load()
        #expect(stored.first { $0.program == program }?.records.map(\.state) == [.inside])
    }

    /// A stop while the lock is still held after the held events were given up (six failed
    /// attempts): the stop's line counts them, though they have moved to the lost count, whose
    /// `overflow` could not be written either.
    @Test func aStopCountsEventsGivenUpEarlierAsLost() async throws {
        let dir = try Away.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("locationd.db").path
        let log = CapturedLog()
        try await Away.withHub(path: path, logger: log.logger) { hub in
            let holder = try await Self.enterHomeWhileLocked(hub, path: path)  // attempt 1
            for k in 0..<5 {  // leaves, enters, …: attempts 2–6, the sixth gives the six events up
                try await Away.feed(hub, seconds: (60 + 30 * k)..<(63 + 30 * k), metresNorth: k % 2 == 0 ? 1000 : 0)
            }
            #expect(log.messages(.error).filter { $0.hasPrefix("store: writes keep failing") }.count == 1, "\(log.entries)")
            try await hub.eventLoop.submit { hub.releaseHeldVisits() }.get()
            try holder.exec("COMMIT")
        }
        #expect(log.messages(.error).filter { $0.hasPrefix("store: stopping") }
                == ["store: stopping with changes that could not be written; lost: 6 background events (6 of them given up or dropped earlier) and the region states of 1 programs"],
                "\(log.entries)")
    }

    /// A removal the store refuses (its write lock held elsewhere) is undone in memory with
    /// the regions where they were: registrations append rows only, so re-appended in memory
    /// the removed ones would come back in another order after a restart.
    @Test func aRefusedRemovalKeepsTheStoredOrder() async throws {
        let dir = try Away.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("locationd.db").path
        let program = Away.tracker.program
        try await Away.withHub(path: path) { hub in
            try await hub.eventLoop.submit {
                hub.policy = Away.policy(.always, .precise)
                hub.programSeen(Away.tracker, rule: hub.policy.rule(for: Away.tracker))
                _ = try hub.addRegions(["a", "b", "c"].map { Region(id: $0, center: Away.home, radius: 100) }, for: program)
            }.get()
            let holder = try Database(path: path)
            try holder.exec("BEGIN IMMEDIATE")
            let refused = try await hub.eventLoop.submit { () -> Bool in
                do { _ = try hub.removeRegions(["a"], for: program); return false } catch { return true }
            }.get()
            #expect(refused)
            try holder.exec("COMMIT")
            let (held, stored) = try await hub.eventLoop.submit {
                _ = try hub.addRegions([Region(id: "d", center: Away.home, radius: 100)], for: program)
                return (hub.regionRecords(of: program).map(\.region.id),
                        try RegionStore(path: path).load().first { $0.program == program }?.records.map(\.region.id) ?? [])
            }.get()
            #expect(held == ["a", "b", "c", "d"] && stored == held, "memory \(held), stored \(stored)")
        }
    }
}
