import LocationCore
import LocationProtocol
import Logging
import NIOCore

/// What fixes change, written to the store before their events leave (on the loop).
extension Hub {
    /// Writes what a fix changed before its events leave, in one transaction: new region
    /// states (after a crash no transition repeats) and the events of programs that are away
    /// (after a crash none is lost, and none is queued twice). What earlier fixes could not
    /// write goes first; if this write fails too, all of it waits (`UnwrittenChanges`): for the
    /// next fix with changes of its own, a later one at most every 10 s, or a subscribe.
    func persist(_ s: State) {
        s.engine.drainProgramEvents(into: &s.programEvents)
        if !s.programEvents.isEmpty { dropEventsReceivedLive(s) }
        if !s.durableEvents.isEmpty {
            s.programEvents += s.durableEvents
            s.durableEvents.removeAll(keepingCapacity: true)
        }
        let changes = regionStore == nil ? [] : s.engine.drainRegionChanges()
        if privacyCells != nil, s.engine.privacy.cell != s.storedCell { storePrivacyCell(s) }
        if changes.isEmpty && s.programEvents.isEmpty {
            // An identity whose write failed waits for no other write (a device standing still
            // writes nothing).
            if let identities, identities.hasUnsaved { identities.writeUnsaved(pacedAt: clock.now()) }
            // The common case: nothing to write, nothing held (one comparison per fix).
            guard !s.unwritten.isEmpty, s.unwritten.isDue(clock.now()) else { return }
        }
        commit(s, states: changes, events: s.programEvents)
    }

    /// One transaction: what earlier fixes could not write, then `states` and `events`. On
    /// failure all of it is held (`held`).
    func commit(_ s: State, states changes: [(program: ProgramID, records: [RegionRecord])], events: [ProgramEvent]) {
        guard let database = regionStore?.database ?? queue?.database else {
            logger.warning("no store: background events dropped", metadata: ["events": "\(events.count)"])
            return
        }
        do {
            try (queue?.transaction ?? database.transaction) {
                try write(s.unwritten)
                for change in changes { try regionStore?.writeStates(of: change.program, change.records) }
                if !events.isEmpty {
                    guard let queue else { throw StoreError(description: "no queue for \(events.count) background events") }
                    try queue.append(events)
                }
            }
            if !s.unwritten.isEmpty {
                if !s.unwritten.events.isEmpty || !s.unwritten.states.isEmpty || !s.unwritten.lost.isEmpty {
                    logger.notice("store: earlier fixes' region states and background events written", metadata: ["events": "\(s.unwritten.events.count)"])
                }
                s.unwritten.removeAll()
            }
        } catch {
            held(s, failure: error, states: changes, events: events)
            return
        }
        if s.unwritten.staleDue(clock.now()) { rewriteStale(s) }
        if let identities, identities.hasUnsaved { identities.writeUnsaved() }
    }

    /// Writes the current region states of the programs whose held states were given up: after
    /// a restart none repeats a transition sent meanwhile. One transaction for all of them (one
    /// sync to the disk, not one per program, on the loop); if that fails, one per program, so
    /// that an error tied to one does not hold back the others. Tried at most every 10 s while
    /// it fails, logged once.
    func rewriteStale(_ s: State) {
        guard let regionStore else { return }
        let programs = s.unwritten.stale
        var written: Set<ProgramID> = []
        var failure: (any Error)?
        do {
            try regionStore.database.transaction {
                for program in programs { try regionStore.writeStates(of: program, s.engine.regionRecords(of: program)) }
            }
            written = programs
        } catch {
            for program in programs {
                do {
                    try regionStore.writeStates(of: program, s.engine.regionRecords(of: program))
                    written.insert(program)
                } catch {
                    failure = error
                }
            }
        }
        let logged = s.unwritten.staleFailureLogged
        s.unwritten.staleWritten(written)
        if let failure {
            if s.unwritten.staleFailed(at: clock.now()) {
                logger.error("store: cannot write the region states given up earlier; tried again every 10 s (logged once)",
                             metadata: ["error": "\(failure)", "programs": "\(s.unwritten.stale.count)"])
            }
        } else {
            logger.notice("store: the region states given up earlier are written\(logged ? " after failed attempts" : "")", metadata: ["programs": "\(written.count)"])
        }
    }

    /// The device changed cell (rare: minutes apart at least, while moving). Best effort: a cell
    /// that could not be written is not tried again until the next change.
    func storePrivacyCell(_ s: State) {
        guard let privacyCells, let cell = s.engine.privacy.cell else { return }
        s.storedCell = cell
        do { try privacyCells.write(cell) } catch {
            logger.warning("cannot store the approximate-location cell", metadata: ["error": "\(error)"])
        }
    }

    /// Tries again to write what earlier fixes could not: before a program's backlog is read,
    /// so that its events waiting in memory are in it, in order.
    public func writeUnwritten() {
        let s = box.value
        guard !s.unwritten.isEmpty else { return }
        commit(s, states: [], events: [])
    }

    /// A write failed: what it held waits for the next attempt, or is given up after
    /// `UnwrittenChanges.attemptsBeforeGivingUp` of them.
    func held(_ s: State, failure error: any Error, states: [(program: ProgramID, records: [RegionRecord])], events: [ProgramEvent]) {
        s.unwritten.keep(states: states, events: events, limit: queue?.limit ?? Int.max)
        let waiting = s.unwritten.events.count
        if s.unwritten.failed(at: clock.now()) {
            logger.error("store: writes keep failing; the held background events are counted as lost (an overflow will say so), and the held region states are written from memory once writing works",
                         metadata: ["error": "\(error)", "events": "\(waiting)"])
        } else {
            logger.error("cannot store a fix's region states and background events; kept to be written later",
                         metadata: ["error": "\(error)", "unwritten events": "\(waiting)"])
        }
    }

    /// Writes what earlier fixes could not, inside the fix's transaction.
    func write(_ unwritten: UnwrittenChanges) throws {
        guard !unwritten.isEmpty else { return }
        for (program, records) in unwritten.states { try regionStore?.writeStates(of: program, Array(records.values)) }
        guard !unwritten.events.isEmpty || !unwritten.lost.isEmpty else { return }
        guard let queue else { throw StoreError(description: "no queue for \(unwritten.events.count) background events") }
        for (program, n) in unwritten.lost { try queue.appendLost(n, for: program) }
        try queue.append(unwritten.events)
    }

    /// A background monitor's visit or significant change is not queued when the same event went
    /// live, at this fix, to a connection of the same program: that connection's own detector
    /// watched the same stay and made it too, and the queue would hand it over twice
    /// (docs/semantics.md, "Background"). A detector that started later makes different
    /// events (or none), and the background's are then queued. Runs only for fixes that made
    /// program events (rare), over this fix's deliveries.
    func dropEventsReceivedLive(_ s: State) {
        s.programEvents.removeAll { e in
            switch e.event {
            case .visit, .significant: break
            default: return false  // region events reach the queue only when no connection is bound
            }
            return s.deliveries.contains { d in d.event == e.event && s.subscribers[d.subscriber]?.program == e.program }
        }
    }

    /// The daemon stops (after its connections closed, handing theirs over): the approximate
    /// visits held for the next publication are queued now, so a restart does not lose them,
    /// and what earlier fixes could not write gets its last attempt, due or not (no retry comes
    /// after the stop); what still fails is logged as lost.
    public func releaseHeldVisits() {
        let s = box.value
        s.deliveries.removeAll(keepingCapacity: true)
        s.engine.releaseHeldVisits()
        if s.engine.hasProgramEvents { persist(s) }
        if !s.unwritten.isEmpty { commit(s, states: [], events: []) }
        if !s.unwritten.stale.isEmpty { rewriteStale(s) }  // still there: the last chance, due or not
        if let identities, identities.hasUnsaved {
            identities.writeUnsaved()
            if identities.hasUnsaved {
                logger.error("store: stopping with the identities of \(identities.unsavedCount) programs unwritten; after the restart their regions and queued events are kept or dropped by their uid and executable alone (their groups are lost)")
            }
        }
        if !s.unwritten.isEmpty {
            // Events given up earlier are lost too: only their overflow notice was still to be
            // written, and it is not.
            let u = s.unwritten
            let programs = Set(u.states.keys).union(u.stale).count
            logger.error("store: stopping with changes that could not be written; lost: \(u.events.count + u.lostEventCount) background events (\(u.lostEventCount) of them given up or dropped earlier) and the region states of \(programs) programs",
                         metadata: ["events": "\(u.events.count + u.lostEventCount)", "programs with states": "\(programs)"])
        }
    }
}
