/// Holds a fix whose time jumps until the next report shows that the receiver's clock went on
/// from it (docs/semantics.md, "Time": clock jumps).
///
/// Taken as a real gap, one report stamped an hour ahead (a receiver time glitch) would make
/// regions confirm a transition with it alone and, at the next fix back on the old timeline, a
/// second one; the visit detector would close a stay of an hour and shift every later time by it. A
/// fix an hour behind would do the same the other way. Held for one report, a glitch is told from a
/// real jump (the bt451 log's 52 minutes back, a tunnel's gap) by what follows it: only a report on
/// the held fix's own timeline releases it; a fix that is not drops it.
public struct ClockJumpGuard: Sendable {
    /// The fix held.
    public private(set) var held: Fix?
    /// The time of the latest fix let through (or timed no-fix report on its timeline).
    private var latest: Timestamp?
    /// Seconds between the last two fixes let through: the receiver's pace.
    private var pace = 0.0
    /// Held fixes dropped as glitches.
    public private(set) var dropped = 0
    /// The time the last no-fix report is taken at: its own, or nil when it had none or its
    /// time is off the timeline (`noFix`).
    public private(set) var noFixTime: Timestamp?
    /// The time of the last no-fix report if it jumped ahead of the timeline, for the next one
    /// to go on from.
    private var noFixAhead: Timestamp?

    /// A jump is a fix a minute or more before the latest (`Timestamp.Order.jumpedBack`), or
    /// later than it by more than a minute and ten of the receiver's intervals (a receiver
    /// with a fix every 5 minutes is not jumping at each).
    static let minimumJump = Timestamp.clockJumpBack
    static let paceFactor = 10.0

    public init() {}

    private var window: Double { Swift.max(Self.minimumJump, Self.paceFactor * pace) }

    /// Admits `fix`: returns, in order, the fixes to run through the detectors now (none, one,
    /// or a released one and this one).
    public mutating func admit(_ fix: Fix) -> (first: Fix?, second: Fix?) {
        // No-fix reports go on from each other only with no fix between: otherwise a glitch an
        // hour ahead and another within its window after any number of good fixes would be
        // taken as timed.
        noFixAhead = nil
        if let h = held {
            held = nil
            if confirms(fix.time, h) {
                // The timeline moved to the held fix's; the interval that confirmed it is the
                // receiver's pace (a jump itself is none: taken as one, the window grew to hours).
                latest = h.time
                pace = fix.time - h.time
                let (now, _) = pass(fix)
                return (h, now)
            }
            if fix.time == h.time { held = h; return (nil, nil) }  // the held epoch's next report
            dropped += 1
        }
        return pass(fix)
    }

    /// A no-fix report: a held fix is released if the report is timed on its timeline, and
    /// otherwise stays held for the next fix to decide. A timed report keeps the timeline going
    /// (the first fix after an outage it reported is no jump); after an untimed one there is
    /// no timeline to judge the next fix by, which is let through as a first one is.
    ///
    /// Its time is `noFixTime`, what stamps the `noFix` status and the publication epochs, unless
    /// it is off the timeline: a minute or more behind the latest fix, or ahead of it beyond the
    /// window and not going on from a no-fix report that was ahead too. A receiver without a fix
    /// says whatever its clock says, and gpsd passes it on: after a reset an old date (gp-320fw's
    /// 2006 in 2019) that counts on from there, or a glitch. Such a report is untimed for the
    /// rest but keeps the timeline: only a fix (the guard above) moves it. Reports ahead that go
    /// on from each other are what follows a silent gap in a log.
    public mutating func noFix(at time: Timestamp?) -> Fix? {
        let ahead = noFixAhead
        noFixAhead = nil
        noFixTime = time
        guard let time else {
            if held != nil { dropped += 1 }
            held = nil
            latest = nil
            return nil
        }
        if let h = held {
            // Not dropped by a report that does not go on from it: that may be a second
            // receiver without a fix, whose reports would then drop every fix of the one with
            // fixes, for good.
            if time == h.time || confirms(time, h) {
                held = nil
                latest = h.time
                return h
            }
        }
        guard let latest else { return nil }
        switch time.order(after: latest) {
        case .later where time - latest > window:
            noFixAhead = time
            if let ahead, time > ahead, time - ahead <= window { break }
            noFixTime = nil
        case .jumpedBack:
            noFixTime = nil
        case .later:
            if held == nil { self.latest = time }
        case .sameEpoch, .outOfOrder:
            break
        }
        return nil
    }

    /// The source went away: what it said last cannot be confirmed, and what comes after a
    /// reconnection is let through as a first fix is.
    public mutating func sourceLost() {
        if held != nil { dropped += 1 }
        held = nil
        latest = nil
    }

    private mutating func pass(_ fix: Fix) -> (first: Fix?, second: Fix?) {
        guard let latest else {
            self.latest = fix.time
            return (fix, nil)
        }
        switch fix.time.order(after: latest) {
        case .later where fix.time - latest > window, .jumpedBack:
            held = fix
            return (nil, nil)
        case .later:
            pace = fix.time - latest
            self.latest = fix.time
        case .sameEpoch, .outOfOrder:
            break  // each detector ignores these itself; they move no clock
        }
        return (fix, nil)
    }

    /// Whether a report at `time` goes on from the held fix `h`. After a jump back, it must be
    /// after `h` and still behind where the old timeline was (a glitch's next report is back
    /// on the old one, past it); after a jump ahead, after `h` by no more than twice the jump or
    /// the window (a glitch's next report is before it; the bound only keeps a far later
    /// report from confirming, with room for a sparse receiver's jitter and a second gap).
    private func confirms(_ time: Timestamp, _ h: Fix) -> Bool {
        guard time > h.time else { return false }
        guard let latest else { return true }
        if h.time < latest { return time < latest }
        return time - h.time <= Swift.max(window, 2 * (h.time - latest))
    }
}
