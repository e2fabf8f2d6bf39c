/// An event addressed to a program rather than to a connection: what an `always` program's
/// monitors produce while none of its connections is subscribed. The shell queues these
/// durably and delivers them when the program is back (docs/semantics.md, "Background").
public struct ProgramEvent: Hashable, Sendable {
    public var program: ProgramID
    public var event: Event
    @inlinable public init(program: ProgramID, event: Event) {
        self.program = program
        self.event = event
    }
}

/// The visit and significant-change detectors of programs that went to the background: an
/// `always` subscription's detectors are handed over here when its connection goes away and
/// handed back when the program subscribes again, so detection is one continuous stream.
/// A program has one set of background detectors, and the options that would start them afresh
/// (what the shell remembers across restarts).
@usableFromInline struct BackgroundMonitors: Sendable {
    struct Monitor: Sendable {
        var extras: SubscriptionExtras
        var options: SubscriptionOptions
    }
    var monitors: [ProgramID: Monitor] = [:]
    /// Programs in hand-over order: events of one fix come out in a repeatable order.
    var order: [ProgramID] = []
    /// Coarse visits of programs whose detector holding them went away, queued at the next
    /// publication (`Engine.queueHeldVisits`).
    var heldEvents: [ProgramEvent] = []

    /// Another connection of `program` hands over its detectors (docs/semantics.md,
    /// "Background", several connections): at the accuracy the program's background detectors
    /// already run at, they keep running and the newcomer's join for the kinds they lack; at the
    /// other accuracy, the newcomer's replace them (one accuracy per program, the latest
    /// session's). Returns the options of what runs now.
    /// Visits held by detectors replaced at the other accuracy are returned (`displaced`).
    mutating func join(_ extras: SubscriptionExtras, options: SubscriptionOptions, for program: ProgramID,
                       displaced: inout SubscriptionExtras?) -> SubscriptionOptions {
        guard var m = monitors[program], m.extras.approximate == extras.approximate else {
            let old = monitors.updateValue(Monitor(extras: extras, options: options), forKey: program)
            if old == nil { order.append(program) } else { displaced = old?.extras }
            return options
        }
        if m.extras.visits == nil, let visits = extras.visits {
            m.extras.visits = visits
            m.extras.visitCell = extras.visitCell
            // Still waiting for its first publication: started at the hand-over instead, it
            // would watch the stay from a second the program chose (docs/privacy.md).
            m.extras.visitsAwaitPublication = extras.visitsAwaitPublication
        }
        // Visits the newcomer detected and holds for the next publication are the program's.
        m.extras.mergeHeld(extras.heldVisits)
        if m.extras.significant == nil, let significant = extras.significant {
            m.extras.significant = significant
        }
        m.options = m.options.joinedInBackground(by: options)
        monitors[program] = m
        return m.options
    }

    mutating func remove(_ program: ProgramID) -> SubscriptionExtras? {
        guard let monitor = monitors.removeValue(forKey: program) else { return nil }
        order.removeAll { $0 == program }
        return monitor.extras
    }

    mutating func handle(_ fix: Fix, unit: SIMD3<Double>, privacy: ApproximateLocation, into out: inout [ProgramEvent]) {
        for p in order {
            monitors[p]!.extras.offer(fix, unit: unit, privacy: privacy) { out.append(ProgramEvent(program: p, event: $0)) }
        }
    }

    mutating func handlePublished(_ shown: Fix?, privacy: ApproximateLocation, into out: inout [ProgramEvent]) {
        releaseHeldEvents(into: &out)
        for p in order where monitors[p]!.extras.approximate {
            monitors[p]!.extras.offerPublished(shown, privacy: privacy) { out.append(ProgramEvent(program: p, event: $0)) }
        }
    }

    mutating func releaseHeldEvents(into out: inout [ProgramEvent]) {
        guard !heldEvents.isEmpty else { return }
        out += heldEvents
        heldEvents.removeAll()
    }

    /// Every held visit goes out now (the daemon stops): queued, they survive the restart.
    mutating func releaseHeldVisits(privacy: ApproximateLocation, into out: inout [ProgramEvent]) {
        releaseHeldEvents(into: &out)
        for p in order where !monitors[p]!.extras.heldVisits.isEmpty {
            monitors[p]!.extras.releaseVisits(privacy: privacy) { out.append(ProgramEvent(program: p, event: $0)) }
        }
    }
}

extension Engine {
    /// `id`'s connection went away while its program may monitor in the background (an
    /// `always` session): its visit and significant-change detectors keep running for
    /// `program` (joining those of its connections that went before), and the subscription
    /// closes. `options` are the subscription's, as granted. Returns the options that would
    /// start the program's background detectors afresh (to remember across restarts), or nil
    /// if the subscription had none to hand over. `keepingLocations` (a durable subscription):
    /// its location events go on for the program (`keepAway`) instead of ending.
    @discardableResult
    public mutating func handOver(_ id: SubscriberID, to program: ProgramID, options: SubscriptionOptions,
                                  keepingLocations: Bool = false) -> SubscriptionOptions? {
        guard let i = indexByID[id] else { return nil }
        let extras = subscriptions[i].extras
        if !keepingLocations || !keepAway(id, for: program) {
            var ignored: [Delivery] = []
            handle(.unsubscribe(id), into: &ignored)
        }
        guard let extras else { return nil }
        var displaced: SubscriptionExtras?
        let options = background.join(extras, options: options, for: program, displaced: &displaced)
        queueHeldVisits(of: &displaced, for: program)
        return options
    }

    /// Held visits whose detector goes away (a take-back into a subscription without them, a
    /// hand-over at the other accuracy) stay the program's, coarse, and are queued at the next
    /// publication like the rest: not at the moment the program chose, which would let it time
    /// their detection by polling `queued`.
    mutating func queueHeldVisits(of extras: inout SubscriptionExtras?, for program: ProgramID) {
        guard extras != nil, !extras!.heldVisits.isEmpty else { return }
        extras!.releaseVisits(privacy: privacy) { background.heldEvents.append(ProgramEvent(program: program, event: $0)) }
    }

    /// The daemon stops: visits held for the next publication are queued for their programs
    /// (a live connection closing first hands its over), so a restart does not lose them.
    public mutating func releaseHeldVisits() {
        background.releaseHeldVisits(privacy: privacy, into: &programEvents)
    }

    /// The program subscribed again as `id`: its background detectors' state carries over to
    /// the kinds `id` asked for; the background monitoring ends either way (the new
    /// subscription says what the program wants now). Returns whether there was any.
    /// Held visits a precise subscription with visits takes are sent to it at once
    /// (`sendHeldVisits`), appended to `out`.
    @discardableResult
    public mutating func takeBack(_ program: ProgramID, into id: SubscriberID, deliveries out: inout [Delivery]) -> Bool {
        guard let removed = background.remove(program) else { return false }
        var extras: SubscriptionExtras? = removed
        if let i = indexByID[id], subscriptions[i].extras != nil {
            if subscriptions[i].extras!.adopt(removed) { extras = nil } else { sendHeldVisits(of: &extras, to: i, into: &out) }
        }
        queueHeldVisits(of: &extras, for: program)
        return true
    }

    /// `takeBack` for tools and tests that look only at the engine's state.
    @discardableResult
    public mutating func takeBack(_ program: ProgramID, into id: SubscriberID) -> Bool {
        var ignored: [Delivery] = []
        return takeBack(program, into: id, deliveries: &ignored)
    }

    /// Visits held while approximate, reaching the precise subscription `i` with visits (a
    /// re-subscribe, a take-back): sent now, coarse as they would have been, since it may have
    /// visits at once. Others are left in `extras`.
    mutating func sendHeldVisits(of extras: inout SubscriptionExtras?, to i: Int, into out: inout [Delivery]) {
        guard extras != nil, !subscriptions[i].approximate, subscriptions[i].extras?.visits != nil else { return }
        let id = subscriptions[i].id
        extras!.releaseVisits(privacy: privacy) { out.append(Delivery(subscriber: id, event: $0)) }
    }

    /// The options `program`'s background detectors would start afresh with, if it has any.
    public func backgroundOptions(of program: ProgramID) -> SubscriptionOptions? {
        background.monitors[program]?.options
    }

    /// Ends `program`'s background visit and significant-change monitoring (its regions stay).
    @discardableResult
    public mutating func endBackground(_ program: ProgramID) -> Bool {
        background.remove(program) != nil
    }

    /// Starts background monitoring for `program` with fresh detectors (daemon start: the
    /// interest was remembered, the detectors' state was not).
    public mutating func restoreBackground(_ program: ProgramID, options: SubscriptionOptions) {
        guard let extras = SubscriptionExtras(options: options) else { return }
        var displaced: SubscriptionExtras?
        _ = background.join(extras, options: options, for: program, displaced: &displaced)
        queueHeldVisits(of: &displaced, for: program)
    }

    /// Programs whose visits or significant changes are monitored in the background.
    public var backgroundProgramIDs: [ProgramID] { background.order }

    /// The accuracy `program`'s background detectors report at, if it has any.
    public func backgroundAccuracy(of program: ProgramID) -> Accuracy? {
        background.monitors[program].map { $0.extras.approximate ? .approximate : .precise }
    }

    /// Moves the program events produced since the last call to `out` (which it empties first).
    /// Swapping buffers keeps both allocations alive: no allocation per fix.
    public mutating func drainProgramEvents(into out: inout [ProgramEvent]) {
        out.removeAll(keepingCapacity: true)
        swap(&out, &programEvents)
    }
}

extension SubscriptionOptions {
    /// The options background detectors started with these run with once a newcomer's with
    /// `options` join them (`BackgroundMonitors.join`): at another accuracy the newcomer's; at
    /// the same, the kinds these lack taken from the newcomer, with their parameters.
    public func joinedInBackground(by options: SubscriptionOptions) -> SubscriptionOptions {
        guard accuracy == options.accuracy else { return options }
        var m = self
        if !m.events.contains(.visits) && options.events.contains(.visits) {
            m.events.insert(.visits)
            m.visitParameters = options.visitParameters
        }
        if !m.events.contains(.significant) && options.events.contains(.significant) {
            m.events.insert(.significant)
            m.significantParameters = options.significantParameters
            // Part of the significant-change gate (`SubscriptionExtras.init`).
            m.desiredAccuracy = options.desiredAccuracy
        }
        return m
    }
}
