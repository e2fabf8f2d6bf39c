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
@usableFromInline struct BackgroundMonitors: Sendable {
    var monitors: [ProgramID: SubscriptionExtras] = [:]
    /// Programs in hand-over order: events of one fix come out in a repeatable order.
    var order: [ProgramID] = []

    mutating func set(_ extras: SubscriptionExtras, for program: ProgramID) {
        if monitors.updateValue(extras, forKey: program) == nil { order.append(program) }
    }

    mutating func remove(_ program: ProgramID) -> SubscriptionExtras? {
        guard let extras = monitors.removeValue(forKey: program) else { return nil }
        order.removeAll { $0 == program }
        return extras
    }

    mutating func handle(_ fix: Fix, privacy: ApproximateLocation, into out: inout [ProgramEvent]) {
        for p in order {
            monitors[p]!.offer(fix, privacy: privacy) { out.append(ProgramEvent(program: p, event: $0)) }
        }
    }
}

extension Engine {
    /// `id`'s connection went away while its program may monitor in the background (an
    /// `always` session): its visit and significant-change detectors keep running for
    /// `program`, and the subscription closes. Returns whether anything keeps running.
    @discardableResult
    public mutating func handOver(_ id: SubscriberID, to program: ProgramID) -> Bool {
        guard let i = indexByID[id] else { return false }
        let extras = subscriptions[i].extras
        var ignored: [Delivery] = []
        handle(.unsubscribe(id), into: &ignored)
        guard let extras else { return false }
        background.set(extras, for: program)
        return true
    }

    /// The program subscribed again as `id`: its background detectors' state carries over to
    /// the kinds `id` asked for; the background monitoring ends either way (the new
    /// subscription says what the program wants now). Returns whether there was any.
    @discardableResult
    public mutating func takeBack(_ program: ProgramID, into id: SubscriberID) -> Bool {
        guard let extras = background.remove(program) else { return false }
        if let i = indexByID[id], subscriptions[i].extras != nil { subscriptions[i].extras!.adopt(extras) }
        return true
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
        background.set(extras, for: program)
    }

    /// Programs whose visits or significant changes are monitored in the background.
    public var backgroundProgramIDs: [ProgramID] { background.order }

    /// The accuracy `program`'s background detectors report at, if it has any.
    public func backgroundAccuracy(of program: ProgramID) -> Accuracy? {
        background.monitors[program].map { $0.approximate ? .approximate : .precise }
    }

    /// Moves the program events produced since the last call to `out` (which it empties first).
    /// Swapping buffers keeps both allocations alive: no allocation per fix.
    public mutating func drainProgramEvents(into out: inout [ProgramEvent]) {
        out.removeAll(keepingCapacity: true)
        swap(&out, &programEvents)
    }
}
