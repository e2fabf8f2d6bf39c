import LocationCore
import LocationProtocol

extension Connection {
    /// Why this connection may not use regions, or nil: regions need an `always`, precise session.
    func regionsRefusal(_ rid: RequestID?) -> ProtocolError? {
        guard let session else { return notAuthorized(rid) }
        if session.grant.accuracy != .precise {
            return ProtocolError(.fullAccuracyDenied, "region monitoring needs precise location; this session is approximate (rule '\(session.grant.rule)')", id: rid)
        }
        if session.grant.authorization < .always {
            return ProtocolError(.insufficientAuthorization, "region monitoring needs an always session; this one is \(session.grant.authorization.rawValue)", id: rid)
        }
        return nil
    }

    static func protocolError(_ e: RegionError, id: RequestID?) -> ProtocolError {
        let code: ErrorCode = switch e.code {
        case .invalidRegion: .invalidRegion
        case .duplicateRegion: .duplicateRegion
        case .tooManyRegions: .tooManyRegions
        case .unknownRegion: .unknownRegion
        case .notStored: .storeFailed
        }
        return ProtocolError(code, e.message, id: id)
    }

    func handleRegions(_ request: Request) {
        do throws(RegionError) {
            switch request {
            case .regionsAdd(let rid, let regions):
                // The policy's region limit for this program (docs/privacy.md).
                let limit = session?.grant.maxRegions ?? 0
                let current = hub.registeredRegions(of: program)
                // An empty add registers nothing (regions import sends one to learn the count), so
                // a program over a limit lowered since its regions were added is not refused it.
                if !regions.isEmpty, current + regions.count > limit {
                    let ruleName = session?.grant.rule ?? rule.name
                    if current >= limit {
                        throw RegionError(.tooManyRegions, "\(current) registered, at or over this program's limit of \(limit) (policy rule '\(ruleName)'): remove \(current - limit + regions.count) first (regions.remove), or raise max_regions in the rule")
                    }
                    throw RegionError(.tooManyRegions, "\(current) registered + \(regions.count) would exceed this program's limit of \(limit) (policy rule '\(ruleName)'): add at most \(limit - current), remove some first (regions.remove), or raise max_regions in the rule")
                }
                if !regions.isEmpty, let uid = peer?.uid, !hub.policy.isOwner(uid: uid) {
                    let limit = configuration.maxRegionsPerUser
                    let mine = hub.registeredRegions(ofUser: uid)
                    if mine + regions.count > limit {
                        throw RegionError(.tooManyRegions, "uid \(uid)'s programs have \(mine) regions registered; \(regions.count) more would exceed the most one user may register ([regions] max_registered_per_user = \(limit)): remove some first (regions.remove, in any of the user's programs), or raise max_registered_per_user")
                    }
                }
                let registered: Int
                do {
                    registered = try hub.addRegions(regions, for: program)
                } catch where error.code == .tooManyRegions {
                    // The core knows the limit but not where it is set; the daemon does.
                    throw RegionError(.tooManyRegions, "\(error.message) ([regions] max_registered in locationd.toml): remove some first (regions.remove), or raise max_registered")
                }
                send(.regionsChanged(id: rid, added: regions.count, removed: 0, registered: registered), flush: false)
            case .regionsRemove(let rid, let ids):
                let r = try hub.removeRegions(ids, for: program)
                send(.regionsChanged(id: rid, added: 0, removed: r.removed, registered: r.registered), flush: false)
            case .regionsList(let rid, let offset):
                try hub.checkRestored(program)  // not an empty list: the regions are there, unloaded
                let page = RegionCodec.page(hub.regionRecords(of: program), from: offset, id: rid)
                send(.regions(id: rid, regions: Array(page.records), next: page.next), flush: false)
            case .regionsState(let rid, let ids, let offset):
                try hub.checkRestored(program)
                var records = hub.regionRecords(of: program)
                if let ids {
                    let byID = Dictionary(records.map { ($0.region.id, $0) }, uniquingKeysWith: { a, _ in a })
                    records = []
                    for id in ids {
                        guard let r = byID[id] else { throw RegionError(.unknownRegion, "region \(id) is not registered") }
                        records.append(r)
                    }
                }
                let page = RegionCodec.page(records, from: offset, id: rid)
                send(.regions(id: rid, regions: Array(page.records), next: page.next), flush: false)
            default:
                break
            }
        } catch {
            send(.error(Self.protocolError(error, id: request.id)), flush: false)
        }
    }
}
