import LocationCore
import LocationProtocol
import Logging
import NIOCore

/// Background monitoring (on the loop; docs/semantics.md, "Background"): what an `always`
/// program keeps running, and remembers across restarts, once its connections go away.
extension Hub {
    /// `id` no longer holds an `always` subscription: its program's remembered background
    /// monitor follows.
    func forgetAlways(_ id: SubscriberID) {
        box.value.refusedBackground.remove(id)
        guard let (program, _) = box.value.alwaysSubscriptions.removeValue(forKey: id) else { return }
        rememberBackground(of: program)
    }

    /// `id`'s subscription (new, or its session's grant changed) is `always` with these options
    /// as granted, or (nil) it is not: what its program would keep in the background follows.
    /// False when it would be kept but may not be (`backgroundRefusal(of:)`): it stays live only.
    @discardableResult
    public func subscriptionKept(_ id: SubscriberID, of program: ProgramID, always options: SubscriptionOptions?) -> Bool {
        // Only for a subscription that is open: kept for a closed one, it outlived every close.
        guard box.value.subscribers[id] != nil else { return true }
        // A durable subscription with locations goes on away (`Hub+DurableAway`): bounded as
        // background monitors are.
        let away = options.map { box.value.durableSubscribers[id] == program && Self.keptAway($0) } ?? false
        if let options, Self.keptInBackground(options) || away {
            guard backgroundRefusal(of: program) == nil else {
                box.value.refusedBackground.insert(id)
                return false
            }
            box.value.refusedBackground.remove(id)
            if Self.keptInBackground(options) {
                box.value.alwaysSubscriptions[id] = (program, options)
                rememberBackground(of: program)
            } else {
                forgetAlways(id)
            }
        } else {
            forgetAlways(id)
        }
        rememberAway(id, of: program, always: options)
        return true
    }

    /// Whether a subscription with `options` under an `always` session is kept in the
    /// background once its connection goes away (its visits and significant changes).
    public static func keptInBackground(_ options: SubscriptionOptions) -> Bool {
        options.events.contains(.visits) || options.events.contains(.significant)
    }

    /// `id`'s connection went away under an `always` session: its visit and significant-change
    /// detectors keep running for `program` (remembered across restarts), its regions too.
    public func handOver(_ id: SubscriberID, to program: ProgramID, options: SubscriptionOptions, identity: PeerIdentity? = nil) {
        guard box.value.subscribers[id] != nil else { return }
        // A subscription the bound refused (`subscriptionKept`) ends here, even if a slot came
        // free since: it was told to go on while connected only, and is never written to the
        // store, so a hand-over would keep what a kill would have lost.
        if box.value.refusedBackground.contains(id) { return unsubscribe(id) }
        box.value.subscribers[id] = nil
        let away = box.value.durableSubscribers[id] == program && Self.keptAway(options)
        endDurable(id, keepingAway: away)
        // What the program keeps away is decided by the identity of the session that handed
        // over (a reload meanwhile may have forgotten the one its session.start recorded).
        if let identity, speaksForItsProgram(identity) { identities?.record(identity) }
        box.value.alwaysSubscriptions[id] = nil
        if box.value.engine.handOver(id, to: program, options: options, keepingLocations: away) != nil {
            logger.info("background monitoring", metadata: ["program": "\(program)"])
        }
        if away {
            rememberAway(of: program, options: options)  // a write that failed at subscribe
            logger.info("durable subscription away", metadata: ["program": "\(program)"])
        }
        rememberBackground(of: program)
        updateDemand()
    }

    /// The program subscribed again as `id` under an `always` session: its background
    /// detectors carry over to the subscription, and the background monitoring ends (what the
    /// subscription would hand over is remembered by `subscriptionKept`).
    public func takeBack(_ program: ProgramID, into id: SubscriberID) {
        let s = box.value
        guard s.subscribers[id] != nil else { return }  // as subscriptionKept
        endAwayAtSubscribe(of: program)
        var held: [Delivery] = []  // visits held while approximate, for a precise subscription
        guard s.engine.takeBack(program, into: id, deliveries: &held) else { return }
        for d in held { deliver(d, s) }
        updateDemand()
        rememberBackground(of: program)
    }

    /// Keeps the remembered background monitor of `program` (the `background` table) equal to
    /// what would run if every connection of it went away now: its background detectors joined
    /// by each `always` subscription's visits and significant changes, in subscription order.
    /// Written when a subscription starts, not only when its connection goes away: a daemon
    /// killed while the program is subscribed (`kill -9`, the watchdog, the OOM killer) then
    /// monitors it in the background after the restart, as if its connection had closed.
    func rememberBackground(of program: ProgramID) {
        guard let queue else { return }
        let s = box.value
        var options = s.engine.backgroundOptions(of: program)
        for (_, live) in s.alwaysSubscriptions.filter({ $0.value.program == program }).sorted(by: { $0.key < $1.key }) {
            options = options.map { $0.joinedInBackground(by: live.options) } ?? live.options
        }
        // A subscription that changes nothing (a program re-subscribing, a flood of them) costs
        // no write: each is a synced transaction on the loop.
        guard s.rememberedBackground[program] != options else { return }
        // Remembered only once written: a failed write is tried again at the next change.
        let written = if let options { queue.saveBackground(program, options: options) } else { queue.removeBackground(program) }
        if written { s.rememberedBackground[program] = options }
    }

    /// Background monitors remembered in the store (daemon start, before any fix).
    public func restoreBackground(_ program: ProgramID, options: SubscriptionOptions) {
        box.value.engine.restoreBackground(program, options: options)
        box.value.rememberedBackground[program] = options
    }

    public var backgroundProgramIDs: [ProgramID] { box.value.engine.backgroundProgramIDs }
}
