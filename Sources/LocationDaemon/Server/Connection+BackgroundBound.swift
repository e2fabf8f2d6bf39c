import LocationCore
import LocationProtocol
import Logging

/// The per-user bound on background monitoring, as a connection meets it (`Hub.backgroundRefusal`).
extension Connection {
    /// An `always` subscription its program could not keep in the background (`Hub.backgroundRefusal`)
    /// is refused at `subscribe`, with the reason.
    func backgroundRefusal(_ options: SubscriptionOptions, id rid: RequestID?) -> ProtocolError? {
        guard session?.grant.authorization == .always, Hub.keptInBackground(options),
              let why = hub.backgroundRefusal(of: program) else { return nil }
        warnBackgroundRefused(why)
        return ProtocolError(.tooManyBackgroundPrograms, why, id: rid)
    }

    /// What the subscription keeps in the background (`Hub.subscriptionKept`). One that became
    /// `always` under a grant change (a reload, a `session.start`) when the bound refuses it
    /// stays live only: nothing asked that an error could answer, so only the journal says it.
    /// In a reload (`reconsidering`) the warning waits for `keepAgain()`: the same reload may
    /// free a slot (a program that lost `always`) after this connection was reconsidered.
    func keep(always options: SubscriptionOptions?, warn: Bool = true) {
        if !hub.subscriptionKept(id, of: program, always: options), warn, !reconsidering, let why = hub.backgroundRefusal(of: program) {
            warnBackgroundRefused(why + "; this subscription goes on while connected, not in the background")
        }
    }

    /// After a reload has ended what it ends: a subscription the bound refused is offered a
    /// slot again; `warn`: one refused during this reload is warned about if there is still
    /// none (one refused before was warned about then).
    func keepAgain(warn: Bool) {
        guard isSubscribed, let session, session.grant.authorization == .always else { return }
        keep(always: effectiveOptions(requestedOptions, session.grant), warn: warn)
    }

    /// Paced as the crowding warning: a refused subscribe can be repeated at will.
    private func warnBackgroundRefused(_ why: String) {
        guard let uid = peer?.uid, let held = registry.backgroundWarning(uid, at: configuration.clock.now()) else { return }
        let since = held > 0 ? "; \(held) more refused since the last such warning" : ""
        logger.warning("refusing background monitoring to a program: \(why) (warned at most once a minute per user\(since))",
                       metadata: ["program": "\(program)"])
    }
}
