import LocationCore
import LocationProtocol

/// The `status` reply (docs/protocol.md, "Status reply"). On the hub's loop, like every request.
extension Connection {
    /// `offset`: the first entry of the `connections` page (docs/protocol.md, "Status reply").
    func statusReply(id rid: RequestID?, offset: Int = 0) -> StatusReply {
        let s = hub.loopSnapshot
        var reply = StatusReply(id: rid, state: s.state, subscribers: s.subscriberCount,
                                source: s.sourceDescription, lastFix: s.lastFix?.time)
        reply.sessions = hub.openSessions
        reply.receiver = hub.receiverWatched.map { $0 ? "watching" : "released" }
        reply.identity = program.rawValue
        reply.queued = hub.queue?.count(of: program)
        reply.backgroundMonitors = hub.backgroundProgramIDs.count
        reply.regions = hub.registeredRegionCount(of: program)
        reply.regionsSuspended = hub.regionsSuspended(of: program)
        if let session {
            reply.grant = "\(session.grant.authorization.rawValue) \(session.grant.accuracy.rawValue) (rule \(session.grant.rule))"
        } else {
            reply.grant = "no session; at most \(rule.authorization.rawValue) \(rule.accuracy.rawValue) (rule \(rule.name))"
        }
        let everyone = registry.all.map(\.statusEntry)
        let showAll = hub.policy.isOwner(identity)
        if session == nil && !showAll {
            // Without a session nothing about the device: whether and when it has a fix (going
            // indoors, into a tunnel) is location too. Only whether the source is reachable.
            reply.state = s.state == .disconnected ? .disconnected : .connected
            reply.lastFix = nil
            reply.receiver = nil
        } else if session?.grant.accuracy == .approximate && !showAll {
            // As its events show them: polling must not time a lost or regained fix either.
            reply.state = s.approximateState
            reply.lastFix = s.approximateLastFix
        }
        reply.connected = everyone.count
        reply.connectionsShown = showAll ? .all : .own
        let visible = Self.visibleConnections(everyone, asker: id.rawValue, showAll: showAll)
        let page = StatusConnectionsCodec.page(visible, from: offset, of: reply)
        reply.connections = Array(page.entries)
        reply.next = page.next
        return reply
    }

    /// This connection as the status reply lists it.
    var statusEntry: StatusReply.ConnectionEntry {
        StatusReply.ConnectionEntry(
            connection: id.rawValue, pid: peer?.pid, uid: peer?.uid, gid: peer?.gid, executable: identity?.executable,
            rule: rule.name,
            session: session.map {
                StatusReply.SessionGrant(authorization: $0.grant.authorization, accuracy: $0.grant.accuracy,
                                         temporaryPrecise: $0.grant.temporaryPrecise, purpose: $0.purpose)
            },
            subscribed: isSubscribed)
    }

    /// What `asker` may see of `all` (docs/privacy.md, "Status"): every connection for an owner
    /// (`showAll`), otherwise only its own entry, since other entries name other programs'
    /// pids and executables. In connection order, the asker's entry marked.
    static func visibleConnections(_ all: [StatusReply.ConnectionEntry], asker: UInt64,
                                   showAll: Bool) -> [StatusReply.ConnectionEntry] {
        all.filter { showAll || $0.connection == asker }
            .sorted { $0.connection < $1.connection }
            .map { entry in
                var e = entry
                e.isSelf = e.connection == asker
                return e
            }
    }
}
