import LocationProtocol
import NIOCore

/// How a reload of the configuration file ended.
public enum ReloadOutcome: Sendable, Equatable {
    case applied
    /// The file was refused (why, as logged); the daemon keeps its current configuration.
    case refused(String)
}

/// The `reload` request (docs/protocol.md, "Reload"): the same reload as SIGHUP, answered once
/// it has finished, so `locationctl reload` (the unit's `ExecReload=`) returns when the new
/// configuration is in force and fails when it was refused.
extension Connection {
    func reload(id rid: RequestID?) {
        // An administrative action: root and the daemon's own user only (the unit's ExecReload=
        // runs as the daemon's user).
        guard let uid = peer?.uid, hub.policy.isAdministrator(uid: uid) else {
            logger.notice("reload request refused: not root or the daemon's user")
            send(.error(ProtocolError(.notPermitted, "reload is for root and the daemon's user only", id: rid)), flush: false)
            return
        }
        guard let run = configuration.reload else {
            send(.error(ProtocolError(.notPermitted, "this server does not reload", id: rid)), flush: false)
            return
        }
        let loop = hub.eventLoop
        let connection = NIOLoopBound(self, eventLoop: loop)
        run { outcome in
            loop.execute {
                switch outcome {
                case .applied: connection.value.send(.reloaded(id: rid), flush: true)
                case .refused(let why): connection.value.send(.error(ProtocolError(.reloadRefused, why, id: rid)), flush: true)
                }
            }
        }
    }
}
