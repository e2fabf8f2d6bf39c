import LocationCore
import LocationProtocol
import Logging

/// Sessions (docs/protocol.md, "Sessions") and the subscription opened under one.
extension Connection {
    /// Opens (or re-opens) the subscription under the session's accuracy: approximate sessions
    /// run through the privacy stage and get no region events.
    func subscribe(_ options: SubscriptionOptions) {
        guard let session else { return }
        requestedOptions = options
        let effective = effectiveOptions(options, session.grant)
        isSubscribed = true
        // Durable before the subscription opens, so that every event of it is queued (a
        // durable subscribe is refused at the request when it cannot be: `durableRefusal`).
        updateDurable(always: session.grant.authorization == .always)
        hub.subscribe(id, options: effective, subscriber: self) {
            // Writing the status may have found the peer gone: the connection closed meanwhile
            // (`channelInactive` unsubscribed it), and nothing may be kept or bound for it.
            guard self.context != nil else { return }
            keep(always: session.grant.authorization == .always ? effective : nil)
            if effective.accuracy == .precise { hub.bind(id, to: program) } else { hub.unbind(id) }
            // The backlog right after the status (docs/protocol.md, "Background delivery").
            if session.grant.authorization == .always { takeBackground() }
        }
    }

    /// The session's grant changed (a new `session.start`, a reload): `announce` writes the
    /// news (the reply, or the `changed` event), after what the old grant produced and before
    /// anything the new one does. Under an open subscription another accuracy subscribes again
    /// (the privacy stage changes), and becoming `always` takes the program's background
    /// monitoring and queue over, as an `always` subscribe does. *Reason:* the news came after
    /// the re-subscription's events, so a client read approximate locations while it still
    /// believed its session precise (and the other way round).
    func subscriptionRegranted(from old: Grant?, announce: () -> Void) {
        guard isSubscribed, let session else { return announce() }
        if old?.accuracy != session.grant.accuracy {
            // What came live behind a backlog was produced under the old accuracy: written
            // before the news, as without the backlog; the re-subscribe starts the backlog again.
            stopBacklog()
            // A location held for a slow reader was made under the old accuracy and must not
            // follow the news of the new one (a precise one after "approximate now", an
            // approximate one after "precise now"); it counts as skipped.
            if pendingLocation != nil {
                pendingLocation = nil
                skippedSincePending += 1
                skippedTotal += 1
            }
            // So is a held status (the loop may run this before the flush a drained socket
            // scheduled): the re-subscription sends the state as the new accuracy shows it.
            pendingStatus = nil
            announce()
            subscribe(requestedOptions)
            return
        }
        // No longer always: the rest of the backlog stays queued (it may not be acknowledged
        // now), and what waited behind it, made under the old grant, goes before the news.
        if old?.authorization == .always && session.grant.authorization != .always { stopBacklog() }
        announce()
        updateDurable(always: session.grant.authorization == .always)
        if old?.authorization != .always && session.grant.authorization == .always {
            keep(always: effectiveOptions(requestedOptions, session.grant))
            takeBackground()
        } else if old?.authorization == .always && session.grant.authorization != .always {
            // No longer always: a kill now must not leave it monitored in the background.
            hub.subscriptionKept(id, of: program, always: nil)
        }
    }

    /// Makes the subscription durable when it asked to be and its session is `always` (only
    /// an `always` program has a queue), or ends that (docs/protocol.md, "Durable subscriptions").
    func updateDurable(always: Bool) {
        if requestedOptions.durable, always, hub.makeDurable(id, of: program) == nil {
            if durableWritten == nil { durableWritten = 0 }
        } else {
            hub.endDurable(id)
            durableWritten = nil
        }
    }

    /// Why a `subscribe` asking for `durable` is refused, or nil.
    func durableRefusal(_ options: SubscriptionOptions, id rid: RequestID?) -> ProtocolError? {
        guard options.durable, let session else { return nil }
        guard session.grant.authorization == .always else {
            return ProtocolError(.insufficientAuthorization, "a durable subscription needs an always session (its events wait in the program's queue); this one is \(session.grant.authorization.rawValue)", id: rid)
        }
        guard hub.queue != nil else {
            return ProtocolError(.outOfRange, "durable: this daemon keeps no queue", id: rid)
        }
        if let why = hub.durableRefusal(id, of: program) { return ProtocolError(.durableInUse, why, id: rid) }
        return nil
    }

    func effectiveOptions(_ options: SubscriptionOptions, _ grant: Grant) -> SubscriptionOptions {
        var effective = options
        effective.accuracy = grant.accuracy
        return effective
    }

    func startSession(requested: Authorization, purpose: String?, id rid: RequestID?) {
        if let identity { hub.programSeen(identity, rule: rule) }
        switch Grant.decide(requested: requested, purpose: purpose, rule: rule) {
        case .failure(.notAuthorized(let why)):
            endSession()
            send(.error(ProtocolError(.notAuthorized, why, id: rid)), flush: false)
        case .failure(.fullAccuracyDenied(let why)):
            send(.error(ProtocolError(.fullAccuracyDenied, why, id: rid)), flush: false)
        case .success(let grant):
            let old = session?.grant
            if session == nil { hub.sessionOpened() }
            session = (grant, requested, purpose)
            logger.info("session started", metadata: ["authorization": "\(grant.authorization.rawValue)",
                                                      "accuracy": "\(grant.accuracy.rawValue)", "rule": "\(grant.rule)"])
            subscriptionRegranted(from: old) { send(.session(info(id: rid, state: .active)), flush: false) }
        }
    }

    func info(id rid: RequestID?, state: SessionInfo.State) -> SessionInfo {
        guard let session else { return SessionInfo(id: rid, state: state) }
        return SessionInfo(id: rid, state: state, requested: session.requested, authorization: session.grant.authorization,
                           accuracy: session.grant.accuracy, temporaryPrecise: session.grant.temporaryPrecise,
                           purpose: session.purpose, rule: session.grant.rule, reason: session.grant.reason)
    }

    /// Ends the session: `when-in-use` delivery stops with it.
    func endSession() {
        guard session != nil else { return }
        session = nil
        if isSubscribed {
            hub.unsubscribe(id)
            isSubscribed = false
        }
        hub.sessionClosed()
        stopBacklog()
        dropPending()
        logger.info("session ended")
    }

    /// A reload: the peer is resolved against the new policy; an open session is re-decided
    /// and told (`changed`, or `ended` when the new rule denies it).
    func applyPolicy(_ policy: Policy) {
        reconsidering = true
        defer { reconsidering = false }
        let new = identity.map { policy.rule(for: $0) } ?? policy.defaultRule
        guard new != rule else { return }
        rule = new
        guard let session else { return }
        var purpose = session.purpose
        var decision = Grant.decide(requested: session.requested, purpose: purpose, rule: new)
        // A purpose the new rule no longer lists takes back its precise access, not the access
        // the rule still gives: the session goes on at the rule's own accuracy (at a
        // session.start, the same purpose is refused so that the program can ask without it).
        if case .failure(.fullAccuracyDenied(let why)) = decision, purpose != nil,
           case .success(var grant) = Grant.decide(requested: session.requested, purpose: nil, rule: new) {
            grant.reason += "; \(why), so precise access by it ended"
            decision = .success(grant)
            purpose = nil
        }
        switch decision {
        case .success(let grant):
            guard grant != session.grant else { return }
            self.session = (grant, session.requested, purpose)
            subscriptionRegranted(from: session.grant) { send(.session(info(id: nil, state: .changed)), flush: true) }
        case .failure(let error):
            endSession()
            let why = switch error { case .notAuthorized(let w), .fullAccuracyDenied(let w): w }
            send(.session(SessionInfo(state: .ended, reason: why)), flush: true)
        }
    }
}
