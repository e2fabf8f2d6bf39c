import LocationCore
import NIOCore

/// What fixes changed that could not be written (the store refused the transaction: disk full,
/// an I/O error, a lock held past the busy timeout): region states and the background events of
/// away programs, kept to be written with the next fix's, in order, so a failed write delays
/// them instead of losing them (docs/protocol.md, "Background delivery").
///
/// Bounded like the queue itself: past `limit` events of one program the oldest are dropped and
/// counted, and the queue accounts for them with an `overflow` when they are written. Since
/// more than `limit` newer events then follow, the queue's bound would have dropped them and
/// everything queued before them anyway.
struct UnwrittenChanges {
    /// The latest unwritten state of each region, per program.
    private(set) var states: [ProgramID: [String: RegionRecord]] = [:]
    /// Unwritten background events, oldest first.
    private(set) var events: [ProgramEvent] = []
    /// Per program, events dropped from `events` at the bound, all older than the ones kept.
    private(set) var lost: [ProgramID: Int] = [:]
    /// Programs whose held states were given up: the database may still have older ones, and a
    /// restart would then repeat a transition already sent. Their current states (the engine's)
    /// are written once writing works again, on their own (`Hub.rewriteStale`), so that an error
    /// tied to them does not block the other writes.
    private(set) var stale: Set<ProgramID> = []
    /// When writing the stale programs last failed (they are tried at most every
    /// `retryInterval`, on their own pace: a commit of other changes that works does not make
    /// them due), and whether that failure was logged (once until they are written).
    private var staleAttempt: NIODeadline?
    private(set) var staleFailureLogged = false

    /// Failed attempts in a row since the last write that worked, and when the last one was.
    private(set) var failures = 0
    private var lastAttempt: NIODeadline?

    /// A fix with nothing of its own to write tries again only this long after the last
    /// attempt: a lock held for minutes must not cost every fix the busy timeout.
    static let retryInterval: TimeAmount = .seconds(10)
    /// After this many failed attempts the held events are given up (counted as lost, so an
    /// `overflow` accounts for them once writing works) and the held states dropped: an error
    /// that stays (a constraint, a bad page) must not block every later fix's writes.
    static let attemptsBeforeGivingUp = 6

    var isEmpty: Bool { states.isEmpty && events.isEmpty && lost.isEmpty && stale.isEmpty }

    /// Whether the stale programs should be written at `now`.
    func staleDue(_ now: NIODeadline) -> Bool {
        guard !stale.isEmpty else { return false }
        guard let staleAttempt else { return true }
        return now - staleAttempt >= Self.retryInterval
    }

    /// Events already counted as lost whose `overflow` is not written yet.
    var lostEventCount: Int { lost.values.reduce(0, +) }

    /// Whether a fix with nothing of its own to write should try again at `now`.
    func isDue(_ now: NIODeadline) -> Bool {
        guard !isEmpty else { return false }
        if states.isEmpty && events.isEmpty && lost.isEmpty { return staleDue(now) }
        guard let lastAttempt else { return true }
        return now - lastAttempt >= Self.retryInterval
    }

    /// An attempt with these changes held failed at `now`; returns whether they were given up.
    mutating func failed(at now: NIODeadline) -> Bool {
        failures += 1
        lastAttempt = now
        guard failures >= Self.attemptsBeforeGivingUp else { return false }
        for e in events { lost[e.program, default: 0] += 1 }
        events = []
        stale.formUnion(states.keys)
        states = [:]
        failures = 0
        return true
    }

    /// Keeps one fix's changes after its write failed.
    mutating func keep(states changes: [(program: ProgramID, records: [RegionRecord])], events new: [ProgramEvent], limit: Int) {
        for change in changes {
            for record in change.records { states[change.program, default: [:]][record.region.id] = record }
        }
        guard !new.isEmpty else { return }
        events += new
        var counts: [ProgramID: Int] = [:]
        for e in events { counts[e.program, default: 0] += 1 }
        guard counts.values.contains(where: { $0 > limit }) else { return }
        // Drop each program's oldest beyond the bound, keeping the order of the rest.
        var excess = counts.compactMapValues { $0 > limit ? $0 - limit : nil }
        events.removeAll { e in
            guard let n = excess[e.program], n > 0 else { return false }
            excess[e.program] = n - 1
            lost[e.program, default: 0] += 1
            return true
        }
    }

    /// The programs with events waiting to be written.
    var programsWithEvents: Set<ProgramID> { Set(events.map(\.program)) }

    /// How many of `program`'s events are unwritten.
    func events(of program: ProgramID) -> Int { events.reduce(0) { $0 + ($1.program == program ? 1 : 0) } }

    /// Counts `program`'s unwritten events as lost (its `always` was withdrawn, and its queue is
    /// discarded); returns how many there were.
    mutating func discardEvents(of program: ProgramID) -> Int {
        let before = events.count
        events.removeAll { $0.program == program }
        let n = before - events.count
        if n > 0 { lost[program, default: 0] += n }
        return n
    }

    /// The program's regions were all removed: its unwritten states are stale.
    mutating func forgetStates(of program: ProgramID) {
        states[program] = nil
    }

    /// Drops the held states of `program`'s regions `ids` (nil: all of them).
    mutating func forgetStates(of program: ProgramID, ids: Set<String>?) {
        guard let ids else { return forgetStates(of: program) }
        for id in ids { states[program]?[id] = nil }
        if states[program]?.isEmpty == true { states[program] = nil }
    }

    /// What was held is written (the stale programs are written apart).
    mutating func removeAll() {
        states = [:]
        events = []
        lost = [:]
        failures = 0
        lastAttempt = nil
    }

    /// The stale programs' states were written, or the attempt failed at `now` (tried again a
    /// `retryInterval` later, not at every fix).
    mutating func staleWritten(_ programs: Set<ProgramID>) {
        stale.subtract(programs)
        if stale.isEmpty { staleAttempt = nil; staleFailureLogged = false }
    }
    /// Returns whether this failure is the first since they were last written (to be logged).
    mutating func staleFailed(at now: NIODeadline) -> Bool {
        staleAttempt = now
        defer { staleFailureLogged = true }
        return !staleFailureLogged
    }
}
