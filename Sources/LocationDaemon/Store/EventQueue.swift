import CSQLite
import LocationCore
import LocationProtocol

/// The durable background queue (docs/protocol.md, "Background delivery"): events of `always`
/// programs that happen while none of their connections is subscribed, kept in SQLite with a
/// per-program sequence number until the program acknowledges them.
///
/// Each program's queued events are the contiguous run `floor+1 … last` of its sequence
/// numbers, `floor` being the higher of the last acknowledged and the last lost one. At the
/// bound the oldest event is dropped and counted: `lostThrough` moves up, and the program is
/// told by an `overflow` event covering `acked+1 … lostThrough` before the rest.
public final class EventQueue: @unchecked Sendable {
    public let database: Database
    /// Events kept per program ([store] queue_limit); at least 1.
    public let limit: Int

    struct Head: Hashable {
        /// The last sequence number given out (0: none yet).
        var last: UInt64 = 0
        var acked: UInt64 = 0
        var lostThrough: UInt64 = 0
        var floor: UInt64 { max(acked, lostThrough) }
        var count: Int { Int(last - floor) }
        var lost: UInt64 { lostThrough > acked ? lostThrough - acked : 0 }
    }

    /// Mirrors the `queue_heads` table (loaded at start, written in the same transactions).
    private var heads: [ProgramID: Head] = [:]
    private let encoder: EventEncoder
    private var scratch: [UInt8] = []

    /// `gazetteer`: the localities queued visit and significant events carry.
    public init(database: Database, limit: Int, gazetteer: Gazetteer? = nil) throws {
        self.database = database
        self.encoder = EventEncoder(gazetteer: gazetteer)
        self.limit = max(1, limit)
        try database.exec("""
            CREATE TABLE IF NOT EXISTS queue (
              program TEXT NOT NULL, seq INTEGER NOT NULL, line BLOB NOT NULL,
              PRIMARY KEY (program, seq)) WITHOUT ROWID;
            CREATE TABLE IF NOT EXISTS queue_heads (
              program TEXT PRIMARY KEY, last_seq INTEGER NOT NULL, acked INTEGER NOT NULL,
              lost_through INTEGER NOT NULL) WITHOUT ROWID;
            CREATE TABLE IF NOT EXISTS background (
              program TEXT PRIMARY KEY, accuracy TEXT NOT NULL, request TEXT NOT NULL) WITHOUT ROWID;
            CREATE TABLE IF NOT EXISTS durable_away (
              program TEXT PRIMARY KEY, accuracy TEXT NOT NULL, request TEXT NOT NULL) WITHOUT ROWID;
            """)
        try loadHeads()
        // A lowered limit applies at once: the oldest beyond it count as lost.
        for (program, head) in heads where head.count > self.limit {
            try database.transaction { try drop(program, head.count - self.limit) }
        }
    }

    /// Reads the heads; memory changes only when all of them were read (a partial read would
    /// give out sequence numbers again).
    private func loadHeads() throws {
        var loaded: [ProgramID: Head] = [:]
        let stmt = try database.prepare("SELECT program, last_seq, acked, lost_through FROM queue_heads")
        defer { sqlite3_finalize(stmt) }
        while try database.step(stmt) {
            let program = ProgramID(String(cString: sqlite3_column_text(stmt, 0)))
            let (last, acked, lost) = (sqlite3_column_int64(stmt, 1), sqlite3_column_int64(stmt, 2), sqlite3_column_int64(stmt, 3))
            // A head that cannot be (a damaged file, a hand edit) is an error, not a trap in
            // the count's arithmetic at every start.
            guard min(last, acked, lost) >= 0, acked <= last, lost <= last else {
                throw StoreError(description: "\(database.path): the queue head of \(program.rawValue) is impossible (last \(last), acknowledged \(acked), lost through \(lost)); \(Database.damagedFix(database.path))", needsAdministrator: true)
            }
            loaded[program] = Head(last: UInt64(last), acked: UInt64(acked), lostThrough: UInt64(lost))
        }
        heads = loaded
    }

    // MARK: Queueing (one fix's events, inside the hub's transaction)

    /// Appends `events` to their programs' queues, each with the next sequence number. Call
    /// inside `database.transaction` (the hub commits them with the region states).
    func append(_ events: [ProgramEvent]) throws {
        let insert = try database.prepare("INSERT INTO queue (program, seq, line) VALUES (?, ?, ?)")
        defer { sqlite3_finalize(insert) }
        var touched: Set<ProgramID> = []
        for e in events {
            var head = heads[e.program] ?? Head()
            head.last += 1
            heads[e.program] = head
            touched.insert(e.program)
            scratch.removeAll(keepingCapacity: true)
            encoder.appendQueued(e.event, seq: head.last, to: &scratch)
            sqlite3_reset(insert)
            locationd_sqlite3_bind_text(insert, 1, e.program.rawValue)
            sqlite3_bind_int64(insert, 2, Int64(head.last))
            _ = scratch.withUnsafeBytes { locationd_sqlite3_bind_blob(insert, 3, $0.baseAddress, Int32($0.count)) }
            try database.run(insert)
            if head.count > limit { try drop(e.program, head.count - limit) }
        }
        for p in touched { try saveHead(p) }
    }

    /// Accounts for `n` events of `program` that were never written (`UnwrittenChanges` dropped
    /// them at the bound or discarded them): they take the next `n` sequence numbers and count
    /// as lost, with everything queued before them (older still). Call inside
    /// `database.transaction`, before the events that followed them.
    func appendLost(_ n: Int, for program: ProgramID) throws {
        guard n > 0 else { return }
        var head = heads[program] ?? Head()
        head.last += UInt64(n)
        heads[program] = head
        try drop(program, head.count)
    }

    /// Drops every queued event of `program` (its `always` authorization was withdrawn),
    /// counting them as lost: if it is allowed a queue again, its backlog starts with an
    /// `overflow` covering them. Returns how many were dropped.
    func discard(_ program: ProgramID) throws -> Int {
        let n = count(of: program)
        guard n > 0 else { return 0 }
        try transaction { try drop(program, n) }
        return n
    }

    /// Drops the `n` oldest queued events of `program`, counting them as lost.
    private func drop(_ program: ProgramID, _ n: Int) throws {
        guard var head = heads[program], n > 0 else { return }
        head.lostThrough = head.floor + UInt64(n)
        heads[program] = head
        let delete = try database.prepare("DELETE FROM queue WHERE program = ? AND seq <= ?")
        defer { sqlite3_finalize(delete) }
        locationd_sqlite3_bind_text(delete, 1, program.rawValue)
        sqlite3_bind_int64(delete, 2, Int64(head.lostThrough))
        try database.run(delete)
        try saveHead(program)
    }

    private func saveHead(_ program: ProgramID) throws {
        guard let head = heads[program] else { return }
        let upsert = try database.prepare("""
            INSERT INTO queue_heads (program, last_seq, acked, lost_through) VALUES (?, ?, ?, ?)
            ON CONFLICT (program) DO UPDATE SET last_seq = excluded.last_seq, acked = excluded.acked,
              lost_through = excluded.lost_through
            """)
        defer { sqlite3_finalize(upsert) }
        locationd_sqlite3_bind_text(upsert, 1, program.rawValue)
        sqlite3_bind_int64(upsert, 2, Int64(head.last))
        sqlite3_bind_int64(upsert, 3, Int64(head.acked))
        sqlite3_bind_int64(upsert, 4, Int64(head.lostThrough))
        try database.run(upsert)
    }

    /// Runs `body` in a database transaction (joining the caller's, if any); when it rolls back,
    /// the in-memory heads are put back as they were before it, without reading the database (a
    /// read could fail too, leaving numbers given out or an ack recorded that are not).
    func transaction(_ body: () throws -> Void) throws {
        let saved = heads
        do { try database.transaction(body) } catch {
            heads = saved
            throw error
        }
    }

    // MARK: Delivery and acknowledgement

    /// The program's backlog as protocol lines, in order: an `overflow` event first when
    /// events were lost, then every queued event.
    public func backlog(of program: ProgramID) -> [[UInt8]] {
        var lines: [[UInt8]] = []
        var after: UInt64 = 0
        let through = lastSeq(of: program)
        while let next = backlogPage(of: program, after: after, through: through, limit: Int(Int64.max), into: &lines) {
            after = next
        }
        return lines
    }

    /// The last sequence number given out to `program` (0: none): where a backlog ends.
    public func lastSeq(of program: ProgramID) -> UInt64 { heads[program]?.last ?? 0 }

    /// One page of `program`'s backlog, the events numbered `after+1 … through`, appended to
    /// `lines` in order: first an `overflow` for events lost above `after` (at the start, the
    /// ones lost before it; later, the ones dropped from the queue while it was being written),
    /// then at most `limit` queued events. Returns where the next page starts, or nil when the
    /// backlog is done. Events queued after it began (above `through`) are the next one's.
    public func backlogPage(of program: ProgramID, after: UInt64, through: UInt64, limit: Int,
                            into lines: inout [[UInt8]]) -> UInt64? {
        guard let head = heads[program] else { return nil }
        var after = after
        let lostFrom = max(after, head.acked)
        if head.lostThrough > lostFrom, lostFrom < through {
            let end = min(head.lostThrough, through)
            var line: [UInt8] = []
            EventEncoder.appendOverflow(lost: end - lostFrom, seq: end, to: &line)
            lines.append(line)
            after = end
        }
        guard after < through else { return nil }
        do {
            let select = try database.prepare(
                "SELECT seq, line FROM queue WHERE program = ? AND seq > ? AND seq <= ? ORDER BY seq LIMIT ?")
            defer { sqlite3_finalize(select) }
            locationd_sqlite3_bind_text(select, 1, program.rawValue)
            sqlite3_bind_int64(select, 2, Int64(after))
            sqlite3_bind_int64(select, 3, Int64(through))
            sqlite3_bind_int64(select, 4, Int64(limit))
            var rows = 0
            while try database.step(select) {
                after = UInt64(sqlite3_column_int64(select, 0))
                let n = Int(sqlite3_column_bytes(select, 1))
                let bytes = sqlite3_column_blob(select, 1)
                lines.append(n == 0 || bytes == nil ? [] : Array(UnsafeRawBufferPointer(start: bytes, count: n)))
                rows += 1
            }
            // Fewer than asked: nothing is left up to `through`.
            return rows < limit ? nil : after
        } catch {
            database.report("reading the backlog of \(program.rawValue)", error)
            return nil
        }
    }

    /// Events queued for `program` now.
    public func count(of program: ProgramID) -> Int { heads[program]?.count ?? 0 }

    /// Programs with queued events.
    public var programsWithEvents: [ProgramID] { heads.filter { $0.value.count > 0 }.map(\.key).sorted() }

    /// Whether `program` has events waiting for its `ack`.
    public func hasEvents(of program: ProgramID) -> Bool { (heads[program]?.count ?? 0) > 0 }

    public struct AckError: Error, Hashable, Sendable, CustomStringConvertible {
        /// `outOfRange` (a seq never given out) or `storeFailed` (the store refused the write).
        public var code: ErrorCode
        public var description: String
    }

    /// Forgets `program`'s queued events up to `seq` (and an overflow through it); durable
    /// before it returns. Acknowledging again, or less, changes nothing. Returns how many remain.
    public func acknowledge(_ seq: UInt64, for program: ProgramID) throws(AckError) -> Int {
        let head = heads[program] ?? Head()
        guard seq <= head.last else {
            throw AckError(code: .outOfRange, description: head.last == 0
                ? "seq \(seq) was never given out: nothing has been queued for this program"
                : "seq \(seq) is beyond the last queued event, \(head.last)")
        }
        guard seq > head.acked else { return head.count }
        do {
            try transaction {
                heads[program]!.acked = seq
                let delete = try database.prepare("DELETE FROM queue WHERE program = ? AND seq <= ?")
                defer { sqlite3_finalize(delete) }
                locationd_sqlite3_bind_text(delete, 1, program.rawValue)
                sqlite3_bind_int64(delete, 2, Int64(seq))
                try database.run(delete)
                try saveHead(program)
            }
        } catch {
            // For the log (the file and the fix): the client gets a reason of its own (Connection).
            throw AckError(code: .storeFailed, description: "\(error); nothing was forgotten")
        }
        return heads[program]!.count
    }

    // MARK: What programs keep while away (remembered across restarts)

    /// What a program keeps running while away, one row per program in each: its background
    /// visit/significant monitors, and its durable subscription (docs/semantics.md).
    public enum Kept: String, Sendable {
        case background
        case durableAway = "durable_away"
        var what: String { self == .background ? "background monitor" : "durable subscription away" }
    }

    /// `program` keeps `kept` running with these options (kept as the subscribe request line
    /// that asked for them, and the session's accuracy). False when it could not be written
    /// (reported).
    @discardableResult
    func saveBackground(_ program: ProgramID, options: SubscriptionOptions, in kept: Kept = .background) -> Bool {
        do {
            let upsert = try database.prepare("""
                INSERT INTO \(kept.rawValue) (program, accuracy, request) VALUES (?, ?, ?)
                ON CONFLICT (program) DO UPDATE SET accuracy = excluded.accuracy, request = excluded.request
                """)
            defer { sqlite3_finalize(upsert) }
            locationd_sqlite3_bind_text(upsert, 1, program.rawValue)
            locationd_sqlite3_bind_text(upsert, 2, options.accuracy.rawValue)
            locationd_sqlite3_bind_text(upsert, 3, Request.subscribe(id: nil, options: options).line)
            try database.run(upsert)
            return true
        } catch {
            database.report("writing the \(kept.what) of \(program.rawValue)", error)
            return false
        }
    }

    /// False when it could not be written (reported).
    @discardableResult
    func removeBackground(_ program: ProgramID, in kept: Kept = .background) -> Bool {
        do {
            let delete = try database.prepare("DELETE FROM \(kept.rawValue) WHERE program = ?")
            defer { sqlite3_finalize(delete) }
            locationd_sqlite3_bind_text(delete, 1, program.rawValue)
            try database.run(delete)
            return true
        } catch {
            database.report("removing the \(kept.what) of \(program.rawValue)", error)
            return false
        }
    }

    /// The remembered rows of `kept`; unreadable rows are reported and skipped.
    func loadBackground(_ kept: Kept = .background) throws -> [(program: ProgramID, options: SubscriptionOptions)] {
        let stmt = try database.prepare("SELECT program, accuracy, request FROM \(kept.rawValue) ORDER BY program")
        defer { sqlite3_finalize(stmt) }
        var out: [(program: ProgramID, options: SubscriptionOptions)] = []
        while try database.step(stmt) {
            let program = ProgramID(String(cString: sqlite3_column_text(stmt, 0)))
            let accuracy = Accuracy(rawValue: String(cString: sqlite3_column_text(stmt, 1)))
            let line = String(cString: sqlite3_column_text(stmt, 2))
            guard let accuracy, case .subscribe(_, var options)? = try? Request.decode(line.hasSuffix("\n") ? String(line.dropLast()) : line) else {
                database.report("reading the \(kept.what)s", StoreError(description: "\(kept.what) of \(program) is unreadable; skipped"))
                continue
            }
            options.accuracy = accuracy
            out.append((program, options))
        }
        return out
    }
}
