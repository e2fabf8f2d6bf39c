import LocationCore
@testable import LocationDaemon
import Testing

/// gpsd's epochs in pieces (docs/gpsd.md, "Epochs in pieces"): each epoch is passed on once,
/// as its last piece, and a receiver with one report an epoch is passed on at once.
@Suite struct GPSDEpochPiecesTests {
    static let t0 = CivilTime(year: 2026, month: 3, day: 1, hour: 9).timestamp
    static let ms: Int64 = 1_000_000

    /// A piece: the epoch's time, and its speed to tell the pieces apart.
    static func piece(_ second: Int, speed: Double) -> (EngineInput, Timestamp) {
        let t = t0.adding(seconds: Double(second))
        return (.fix(Fix(time: t, coordinate: Coordinate(latitude: 48, longitude: 11), mode: .threeD, horizontalAccuracy: 5, speed: speed)), t)
    }

    static func speeds(_ inputs: [EngineInput]) -> [Double?] {
        inputs.map { if case .fix(let f) = $0 { f.speed } else { nil } }
    }

    /// Two pieces an epoch (GGA's with a derived speed of 9, RMC's with the receiver's 1): the
    /// first epoch is held until the next begins; from then on each epoch goes at its second
    /// piece, at once, never its first.
    @Test func aReceiverInTwoPiecesIsPassedOnAsItsLastPiece() {
        var pieces = GPSDEpochPieces()
        var out: [EngineInput] = []
        var now: Int64 = 0
        var holds: [Bool] = []
        for second in 0..<4 {
            for speed in [9.0, 1.0] {
                let (input, t) = Self.piece(second, speed: speed)
                holds.append(pieces.timed(input, at: t, now: { now }) { out.append($0) })
                now += 100 * Self.ms
            }
            now += 800 * Self.ms
            // The first epoch goes when the second begins; from then on each goes at its last piece.
            #expect(out.count == (second == 0 ? 0 : second + 1), "after epoch \(second)")
        }
        #expect(Self.speeds(out) == [1, 1, 1, 1])
        #expect(holds == [true, false, true, false, true, false, true, false])
        #expect(pieces.expected == 2)
        #expect(pieces.holdLimit == 200 * Self.ms)  // twice 100 ms between the pieces
        pieces.flush { out.append($0) }
        #expect(out.count == 4, "nothing left held")
    }

    /// One report an epoch: from the second epoch on, nothing is held.
    @Test func aReceiverInOnePieceIsPassedOnAtOnce() {
        var pieces = GPSDEpochPieces()
        var out: [EngineInput] = []
        var held: [Bool] = []
        for second in 0..<5 {
            let (input, t) = Self.piece(second, speed: Double(second))
            held.append(pieces.timed(input, at: t, now: { Int64(second) * 1000 * Self.ms }) { out.append($0) })
        }
        #expect(held == [true, false, false, false, false])
        #expect(Self.speeds(out) == [0, 1, 2, 3, 4])
    }

    /// An epoch with fewer pieces than the one before goes when the next begins (or its time is
    /// up); one with more goes at the learned count, its later pieces dropped, and the next is
    /// held for all of them.
    @Test func aChangingPatternIsLearnedAgain() {
        var pieces = GPSDEpochPieces()
        var out: [EngineInput] = []
        func epoch(_ second: Int, _ speeds: [Double]) {
            for s in speeds {
                let (input, t) = Self.piece(second, speed: s)
                _ = pieces.timed(input, at: t, now: { Int64(second) * 1000 * Self.ms }) { out.append($0) }
            }
        }
        epoch(0, [9, 1])
        epoch(1, [9, 1])     // learned: 2
        epoch(2, [5])        // one piece: waits for the next epoch
        #expect(Self.speeds(out) == [1, 1])
        epoch(3, [9, 8, 7])  // 1 learned from epoch 2: its first piece goes at once, the rest are dropped
        #expect(Self.speeds(out) == [1, 1, 5, 9])
        #expect(pieces.dropped == 2)
        epoch(4, [9, 8, 7])  // 3 learned: goes at its third piece
        epoch(5, [1])
        #expect(Self.speeds(out) == [1, 1, 5, 9, 7])
    }

    /// Something other than a piece of the held epoch (an untimed no-fix, the device gone, the
    /// connection's end) passes it on first; a new device is learned anew.
    @Test func flushAndForget() {
        var pieces = GPSDEpochPieces()
        var out: [EngineInput] = []
        let (a, t) = Self.piece(0, speed: 3)
        #expect(pieces.timed(a, at: t, now: { 0 }) { out.append($0) })
        #expect(pieces.held != nil && out.isEmpty)
        #expect(pieces.holdLimit == GPSDEpochPieces.maximumHold)  // the first epoch: unknown
        pieces.flush { out.append($0) }
        pieces.flush { out.append($0) }
        #expect(Self.speeds(out) == [3])
        let (b, u) = Self.piece(1, speed: 4)
        _ = pieces.timed(b, at: u, now: { 1000 * Self.ms }) { out.append($0) }
        let (c, v) = Self.piece(2, speed: 5)
        _ = pieces.timed(c, at: v, now: { 2000 * Self.ms }) { out.append($0) }
        #expect(Self.speeds(out) == [3, 4, 5])  // learned one piece: 2 went at once
        pieces.forget { out.append($0) }
        #expect(pieces.expected == nil)
        let (d, w) = Self.piece(3, speed: 6)
        #expect(pieces.timed(d, at: w, now: { 3000 * Self.ms }) { out.append($0) })
    }

    /// Two receivers whose reports gpsd interleaves, one TPV an epoch each: each keeps its own
    /// pattern, so after its first epoch every report is passed on at once (learned anew at each
    /// change of device, every report waited for the other receiver's next one).
    @Test func interleavedReceiversKeepTheirOwnPattern() {
        var receivers = GPSDReceiversPieces()
        var out: [EngineInput] = []
        var held: [Bool] = []
        for second in 0..<4 {
            for device in ["/dev/ttyA", "/dev/ttyB"] {
                if receivers.device != device { receivers.switchTo(device) { out.append($0) } }
                let (input, t) = Self.piece(second, speed: Double(second))
                held.append(receivers.current.timed(input, at: t, now: { Int64(second) * 1000 * Self.ms }) { out.append($0) })
            }
        }
        #expect(held == [true, true] + Array(repeating: false, count: 6))
        #expect(out.count == 8, "every report passed on: \(out.count)")
        receivers.forget { out.append($0) }
        #expect(receivers.current.expected == nil)
    }

    /// Drives `pieces` as the source does, its timer included: `arrivals` are (epoch second,
    /// speed, milliseconds after the epoch's start); returns the speeds passed on.
    static func drive(_ arrivals: [(Int, Double, Int64)]) -> [Double?] {
        var pieces = GPSDEpochPieces()
        var out: [EngineInput] = []
        var deadline: Int64?
        for (second, speed, after) in arrivals {
            let now = Int64(second) * 1000 * ms + after * ms
            if let d = deadline, now >= d { pieces.flush { out.append($0) }; deadline = nil }
            let (input, t) = piece(second, speed: speed)
            if pieces.timed(input, at: t, now: { now }, emit: { out.append($0) }) { deadline = now + pieces.holdLimit }
        }
        return speeds(out)
    }

    /// A piece late once (400 ms where the limit is twice the usual 150) goes out as its
    /// epoch's first piece, but the next epochs are whole again: the late piece's arrival is the
    /// spread the next is held for. (Unread, the limit would fall to its floor, and every epoch
    /// after would go out as its first piece.)
    @Test func aPieceLateOnceDoesNotLeaveTheLimitAtItsFloor() {
        var arrivals: [(Int, Double, Int64)] = []
        for second in 0..<8 {
            arrivals.append((second, 9, 0))
            arrivals.append((second, 1, second == 3 ? 400 : 150))
        }
        let out = Self.drive(arrivals + [(8, 9, 0)])
        #expect(out == [1, 1, 1, 9, 1, 1, 1, 1], "\(out)")
    }

    /// A no-fix piece between two pieces of a fix (saab-r4) does not make the epoch a no-fix.
    @Test func aNoFixPieceDoesNotReplaceAFix() {
        var pieces = GPSDEpochPieces()
        var out: [EngineInput] = []
        for second in 0..<3 {
            let (fix, t) = Self.piece(second, speed: 2)
            _ = pieces.timed(fix, at: t, now: { 0 }) { out.append($0) }
            _ = pieces.timed(.noFix(t), at: t, now: { 0 }) { out.append($0) }
        }
        pieces.flush { out.append($0) }
        #expect(Self.speeds(out) == [2, 2, 2], "\(out)")
    }
}
