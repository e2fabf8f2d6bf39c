import LocationCore
import LocationProtocol
import Logging
import NIOCore

/// Regions (on the loop; docs/regions.md).
extension Hub {
    /// Region events of `program` go to subscriber `id` from now on.
    public func bind(_ id: SubscriberID, to program: ProgramID) {
        guard box.value.subscribers[id] != nil else { return }  // as subscriptionKept
        box.value.engine.bind(id, to: program)
    }

    /// Region events no longer go to subscriber `id` (its subscription became approximate).
    public func unbind(_ id: SubscriberID) {
        box.value.engine.unbind(id)
    }

    /// Registers `regions` for `program`, all or none; returns how many are registered now.
    public func addRegions(_ regions: [Region], for program: ProgramID) throws(RegionError) -> Int {
        let before = box.value.engine.regionCount(of: program)
        defer { tallyRegions(of: program, from: before) }
        try checkRestored(program)
        try box.value.engine.addRegions(regions, for: program)
        do {
            let added = Set(regions.map(\.id))
            try store(program, forgetting: added) {
                try $0.insertRegions(of: program, box.value.engine.regionRecords(of: program).filter { added.contains($0.region.id) })
            }
        } catch {
            // Not durable, so not applied: the reply must not acknowledge it.
            try? box.value.engine.removeRegions(regions.map(\.id), for: program)
            throw error
        }
        updateDemand()
        return box.value.engine.regionRecords(of: program).count
    }

    /// Writes a change of `program`'s registrations (only the rows it touches) before the reply
    /// acknowledges it. States held unwritten for the regions it adds or removes are dropped:
    /// they belong to registrations that are gone (an id removed and added again starts anew).
    func store(_ program: ProgramID, forgetting ids: Set<String>?,
                       _ write: (RegionStore) throws -> Void) throws(RegionError) {
        guard let regionStore else { return }
        do {
            try write(regionStore)
            box.value.unwritten.forgetStates(of: program, ids: ids)
        } catch {
            logger.error("cannot store region registrations", metadata: ["program": "\(program)", "error": "\(error)"])
            throw RegionError(.notStored, Self.notStoredReason)
        }
    }

    /// Unregisters `ids` (nil: all) of `program`, all or none; returns (removed, registered).
    public func removeRegions(_ ids: [String]?, for program: ProgramID) throws(RegionError) -> (removed: Int, registered: Int) {
        let count = box.value.engine.regionCount(of: program)
        defer { tallyRegions(of: program, from: count) }
        try checkRestored(program)
        let before = box.value.engine.regionRecords(of: program)
        try box.value.engine.removeRegions(ids, for: program)
        do {
            try store(program, forgetting: ids.map(Set.init)) { try $0.deleteRegions(of: program, ids) }
        } catch {
            // Put back what was removed (with its state) where it was, so memory matches the
            // database, order included: a later registration only appends rows, and appended
            // in memory the removed ones would come back in another order after a restart.
            try? box.value.engine.removeRegions(nil, for: program)
            try? box.value.engine.restoreRegions(before, for: program)
            throw error
        }
        let after = box.value.engine.regionRecords(of: program)
        updateDemand()
        return (before.count - after.count, after.count)
    }

    /// Registers remembered regions (daemon start, before any fix). If they cannot be (a stored
    /// region this version rejects), the program's changes are refused until a restart loads
    /// them: the program's rows in the database are not what the engine holds, and a change
    /// (`all: true` deletes every row) would act on rows it never loaded.
    public func restoreRegions(_ records: [RegionRecord], for program: ProgramID) throws(RegionError) {
        let before = box.value.engine.regionCount(of: program)
        defer { tallyRegions(of: program, from: before) }
        do { try box.value.engine.restoreRegions(records, for: program) } catch {
            box.value.unrestored[program] = error
            throw error
        }
    }

    /// A client's reason for `storeFailed`. What the administrator needs (the file, the error,
    /// the fix) is in the log only: a client can do nothing with it, and the daemon's paths and
    /// pid are not a client's business.
    static let notStoredReason = "the daemon could not write the change to its database, so nothing was applied; try again later (the daemon's log says why)"

    /// Throws `notStored` for a program whose remembered regions could not be loaded at start
    /// (the reason is the program's own region; the fix was logged at start).
    public func checkRestored(_ program: ProgramID) throws(RegionError) {
        guard let error = box.value.unrestored[program] else { return }
        throw RegionError(.notStored, "this program's remembered regions could not be loaded at start (\(error.message)); they are kept as they are, unmonitored, and cannot be listed or changed until the daemon's administrator mends them (the daemon's log says how)")
    }

    public func regionRecords(of program: ProgramID) -> [RegionRecord] {
        box.value.engine.regionRecords(of: program)
    }

    /// How many regions `program` has registered.
    public func registeredRegions(of program: ProgramID) -> Int { box.value.engine.regionCount(of: program) }

    /// How many regions the programs of user `uid` have registered together (kept as they
    /// change: summed over the user's programs at every add, it cost milliseconds with a user's
    /// thousands of one-region programs, refused adds included).
    public func registeredRegions(ofUser uid: UInt32) -> Int { box.value.regionsOfUser[uid] ?? 0 }

    /// Keeps the per-user total in step with `program`'s count, which was `before`.
    func tallyRegions(of program: ProgramID, from before: Int) {
        let delta = box.value.engine.regionCount(of: program) - before
        guard delta != 0, let uid = PeerIdentity.uid(of: program) else { return }
        let total = (box.value.regionsOfUser[uid] ?? 0) + delta
        box.value.regionsOfUser[uid] = total > 0 ? total : nil
    }

    /// Whether `program`'s regions are registered but suspended by the policy.
    public func regionsSuspended(of program: ProgramID) -> Bool { box.value.engine.regionsSuspended(of: program) }

    /// How many regions `program` has registered, monitored or suspended.
    public func registeredRegionCount(of program: ProgramID) -> Int { box.value.engine.registeredRegionCount(of: program) }
}
