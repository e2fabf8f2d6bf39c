import LocationCore

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

    var isEmpty: Bool { states.isEmpty && events.isEmpty && lost.isEmpty }

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

    /// The program's regions were all written again (a registration change): its older
    /// unwritten states are stale.
    mutating func forgetStates(of program: ProgramID) {
        states[program] = nil
    }

    mutating func removeAll() {
        states = [:]
        events = []
        lost = [:]
    }
}
