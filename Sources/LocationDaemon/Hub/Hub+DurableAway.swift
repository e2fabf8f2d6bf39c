import LocationCore
import LocationProtocol
import Logging
import NIOCore

/// Durable subscriptions of programs that are away (on the loop; docs/semantics.md, "Durable
/// subscriptions away"): the engine goes on making a durable subscription's location events
/// into its program's queue once its connection went away without ending it, and the shell
/// remembers it (the `durable_away` table) from the moment it is durable, so that a daemon
/// killed meanwhile starts it again.
extension Hub {
    /// Whether a subscription with `options` (durable, of an `always` program) goes on while its
    /// program is away: it asked for locations (its visits and significant changes go on as
    /// background monitors, its regions anyway).
    static func keptAway(_ options: SubscriptionOptions) -> Bool {
        options.durable && options.events.contains(.location)
    }

    /// `id`, `program`'s durable subscription, is `always` with these options as granted (nil:
    /// it is not kept away, or no longer): what a restart starts for the program follows.
    func rememberAway(_ id: SubscriberID, of program: ProgramID, always options: SubscriptionOptions?) {
        guard box.value.durableSubscribers[id] == program else { return }
        rememberAway(of: program, options: options.flatMap { Self.keptAway($0) ? $0 : nil })
    }

    /// Keeps the `durable_away` row of `program` equal to `options` (written only when it
    /// changes; a failed write is tried again at the next change, as `rememberBackground`).
    func rememberAway(of program: ProgramID, options: SubscriptionOptions?) {
        guard let queue else { return }
        let s = box.value
        guard s.rememberedAway[program] != options else { return }
        let written = if let options { queue.saveBackground(program, options: options, in: .durableAway) }
                      else { queue.removeBackground(program, in: .durableAway) }
        if written { s.rememberedAway[program] = options }
    }

    /// A durable subscription remembered in the store (daemon start, before any fix): it goes
    /// on away, its filters fresh.
    public func restoreAway(_ program: ProgramID, options: SubscriptionOptions) {
        box.value.engine.restoreAway(program, as: makeSubscriberID(), options: options)
        box.value.rememberedAway[program] = options
    }

    /// `program` subscribed under an `always` session without taking its durable subscription
    /// back (not durable): it goes on no longer, as background detectors that subscription did
    /// not ask for end (docs/semantics.md).
    func endAwayAtSubscribe(of program: ProgramID) {
        guard box.value.engine.endAway(program) else { return }
        rememberAway(of: program, options: nil)
        logger.info("durable subscription away ended: the program subscribed without durable", metadata: ["program": "\(program)"])
    }

    /// Programs whose durable subscription goes on while they are away.
    public var awayProgramIDs: [ProgramID] { box.value.engine.awayProgramIDs }
}
