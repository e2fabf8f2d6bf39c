/// Durable subscriptions of programs that are away (docs/semantics.md, "Durable subscriptions
/// away"): the subscription of an `always` program that asked for `durable` locations stays in
/// the engine when its connection goes away, its location filters going on as they were, and
/// what it is delivered becomes program events (queued by the shell) until the program
/// subscribes again. A program has at most one.
extension Engine {
    /// Keeps `id`'s subscription running for `program` without its visit and significant-change
    /// detectors (the caller hands those to the background monitors). Returns false (and changes
    /// nothing) if it has no location events to make.
    mutating func keepAway(_ id: SubscriberID, for program: ProgramID) -> Bool {
        guard let found = indexByID[id], subscriptions[found].filter.options.events.contains(.location) else { return false }
        if let other = awayByProgram[program], other != id { endAway(program) }
        let i = indexByID[id]!  // ending the other one may have moved it
        subscriptions[i].extras = nil
        subscriptions[i].awayFor = program
        subscriptions[i].resumed = false
        awayByProgram[program] = id
        // Its region events are the program's, as for any program without a bound connection.
        regionPrograms.unbind(id)
        return true
    }

    /// Starts `program`'s durable subscription away afresh as `id` (daemon start: the options
    /// were remembered, the filters' state was not).
    public mutating func restoreAway(_ program: ProgramID, as id: SubscriberID, options: SubscriptionOptions) {
        var ignored: [Delivery] = []
        handle(.subscribe(id, options), into: &ignored)
        if !keepAway(id, for: program) { handle(.unsubscribe(id), into: &ignored) }
    }

    /// `program`'s durable subscription away becomes `id`'s, which is about to subscribe (a
    /// durable subscribe of the program): with the same options its filters go on, so the
    /// location stream is one (`handle(.subscribe)`); with others they start again.
    public mutating func resumeAway(of program: ProgramID, as id: SubscriberID) {
        guard let away = awayByProgram.removeValue(forKey: program), let i = indexByID[away] else { return }
        guard indexByID[id] == nil else {
            // `id` is subscribed already: its own filters go on, the away one ends.
            var ignored: [Delivery] = []
            handle(.unsubscribe(away), into: &ignored)
            return
        }
        indexByID[away] = nil
        indexByID[id] = i
        subscriptions[i].id = id
        subscriptions[i].awayFor = nil
        subscriptions[i].resumed = true
    }

    /// Ends `program`'s durable subscription away. Returns whether there was one.
    @discardableResult
    public mutating func endAway(_ program: ProgramID) -> Bool {
        guard let id = awayByProgram.removeValue(forKey: program) else { return false }
        var ignored: [Delivery] = []
        handle(.unsubscribe(id), into: &ignored)
        return true
    }

    /// Whether any program has a durable subscription away (it needs fixes).
    public var hasAwaySubscriptions: Bool { !awayByProgram.isEmpty }

    /// Programs with a durable subscription away.
    public var awayProgramIDs: [ProgramID] { awayByProgram.keys.sorted() }

    /// The accuracy `program`'s durable subscription away runs at, if it has one.
    public func awayAccuracy(of program: ProgramID) -> Accuracy? {
        awayByProgram[program].flatMap { indexByID[$0] }.map { subscriptions[$0].approximate ? .approximate : .precise }
    }

    /// The deliveries of this input to subscriptions away (from `start` in `out`) become their
    /// programs' events, in the order they were made and before the input's other program
    /// events (`programStart`), as a connected durable subscription queues its own first.
    /// `status` events are states, not kept.
    mutating func routeAway(_ out: inout [Delivery], from start: Int, programEventsFrom programStart: Int) {
        var routed: [ProgramEvent] = []
        var kept = start
        for k in start..<out.count {
            let d = out[k]
            if let i = indexByID[d.subscriber], let program = subscriptions[i].awayFor {
                if case .status = d.event { continue }
                routed.append(ProgramEvent(program: program, event: d.event))
            } else {
                out[kept] = d
                kept += 1
            }
        }
        out.removeSubrange(kept..<out.count)
        if !routed.isEmpty { programEvents.insert(contentsOf: routed, at: min(programStart, programEvents.count)) }
    }
}
