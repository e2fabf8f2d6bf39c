import LocationCore

/// When a replayed input is due on the wall clock (docs/nmea.md, "Replay"): log time since an
/// anchor, divided by the speed. Every input with a time is paced, epochs without a fix too (a
/// five-minute fix loss takes five minutes at speed 1). The anchor moves to an input, which is
/// then due at once, when the log's clock steps back (a spliced log, a receiver's bad date,
/// the next pass of `--loop`) or jumps forward by more than `longestWait` (a bad date would
/// otherwise stall the replay for years).
struct ReplayPacer {
    /// Log seconds a gap may span and still be waited for.
    static let longestWait = 3600.0
    let speed: Double
    private var anchorLog = Timestamp(nanoseconds: 0)
    private var anchorWall = 0.0
    private var last: Timestamp?

    init(speed: Double) { self.speed = speed }

    /// The monotonic time (seconds) at which the input at log time `t` is due, `now` being the
    /// monotonic time it was read at.
    mutating func due(_ t: Timestamp, now: Double) -> Double {
        defer { last = t }
        if let last, t >= last, t - last <= Self.longestWait {
            return anchorWall + (t - anchorLog) / speed
        }
        anchorLog = t
        anchorWall = now
        return now
    }
}
