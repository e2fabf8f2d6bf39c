import NIOCore

/// Notices when the hub's loop did not run for a while (the process stopped, or a task that
/// blocked the loop), so that the flood limit can tell requests that piled up in a socket
/// meanwhile from a flood: a peer sending 50 requests a second while the loop stood still for
/// ten seconds has 500 waiting when it runs again, and they come out of the socket together.
/// Nothing in the socket says when each was sent; a beat of the loop's own does: a beat that
/// comes late says the loop stood still, and for how long (docs/protocol.md, "Flood policy").
///
/// The beat runs only while a connection is open (`retain`/`release`), so an idle daemon is
/// not woken by it. Confined to the hub's loop.
final class LoopStallWatch {
    let interval: TimeAmount
    private let clock: ShellClock
    private let eventLoop: any EventLoop
    /// When the beat last ran (the flood limiter's clock).
    private var lastBeat: NIODeadline
    /// The last stall a beat saw end: from when that beat was due to when it ran.
    private var lastStall: (from: NIODeadline, to: NIODeadline)?
    private var beat: Scheduled<Void>?
    private var users = 0

    /// A beat later than this past its interval is a stall; less is a busy loop, whose queued
    /// requests the bucket's refill already covers.
    private var slack: TimeAmount { .nanoseconds(interval.nanoseconds / 4) }

    init(eventLoop: any EventLoop, interval: TimeAmount, clock: ShellClock) {
        self.eventLoop = eventLoop
        self.interval = interval
        self.clock = clock
        self.lastBeat = clock.now()
    }

    /// A connection opened: the beat runs while any is.
    func retain() {
        users += 1
        guard users == 1 else { return }
        lastBeat = clock.now()
        scheduleBeat()
    }

    private func scheduleBeat() {
        beat = eventLoop.assumeIsolated().scheduleTask(in: interval) { [self] in
            let t = clock.now()
            let due = lastBeat + interval
            if t > due + slack { lastStall = (due, t) }
            lastBeat = t
            scheduleBeat()
        }
    }

    func release() {
        users -= 1
        guard users == 0 else { return }
        beat?.cancel()
        beat = nil
    }

    /// How long the loop stood still between `since` and now: one under way (a beat overdue now;
    /// after a stall the loop reads its sockets before it runs the overdue beat), and the last
    /// stall a beat saw if it ended lately (within as long as it lasted, 1 s at least: what piled
    /// up then is read as soon as the loop runs, so a connection that was idle through it and
    /// empties its bucket later has nothing from it to claim).
    func stalled(since: NIODeadline) -> TimeAmount {
        let t = clock.now()
        var total = TimeAmount.zero
        if let stall = lastStall, t <= stall.to + max(stall.to - stall.from, .seconds(1)) {
            total = total + Self.overlap(stall.from, stall.to, since, t)
        }
        let due = lastBeat + interval
        if beat != nil, t > due + slack { total = total + Self.overlap(due, t, since, t) }
        return total
    }

    private static func overlap(_ a: NIODeadline, _ b: NIODeadline, _ c: NIODeadline, _ d: NIODeadline) -> TimeAmount {
        let from = max(a, c), to = min(b, d)
        return to > from ? to - from : .zero
    }
}
