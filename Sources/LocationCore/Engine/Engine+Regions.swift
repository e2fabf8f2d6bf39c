/// The engine's geofence part: one `RegionMonitor` per program, fed every fix (whatever the
/// subscriptions' filters), its events addressed to every subscriber of that program.
public struct RegionPrograms: Sendable {
    var monitors: [ProgramID: RegionMonitor] = [:]
    var order: [ProgramID] = []
    var subscribers: [ProgramID: [SubscriberID]] = [:]
    var programOf: [SubscriberID: ProgramID] = [:]
    /// Programs whose regions stay registered but are not evaluated: the policy no longer lets
    /// them monitor regions (docs/privacy.md, "Programs that are away").
    var suspended: Set<ProgramID> = []
    var scratch: [RegionEvent] = []
    public var limits = RegionMonitor.Limits()

    public init() {}

    /// Region events go to the program's subscribers, or, when none is subscribed, to
    /// `unbound` for the program's queue: regions are monitored in the background.
    mutating func handle(_ fix: Fix, unit: SIMD3<Double>, into out: inout [Delivery], unbound: inout [ProgramEvent]) {
        for p in order {
            if !suspended.isEmpty && suspended.contains(p) { continue }
            scratch.removeAll(keepingCapacity: true)
            monitors[p]!.handle(fix, unit: unit, into: &scratch)
            guard !scratch.isEmpty else { continue }
            guard let subs = subscribers[p] else {
                for e in scratch { unbound.append(ProgramEvent(program: p, event: .region(e))) }
                continue
            }
            for e in scratch {
                for s in subs { out.append(Delivery(subscriber: s, event: .region(e))) }
            }
        }
    }

    mutating func bind(_ subscriber: SubscriberID, to program: ProgramID) {
        unbind(subscriber)
        programOf[subscriber] = program
        subscribers[program, default: []].append(subscriber)
    }

    mutating func unbind(_ subscriber: SubscriberID) {
        guard let p = programOf.removeValue(forKey: subscriber) else { return }
        subscribers[p]?.removeAll { $0 == subscriber }
        if subscribers[p]?.isEmpty == true { subscribers[p] = nil }
    }

    /// Runs `body` on the program's monitor (a new one if it has none). A monitor left empty is
    /// forgotten: every fix walks `order`, and programs come and go over a device's life (an
    /// upgrade changes the executable, so the program), each leaving an empty monitor behind
    /// (6,000 cost half a core at 60 fixes/s), as would a refused remove by a program that never
    /// had regions.
    mutating func withMonitor<T>(_ program: ProgramID, _ body: (inout RegionMonitor) throws(RegionError) -> T) throws(RegionError) -> T {
        if monitors[program] == nil {
            monitors[program] = RegionMonitor(limits: limits)
            order.append(program)
        }
        defer {
            if monitors[program]!.count == 0 {
                monitors[program] = nil
                order.removeAll { $0 == program }  // only when a program's last region goes
                suspended.remove(program)
            }
        }
        return try body(&monitors[program]!)
    }
}

extension Engine {
    /// Limits for programs created from now on (the daemon's configuration).
    public var regionLimits: RegionMonitor.Limits {
        get { regionPrograms.limits }
        set { regionPrograms.limits = newValue }
    }

    /// Region events of `program` go to `subscriber` (until it unsubscribes or is unbound), and
    /// its precise visits name the program's places (Engine+Places.swift).
    public mutating func bind(_ subscriber: SubscriberID, to program: ProgramID) {
        regionPrograms.bind(subscriber, to: program)
        placePrograms.keeping.insert(program)
    }

    /// Region events no longer go to `subscriber`.
    public mutating func unbind(_ subscriber: SubscriberID) {
        regionPrograms.unbind(subscriber)
    }

    /// Registers regions for `program`: all of them, or none (the error says why).
    public mutating func addRegions(_ regions: [Region], for program: ProgramID) throws(RegionError) {
        try regionPrograms.withMonitor(program) { (m: inout RegionMonitor) throws(RegionError) in try m.add(regions) }
    }

    /// Registers remembered regions with their last state (daemon start).
    public mutating func restoreRegions(_ records: [RegionRecord], for program: ProgramID) throws(RegionError) {
        try regionPrograms.withMonitor(program) { (m: inout RegionMonitor) throws(RegionError) in try m.restore(records) }
    }

    /// Unregisters `ids` of `program` (all must exist), or none; `nil` removes all.
    public mutating func removeRegions(_ ids: [String]?, for program: ProgramID) throws(RegionError) {
        try regionPrograms.withMonitor(program) { (m: inout RegionMonitor) throws(RegionError) in
            if let ids { try m.remove(ids) } else { try m.removeAll() }
        }
    }

    /// The program's regions with their states, in registration order.
    public func regionRecords(of program: ProgramID) -> [RegionRecord] {
        regionPrograms.monitors[program]?.records ?? []
    }

    /// Region records whose state changed since the last call, per program (to persist them).
    public mutating func drainRegionChanges() -> [(program: ProgramID, records: [RegionRecord])] {
        var out: [(program: ProgramID, records: [RegionRecord])] = []
        for p in regionPrograms.order {
            let records = regionPrograms.monitors[p]!.drainChanges()
            if !records.isEmpty { out.append((p, records)) }
        }
        return out
    }

    /// How many regions `program` has registered.
    public func regionCount(of program: ProgramID) -> Int { regionPrograms.monitors[program]?.count ?? 0 }

    /// Whether `program` has registered regions, monitored or suspended.
    public func hasRegions(of program: ProgramID) -> Bool { regionPrograms.monitors[program] != nil }

    /// Programs with registered regions, monitored or suspended.
    public var regionProgramIDs: [ProgramID] { regionPrograms.order.filter { regionPrograms.monitors[$0]!.count > 0 } }

    /// Whether any program's regions are evaluated (they need fixes).
    public var monitorsRegions: Bool {
        regionPrograms.order.contains { regionPrograms.monitors[$0]!.count > 0 && !regionPrograms.suspended.contains($0) }
    }

    /// Stops evaluating `program`'s regions; they stay registered, with their last states.
    /// Returns whether this changed anything.
    @discardableResult
    public mutating func suspendRegions(of program: ProgramID) -> Bool {
        guard regionPrograms.monitors[program] != nil else { return false }
        return regionPrograms.suspended.insert(program).inserted
    }

    /// Evaluates `program`'s regions again, as after a daemon restart: from their last states,
    /// each decided afresh by the next fix (no confirmation or crossing inference reaches back
    /// over the time they were suspended). Returns whether they were suspended.
    @discardableResult
    public mutating func resumeRegions(of program: ProgramID) -> Bool {
        guard regionPrograms.suspended.remove(program) != nil, let old = regionPrograms.monitors[program] else { return false }
        var fresh = RegionMonitor(limits: old.limits)
        // The records passed validation when they were registered, under the same limits; were
        // that ever not so, the old monitor (states kept, evaluated on) beats losing them.
        if (try? fresh.restore(old.records)) != nil { regionPrograms.monitors[program] = fresh }
        return true
    }

    public func regionsSuspended(of program: ProgramID) -> Bool { regionPrograms.suspended.contains(program) }

    /// How many regions `program` has registered, monitored or suspended.
    public func registeredRegionCount(of program: ProgramID) -> Int { regionPrograms.monitors[program]?.count ?? 0 }
}
