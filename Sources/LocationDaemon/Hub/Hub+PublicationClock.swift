import LocationCore
import LocationProtocol
import Logging
import NIOCore

/// Publication ticks (on the loop; docs/privacy.md, "Publication epochs"): the hub estimates
/// the receiver's time between reports and starts each epoch by it.
extension Hub {
    /// At the first dropped fix and then at each doubling of the count: a second receiver
    /// with another clock drops every other report, which must not fill the journal.
    func logClockGlitches(_ s: State) {
        let dropped = s.engine.clock.dropped
        s.clockGlitchNoticeAt = 2 * dropped
        logger.notice("dropped \(dropped == 1 ? "a fix" : "\(dropped) fixes so far") whose time jumped, as the report after it did not go on from its time (a receiver clock glitch, or a second receiver with another clock; docs/semantics.md, \"Time\")")
    }

    /// A report with a time anchors the estimate of the receiver's time; the first starts the
    /// ticks. Per report: a clock read and two stores.
    func anchorClock(_ s: State, _ input: EngineInput) {
        let time: Timestamp
        switch input {
        case .fix(let fix):
            // Not by a fix the engine holds: it may be a glitch an hour off.
            if s.engine.clock.held?.time == fix.time { return }
            time = fix.time
        case .noFix:
            // Nor by one the engine takes as untimed: its time is off the timeline.
            guard let t = s.engine.clock.noFixTime else { return }
            time = t
        default: return
        }
        s.clockAnchor = (time, clock.now())
        if s.tick == nil { scheduleTick(s) }
    }

    /// The receiver's time now, by the loop's clock since the last timed report.
    func estimatedTime(_ s: State) -> Timestamp? {
        guard let anchor = s.clockAnchor else { return nil }
        return anchor.time.adding(seconds: Double((clock.now() - anchor.at).nanoseconds) / 1e9)
    }

    /// One timer at a time, for the next epoch start (a millisecond after it, so the estimate is
    /// past it when it fires): a wake-up every 10 minutes, whether or not reports come.
    func scheduleTick(_ s: State) {
        guard let now = estimatedTime(s) else { return }
        let next = ApproximateLocation.nextEpochStart(after: now).adding(seconds: 0.001)
        s.tick = eventLoop.scheduleTask(in: .nanoseconds(Int64((next - now) * 1e9))) { [self] in
            let s = box.value
            s.tick = nil
            if let t = estimatedTime(s) { handle(.tick(t)) }
            if s.tick == nil { scheduleTick(s) }
        }
    }
}
