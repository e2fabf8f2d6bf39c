import LocationCore

/// gpsd 3.22 reports some receivers' epochs in pieces: a TPV after each sentence of the epoch
/// (GGA, then RMC, …), all with the epoch's time, each with what gpsd knew by then. The first
/// piece can be far from the last: haicom-305N's (after GGA) has a speed gpsd derived from the
/// position change, 9.2 m/s for a receiver standing still, and no course; the RMC's piece has
/// the receiver's 0.99 m/s and its course. The engine keeps the first fix of a time, so every
/// epoch of such a receiver would reach subscribers as its first piece, and a replay of the same
/// log (the NMEA decoder assembles whole epochs) would tell a different story (docs/gpsd.md,
/// "Epochs in pieces").
///
/// So a timed report is passed on once its epoch is complete: when as many pieces of its time
/// came as in the receiver's previous epoch (its pattern, learned: a receiver with one TPV an
/// epoch, most of them, is passed on at once, with no delay), when a report of another time or
/// an untimed one comes, or when `holdLimit` after its first piece passed (twice the previous
/// epoch's spread from first to last piece, within 50–500 ms). A receiver's first epoch on a
/// connection is held until one of those, its piece count unknown. Pieces of an epoch
/// already passed on are dropped (the engine would drop a fix of the same time anyway, and a
/// no-fix piece would flip the state twice within the epoch, as saab-r4's mid-epoch mode 1
/// would).
///
/// Pure: the source gives it the monotonic time and arms the timer it asks for.
struct GPSDEpochPieces {
    /// Pieces of the receiver's last complete epoch; nil while unknown.
    private(set) var expected: Int?
    /// The epoch being reported: its time, its pieces so far, its first and latest piece's arrival.
    private var time: Timestamp?
    private var count = 0
    /// nil when the epoch's first piece was passed on unheld (its arrival not read).
    private var firstAt: Int64?
    private var lastAt: Int64 = 0
    /// How long the last epoch's pieces took to come, first to last, nanoseconds; nil when
    /// not measured.
    private var spread: Int64?
    /// The latest piece of `time`, not yet passed on.
    private(set) var held: EngineInput?
    /// Pieces dropped because their epoch had been passed on.
    private(set) var dropped = 0

    static let minimumHold: Int64 = 50_000_000
    static let maximumHold: Int64 = 500_000_000

    /// How long an epoch is held at most after its first piece.
    var holdLimit: Int64 {
        guard expected != nil, let spread else { return Self.maximumHold }
        return min(Self.maximumHold, max(Self.minimumHold, 2 * spread))
    }

    /// A timed report (`input`, of time `t`) arrived; `now` reads the monotonic clock
    /// (nanoseconds), only when an epoch is held: a receiver with one report an epoch costs no
    /// clock read. What is to be passed on now goes to `emit` (a held epoch this one ends, then
    /// this one if it is complete); returns true when this report is held, for the caller to arm
    /// a timer of `holdLimit` (a later piece of the same epoch keeps the first one's).
    mutating func timed(_ input: EngineInput, at t: Timestamp, now: () -> Int64, emit: (EngineInput) -> Void) -> Bool {
        if let current = time, current == t {
            count += 1
            // Read for a piece that comes too late as well: its epoch's spread is what the next
            // is held for (unread, a piece late once left the limit at its floor for good).
            if firstAt != nil { lastAt = now() }
            guard let h = held else {
                dropped += 1
                return false
            }
            // A no-fix piece does not replace a fix of its epoch: the receiver had the fix at
            // that time, and gpsd's mode 1 between two pieces (saab-r4) is its view after a
            // sentence that said nothing of one.
            if case .noFix = input, case .fix = h {} else { held = input }
            if let expected, count >= expected { flush(emit: emit) }
            return false
        }
        flush(emit: emit)
        if time != nil {
            expected = min(count, 64)
            spread = firstAt.map { lastAt - $0 }
        }
        time = t
        count = 1
        if expected == 1 {
            firstAt = nil
            emit(input)
            return false
        }
        let at = now()
        firstAt = at
        lastAt = at
        held = input
        return true
    }

    /// Passes on the held epoch, if any: its time is up, or something other than a piece of it
    /// came (an untimed report, a deactivated device, the connection's end).
    mutating func flush(emit: (EngineInput) -> Void) {
        guard let h = held else { return }
        held = nil
        emit(h)
    }

    /// Another receiver reports, or the connection starts again: its pattern is learned anew.
    mutating func forget(emit: (EngineInput) -> Void) {
        flush(emit: emit)
        let dropped = dropped
        self = GPSDEpochPieces()
        self.dropped = dropped
    }
}

/// The pieces of each receiver gpsd reports, learned apart: gpsd interleaves the TPVs of several
/// devices, and learning anew at every change of device would hold each report of two receivers
/// until the other's next one. A change of device passes on the epoch held (one timer, one epoch
/// held at a time), so pieces of one receiver's epoch split by another's report are passed on as
/// they stood, the rest dropped.
struct GPSDReceiversPieces {
    /// The receiver that reported last, and its pieces.
    private(set) var device = ""
    var current = GPSDEpochPieces()
    private var others: [String: GPSDEpochPieces] = [:]

    /// `device` reports now (another than the last).
    mutating func switchTo(_ device: String, emit: (EngineInput) -> Void) {
        current.flush(emit: emit)
        others[self.device] = current
        current = others.removeValue(forKey: device) ?? GPSDEpochPieces()
        self.device = device
    }

    /// Another connection: every receiver is learned anew.
    mutating func forget(emit: (EngineInput) -> Void) {
        current.forget(emit: emit)
        device = ""
        others = [:]
    }
}
