import LocationCore
import LocationProtocol
import Logging
import NIOCore

/// Receiver gating (on the loop; docs/privacy.md, "Receiver"): fixes are asked for only while
/// something needs them.
extension Hub {
    /// Whether anyone needs fixes: an open session, a subscription, or a program's regions,
    /// visits or significant changes (background monitoring).
    public var needsFixes: Bool {
        let s = box.value
        return s.openSessions > 0 || s.engine.subscriberCount > 0 || s.engine.monitorsRegions
            || !s.engine.backgroundProgramIDs.isEmpty || s.engine.hasAwaySubscriptions
    }

    /// Whether the receiver is watched now (nil: the source is not gated, e.g. a replay).
    public var receiverWatched: Bool? { box.value.receiverWatched }

    /// `handler(needed)` is called now and whenever the need for fixes changes.
    public func onDemandChange(_ handler: @escaping @Sendable (Bool) -> Void) {
        box.value.demandHandler = handler
        box.value.receiverWatched = nil
        updateDemand()
    }

    public var openSessions: Int { box.value.openSessions }

    public func sessionOpened() { box.value.openSessions += 1; updateDemand() }
    public func sessionClosed() { box.value.openSessions -= 1; updateDemand() }

    func updateDemand() {
        let s = box.value
        guard let handler = s.demandHandler else { return }
        let need = needsFixes
        guard s.receiverWatched != need else { return }
        s.receiverWatched = need
        logger.info(need ? "receiver: watching (fixes needed)" : "receiver: released (no session or monitor needs fixes)")
        handler(need)
    }
}
