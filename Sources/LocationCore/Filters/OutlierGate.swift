/// Holds back a fix that lies farther from the last accepted fix than the device can have gone
/// since, until the following fixes confirm it (docs/semantics.md, "Outliers").
///
/// A multipath spike puts a fix hundreds of metres off for an epoch or a few, while the
/// receiver's Doppler speed (which multipath barely touches) and the fixes around it say the
/// device stood still; every subscriber, region and visit saw it. The reach from the last
/// accepted fix — its and the new fix's speed times the elapsed time, an acceleration allowance,
/// both accuracies and a margin — grows with the time since, so a jump after a gap in fixes
/// (a tunnel) is accepted at once; a jump that persists for `confirmFixes` fixes consistent
/// with one another is accepted then, its held fixes released in order.
///
/// State: the last accepted fix and at most `confirmFixes - 1` held ones; O(1) per fix, and
/// nothing allocates once the held buffer has its capacity.
public struct OutlierGate: Sendable {
    public struct Parameters: Hashable, Sendable {
        /// Fixes in a row, each within reach of the one before, that confirm a position the last
        /// accepted fix could not reach (the first of them included). A spike of up to one
        /// fewer epochs is dropped.
        public var confirmFixes = 4
        /// The acceleration allowed between two fixes (½·a·Δt² is added to the reach), m/s²: a
        /// speed that rose and fell again between two fixes goes farther than either speed says.
        public var acceleration = 4.0
        /// The speed taken when neither fix has a Doppler speed, m/s (a fast car; the regions'
        /// plausible speed).
        public var unknownSpeed = 70.0
        /// The 95 % accuracy taken for a fix without one, metres (as the visit detector weighs it).
        public var unknownAccuracy = 50.0
        /// Added to every reach, metres: white noise beyond both 95 % radii, and rounding.
        public var margin = 20.0
        public init() {}
    }

    public let parameters: Parameters
    /// The last fix accepted (the reference of the reach).
    public private(set) var accepted: Fix?
    /// Its unit vector (`Geodesy.unitVector`), and the newest held fix's.
    private var acceptedUnit = SIMD3<Double>()
    private var heldUnit = SIMD3<Double>()
    /// Fixes held, oldest first, each within reach of the one before and none of `accepted`.
    public private(set) var held: [Fix] = []
    /// Fixes to pass on after the last `admit`, in order (`admit`'s count of them).
    public private(set) var released: [Fix] = []
    /// Fixes dropped as outliers since the start.
    public private(set) var dropped = 0

    public init(parameters: Parameters = Parameters()) {
        self.parameters = parameters
        held.reserveCapacity(max(0, parameters.confirmFixes - 1))
        released.reserveCapacity(max(1, parameters.confirmFixes))
    }

    /// Admits `fix` (`unit`: its unit vector): returns how many fixes `released` now holds to
    /// pass on, in order (none, the fix itself, or held fixes a confirmation released), ending
    /// with `fix` whenever there are any.
    public mutating func admit(_ fix: Fix, unit: SIMD3<Double>) -> Int {
        released.removeAll(keepingCapacity: true)
        guard let last = accepted else { return accept(fix, unit) }
        switch fix.time.order(after: last.time) {
        case .later: break
        case .jumpedBack:
            // The receiver's clock jumped back and the clock guard let it through: no reach can
            // be measured across it; the fix starts afresh, as the first one does.
            dropHeld()
            return accept(fix, unit)
        case .sameEpoch, .outOfOrder:
            // Every stage ignores these itself; they are neither evidence nor a reference.
            released.append(fix)
            return 1
        }
        // The same position again while the fix says the device moves (a receiver repeating a
        // stale fix while it has none) is no news of where the device is: passed on, but the
        // reach goes on growing from the time the position was first reported, so the fix after
        // a stale run is not taken for a jump. Standing, the same position is news (a
        // receiver's static hold pins it).
        if fix.coordinate == last.coordinate, held.isEmpty, (Self.knownSpeed(fix) ?? 0) >= Self.staleSpeed {
            released.append(fix)
            return 1
        }
        if reaches(from: last, acceptedUnit, to: fix, unit) {
            // Back on the track: what was held was a spike.
            dropHeld()
            return accept(fix, unit)
        }
        if let newest = held.last {
            if fix.time <= newest.time { return 0 }  // an epoch already held, reported again
            if reaches(from: newest, heldUnit, to: fix, unit) {
                if held.count + 1 >= parameters.confirmFixes {
                    // The new position persists: it is where the device is.
                    released.append(contentsOf: held)
                    held.removeAll(keepingCapacity: true)
                    return accept(fix, unit)
                }
                held.append(fix)
                heldUnit = unit
                return 0
            }
        }
        // Far from the track and from what was held: a new run of its own.
        dropHeld()
        if parameters.confirmFixes <= 1 { return accept(fix, unit) }
        held.append(fix)
        heldUnit = unit
        return 0
    }

    /// The source went away: nothing held can be confirmed, and the next fix is a first one.
    public mutating func reset() {
        dropHeld()
        accepted = nil
    }

    /// Whether the device can have gone from `a` to `b` (with their unit vectors): their
    /// distance is within the reach. The chord stands for the great circle: no trigonometry per
    /// fix, and never shorter a reach (0.1 % more lenient at 1,000 km, where reaches are long).
    func reaches(from a: Fix, _ ua: SIMD3<Double>, to b: Fix, _ ub: SIMD3<Double>) -> Bool {
        Geodesy.chordDistance(ua, ub) <= reach(from: a, to: b)
    }

    /// How far from `a` the device can be at `b`'s time, metres.
    public func reach(from a: Fix, to b: Fix) -> Double {
        let p = parameters
        let dt = Swift.max(0, b.time - a.time)
        let speed: Double
        switch (Self.knownSpeed(a), Self.knownSpeed(b)) {
        case (nil, nil): speed = p.unknownSpeed
        case (let s?, nil), (nil, let s?): speed = s
        case (let s?, let t?): speed = Swift.max(s, t)
        }
        return speed * dt + 0.5 * p.acceleration * dt * dt
            + (a.horizontalAccuracy ?? p.unknownAccuracy) + (b.horizontalAccuracy ?? p.unknownAccuracy) + p.margin
    }

    /// A repeated position at this speed or more (m/s) is stale: a moving device's fixes differ.
    static let staleSpeed = 1.0

    /// A Doppler speed that is one (the sources pass none other, but a negative one would
    /// shrink the reach below the accuracies).
    static func knownSpeed(_ fix: Fix) -> Double? {
        guard let s = fix.speed, s >= 0, s.isFinite else { return nil }
        return s
    }

    private mutating func accept(_ fix: Fix, _ unit: SIMD3<Double>) -> Int {
        accepted = fix
        acceptedUnit = unit
        released.append(fix)
        return released.count
    }

    private mutating func dropHeld() {
        dropped += held.count
        held.removeAll(keepingCapacity: true)
    }
}
