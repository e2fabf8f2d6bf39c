import LocationCore
import LocationProtocol
import Logging

/// Requests → replies (docs/protocol.md).
extension Connection {
    func handleLine(_ line: [UInt8]) {
        let request: Request
        do {
            request = try Request.decode(line)
        } catch {
            logger.debug("bad request", metadata: ["code": "\(error.code.rawValue)", "message": "\(error.message)"])
            send(.error(error), flush: false)
            return
        }
        switch request {
        case .hello(let rid):
            send(.hello(ServerHello(id: rid)), flush: false)
        case .sessionStart(let rid, let requested, let purpose):
            startSession(requested: requested, purpose: purpose, id: rid)
        case .sessionEnd(let rid):
            endSession()
            send(.session(SessionInfo(id: rid, state: .ended)), flush: false)
        case .subscribe(let rid, _) where session == nil:
            send(.error(notAuthorized(rid)), flush: false)
        case .subscribe(let rid, let options):
            if let error = backgroundRefusal(options, id: rid) ?? durableRefusal(options, id: rid) {
                send(.error(error), flush: false)
                return
            }
            // What the filter runs with: an approximate session's accuracy gate is off and its
            // interval at least `approximateInterval` (docs/privacy.md).
            let effective = session.map { effectiveOptions(options, $0.grant).effectiveForFilter } ?? options
            send(.subscribed(id: rid, options: effective), flush: false)
            subscribe(options)
        case .unsubscribe(let rid):
            if isSubscribed {
                hub.unsubscribe(id)
                isSubscribed = false
            }
            durableWritten = nil
            stopBacklog()
            dropPending()
            send(.unsubscribed(id: rid), flush: false)
        case .status(let rid, let offset):
            send(.statusReply(statusReply(id: rid, offset: offset)), flush: false)
        case .ack(let rid, let seq):
            acknowledge(seq, id: rid)
        case .reload(let rid):
            reload(id: rid)
        case .places(let rid, let offset):
            // Places are built from precise visits: an approximate session has none to see.
            guard let session else { send(.error(notAuthorized(rid)), flush: false); return }
            let all = session.grant.accuracy == .precise ? hub.places(of: program) : []
            let page = PlaceCodec.page(all, from: offset, id: rid)
            send(.places(id: rid, places: Array(page.places), next: page.next), flush: false)
        case .visits(let rid, let offset):
            // Recent visits are kept from precise visits only, as places are (docs/places.md).
            guard let session else { send(.error(notAuthorized(rid)), flush: false); return }
            let all = session.grant.accuracy == .precise ? hub.recentVisits(of: program) : []
            let page = RecentVisitCodec.page(all, from: offset, id: rid)
            send(.visits(id: rid, visits: Array(page.visits), next: page.next), flush: false)
        case .regionsAdd, .regionsRemove, .regionsList, .regionsState:
            if let error = regionsRefusal(request.id) {
                send(.error(error), flush: false)
            } else {
                // Another process of the program may have had its regions suspended meanwhile;
                // this one may use them.
                if let identity { hub.programSeen(identity, rule: rule) }
                handleRegions(request)
            }
        }
    }

    func notAuthorized(_ rid: RequestID?) -> ProtocolError {
        ProtocolError(.notAuthorized, rule.authorization == .denied
            ? "policy rule '\(rule.name)' denies location access to this program"
            : "no active session; send session.start first", id: rid)
    }
}
