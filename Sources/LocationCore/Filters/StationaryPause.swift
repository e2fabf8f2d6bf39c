/// What a subscription moves with (`activityType`): how long it must be still before its
/// locations pause (docs/semantics.md, "Pause when stationary").
public enum ActivityType: String, Hashable, Sendable, CaseIterable {
    /// A car, a bus: stops at red lights, level crossings and in jams without having arrived.
    case automotive
    /// Walking, running, cycling for sport: rests at a crossing or for a drink.
    case fitness
    /// Anything else (the default).
    case other
}

/// Pauses a subscription's locations while the device is still, and resumes them once it
/// moves (docs/semantics.md, "Pause when stationary"), as Core Location's
/// `pausesLocationUpdatesAutomatically` does for its `activityType`.
///
/// Still: every fix for `stillSeconds` within `stillRadius` (plus the fix's own accuracy) of
/// where the stillness began, none with a Doppler speed of `movingSpeed` or more. Moving again:
/// `resumeFixes` fixes in a row with a Doppler speed of `movingSpeed` or more spanning
/// `resumeSeconds` (multipath, which makes jumps and jitter, barely touches Doppler), or fixes
/// in a row all beyond `resumeDistance` (plus their accuracy) of where it paused for
/// `displacedSeconds` (a receiver without Doppler, or one that came back elsewhere after a gap).
/// Runs on the fixes the outlier gate accepted. A few numbers of state; O(1) per fix.
public struct StationaryPause: Sendable {
    public struct Parameters: Hashable, Sendable {
        public var stillSeconds: Double
        public var stillRadius = 50.0
        public var movingSpeed = 0.8
        public var resumeFixes = 3
        public var resumeSeconds = 2.0
        public var resumeDistance = 150.0
        public var displacedSeconds = 30.0

        /// The defaults for an activity: a car waits out red lights and jams (5 min), fitness a
        /// rest (3 min), anything else 2 min.
        public init(activity: ActivityType = .other) {
            switch activity {
            case .automotive: stillSeconds = 300
            case .fitness: stillSeconds = 180
            case .other: stillSeconds = 120
            }
        }
    }

    /// What one fix does to the subscription's locations.
    public enum Outcome: Hashable, Sendable {
        /// Not paused: the fix goes on to the location filter.
        case deliver
        /// The device has been still long enough: `paused`, and this fix is not delivered.
        case pause
        /// Paused, and still paused: not delivered.
        case hold
        /// Movement confirmed: `resumed`, then this fix goes on to the location filter.
        case resume
    }

    public let parameters: Parameters
    public private(set) var isPaused = false
    /// Where and when the current still run began (while paused: where it began); nil after a
    /// moving fix.
    private var anchor: Fix?
    private var anchorUnit = SIMD3<Double>()
    /// The latest fix seen.
    private var latest: Timestamp?
    /// While paused: the first of the current run of moving fixes and its length; the first of
    /// the current run of fixes far from the anchor.
    private var movingSince: Timestamp?
    private var movingFixes = 0
    private var displacedSince: Timestamp?

    public init(parameters: Parameters) { self.parameters = parameters }

    /// Offers an accepted fix (`unit`: its unit vector).
    public mutating func offer(_ fix: Fix, unit: SIMD3<Double>) -> Outcome {
        if let latest {
            switch fix.time.order(after: latest) {
            case .later: break
            case .sameEpoch, .outOfOrder: return isPaused ? .hold : .deliver
            case .jumpedBack:
                // No duration can be measured across it: the still run starts again.
                self.latest = fix.time
                if !isPaused { anchor = nil }
                movingSince = nil; movingFixes = 0; displacedSince = nil
                return isPaused ? .hold : .deliver
            }
        }
        latest = fix.time
        let p = parameters
        let moving = (OutlierGate.knownSpeed(fix) ?? 0) >= p.movingSpeed
        guard let a = anchor else {
            anchor = moving ? nil : fix
            anchorUnit = unit
            return .deliver
        }
        let distance = Geodesy.chordDistance(anchorUnit, unit)
        let accuracy = fix.horizontalAccuracy ?? 0
        if !isPaused {
            if moving || distance > p.stillRadius + accuracy {
                // A still run starts at a fix that is not moving.
                anchor = moving ? nil : fix
                anchorUnit = unit
                return .deliver
            }
            guard fix.time - a.time >= p.stillSeconds else { return .deliver }
            isPaused = true
            movingSince = nil; movingFixes = 0; displacedSince = nil
            return .pause
        }
        if moving {
            if movingSince == nil { movingSince = fix.time; movingFixes = 0 }
            movingFixes += 1
        } else {
            movingSince = nil; movingFixes = 0
        }
        if distance > p.resumeDistance + accuracy {
            if displacedSince == nil { displacedSince = fix.time }
        } else {
            displacedSince = nil
        }
        let byDoppler = movingSince.map { movingFixes >= p.resumeFixes && fix.time - $0 >= p.resumeSeconds } ?? false
        let byDistance = displacedSince.map { fix.time - $0 >= p.displacedSeconds } ?? false
        guard byDoppler || byDistance else { return .hold }
        isPaused = false
        anchor = nil
        movingSince = nil; movingFixes = 0; displacedSince = nil
        return .resume
    }
}
