import Foundation
import LocationCore
@testable import LocationDaemon
import LocationProtocol
import Testing

/// The background queue against a real SQLite file (docs/protocol.md, "Background delivery").
@Suite struct EventQueueTests {
    let directory: URL
    var path: String { directory.appendingPathComponent("state/locationd.db").path }
    let program = ProgramID("uid=1000 exe=/usr/bin/tracker")
    let other = ProgramID("uid=1001 exe=/usr/bin/other")

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("queue-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    func cleanUp() { try? FileManager.default.removeItem(at: directory) }

    static func event(_ n: Int) -> RegionEvent {
        RegionEvent(region: "r\(n)", kind: n % 2 == 0 ? .exit : .enter,
                            time: CivilTime(year: 2026, month: 5, day: 1).timestamp.adding(seconds: Double(n)),
                            coordinate: Coordinate(latitude: 52.5, longitude: 13.4))
    }

    func queue(limit: Int = 100) throws -> EventQueue {
        try EventQueue(database: Database(path: path), limit: limit)
    }

    /// A queue head that cannot be (acknowledged or lost beyond the last sequence number given
    /// out, or a negative number: a damaged file, a hand edit) stops the start with a message
    /// naming the file, the program and the fix, not a trap in the count's arithmetic (SIGILL)
    /// at every restart.
    @Test func anInconsistentQueueHeadIsAnErrorNotACrash() throws {
        defer { cleanUp() }
        _ = try queue()
        for (last, acked, lost) in [(3, 7, 0), (3, 0, 9), (-1, 0, 0)] {
            let database = try Database(path: path)
            try database.exec("DELETE FROM queue_heads")
            try database.exec("INSERT INTO queue_heads VALUES ('\(program.rawValue)', \(last), \(acked), \(lost))")
            #expect(throws: StoreError(description: "\(path): the queue head of \(program.rawValue) is impossible (last \(last), acknowledged \(acked), lost through \(lost)); \(Database.damagedFix(path))", needsAdministrator: true)) {
                try queue()
            }
        }
    }

    /// Another process holding the file's write lock (the sqlite3 shell, a backup) makes a write
    /// wait for it a moment instead of failing at once.
    @Test func aWriteWaitsForAnotherHoldersLockBeforeFailing() throws {
        defer { cleanUp() }
        let holder = try Database(path: path), writer = try Database(path: path)
        try writer.exec("CREATE TABLE t (x)")
        try holder.exec("BEGIN IMMEDIATE")
        let start = ContinuousClock.now
        #expect(throws: StoreError.self) { try writer.exec("INSERT INTO t VALUES (1)") }
        #expect(ContinuousClock.now - start >= .milliseconds(200), "it failed at once")
        try holder.exec("COMMIT")
        try writer.exec("INSERT INTO t VALUES (1)")
    }

    func append(_ q: EventQueue, _ range: ClosedRange<Int>, for p: ProgramID) throws {
        try q.database.transaction { try q.append(range.map { ProgramEvent(program: p, event: .region(Self.event($0))) }) }
    }

    /// The backlog decoded: (seq or overflow, event).
    static func decode(_ lines: [[UInt8]]) throws -> [ServerMessage] {
        try lines.map { try ServerMessage.decode(String(decoding: $0.dropLast(), as: UTF8.self)) }
    }

    @Test func eventsAreNumberedPerProgramKeptAcrossReopenAndForgottenOnAck() throws {
        defer { cleanUp() }
        do {
            let q = try queue()
            try append(q, 1...3, for: program)
            try append(q, 1...1, for: other)
            try append(q, 4...5, for: program)
        }
        let q = try queue()  // reopened: nothing lost, numbering continues
        #expect(try Self.decode(q.backlog(of: program)) == (1...5).map { .queued(seq: UInt64($0), .region(Self.event($0))) })
        #expect(try Self.decode(q.backlog(of: other)) == [.queued(seq: 1, .region(Self.event(1)))])
        #expect(try q.acknowledge(3, for: program) == 2)
        #expect(try q.acknowledge(2, for: program) == 2)  // lower: nothing changes
        try append(q, 6...6, for: program)
        #expect(try Self.decode(try queue().backlog(of: program)).map(\.queueSequence) == [4, 5, 6])
        #expect(try q.acknowledge(6, for: program) == 0)
        #expect(try queue().backlog(of: program).isEmpty)
        #expect(try queue().count(of: other) == 1)
    }

    @Test func ackBeyondTheLastSeqIsRefusedAndChangesNothing() throws {
        defer { cleanUp() }
        let q = try queue()
        #expect(throws: EventQueue.AckError(code: .outOfRange, description: "seq 1 was never given out: nothing has been queued for this program")) {
            try q.acknowledge(1, for: program)
        }
        try append(q, 1...2, for: program)
        #expect(throws: EventQueue.AckError(code: .outOfRange, description: "seq 3 is beyond the last queued event, 2")) {
            try q.acknowledge(3, for: program)
        }
        #expect(q.count(of: program) == 2)
    }

    @Test func atTheLimitTheOldestAreDroppedAndToldAsOneOverflow() throws {
        defer { cleanUp() }
        let q = try queue(limit: 4)
        try append(q, 1...7, for: program)  // 1…3 dropped
        let backlog = try Self.decode(q.backlog(of: program))
        #expect(backlog == [.overflow(lost: 3, seq: 3)] + (4...7).map { .queued(seq: UInt64($0), .region(Self.event($0))) })
        // Acknowledging part of the overflow leaves the rest of it to tell.
        #expect(try q.acknowledge(2, for: program) == 4)
        #expect(try Self.decode(q.backlog(of: program)).first == .overflow(lost: 1, seq: 3))
        #expect(try q.acknowledge(5, for: program) == 2)
        try append(q, 8...10, for: program)  // 6,7,8,9,10 → 6 dropped
        #expect(try Self.decode(try queue(limit: 4).backlog(of: program)) ==
                [.overflow(lost: 1, seq: 6)] + (7...10).map { .queued(seq: UInt64($0), .region(Self.event($0))) })
        // A lower limit at the next start drops the oldest beyond it, told the same way.
        #expect(try Self.decode(try queue(limit: 2).backlog(of: program)) ==
                [.overflow(lost: 3, seq: 8)] + (9...10).map { .queued(seq: UInt64($0), .region(Self.event($0))) })
    }

    @Test func aFailedTransactionLeavesNeitherRowsNorNumbers() throws {
        defer { cleanUp() }
        let q = try queue()
        try append(q, 1...2, for: program)
        struct Boom: Error {}
        #expect(throws: Boom.self) {
            try q.transaction {
                try q.append([ProgramEvent(program: program, event: .region(Self.event(3)))])
                throw Boom()
            }
        }
        try append(q, 4...4, for: program)
        #expect(try Self.decode(q.backlog(of: program)).map(\.queueSequence) == [1, 2, 3])
    }

    @Test func backgroundMonitorsAreRemembered() throws {
        defer { cleanUp() }
        var options = SubscriptionOptions(desiredAccuracy: 30, events: [.visits, .significant])
        options.accuracy = .approximate
        do {
            let q = try queue()
            q.saveBackground(program, options: options)
            q.saveBackground(other, options: SubscriptionOptions(events: .visits))
            q.removeBackground(other)
        }
        let loaded = try queue().loadBackground()
        #expect(loaded.count == 1)
        #expect(loaded.first?.program == program && loaded.first?.options == options)
    }
}
