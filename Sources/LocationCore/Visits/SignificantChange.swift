/// Significant-change delivery (docs/semantics.md, "Significant change"): the first fix at
/// once; afterwards a fix once the device is ≥ `distance` metres from the last *delivered* fix
/// and ≥ `interval` seconds after it — confirmed by the next fix, so one wild fix never
/// triggers. O(1) state, no allocation.
public struct SignificantChange: Hashable, Sendable {
    public struct Parameters: Hashable, Sendable {
        /// Metres from the last delivered fix.
        public var distance: Double
        /// Seconds of fix time since the last delivered fix.
        public var interval: Double
        /// Fixes with a 95 % accuracy worse than this are ignored, metres.
        public var maximumAccuracy: Double
        /// The fastest plausible ground speed between a candidate and its confirming fix, m/s.
        public var maximumSpeed: Double
        /// Whether a fix of unknown accuracy is ignored too: set for a subscription that asked
        /// for an accuracy (`desiredAccuracy`), which such a fix cannot be shown to meet.
        public var requiresKnownAccuracy = false

        public init(distance: Double = 500, interval: Double = 300, maximumAccuracy: Double = 200, maximumSpeed: Double = 70) {
            self.distance = distance; self.interval = interval
            self.maximumAccuracy = maximumAccuracy; self.maximumSpeed = maximumSpeed
        }
    }

    public let parameters: Parameters
    public private(set) var lastDelivered: Fix?
    /// A fix that met both thresholds, waiting for the next fix to confirm it.
    @usableFromInline var candidate: Fix?

    public init(parameters: Parameters = Parameters()) { self.parameters = parameters }

    /// Offers a fix; returns the fix to deliver as a significant change, if any. Inlined: called
    /// through an optional in every subscription, for every fix, it was copied out and back
    /// (three copies of the detector, two fixes each) instead of changed in place.
    @inline(__always)
    public mutating func offer(_ fix: Fix) -> Fix? {
        if let a = fix.horizontalAccuracy {
            if a > parameters.maximumAccuracy { return nil }
        } else if parameters.requiresKnownAccuracy {
            return nil
        }
        guard let last = lastDelivered else {
            lastDelivered = fix
            return fix
        }
        guard qualifies(fix, after: last) else {
            // Most fixes: no candidate to drop, and no write.
            if case .some = candidate { candidate = nil }
            return nil
        }
        if let c = candidate, fix.time > c.time {
            let slack = 100 + parameters.maximumSpeed * (fix.time - c.time)
            if Geodesy.distance(c.coordinate, fix.coordinate) <= slack {
                candidate = nil
                lastDelivered = fix
                return fix
            }
        }
        candidate = fix
        return nil
    }

    /// Offers a fix that needs no accuracy gate and no confirming fix: an approximate program's
    /// published location, a cell the hysteresis moved to and an epoch start showed. Returns it
    /// if it is a significant change.
    mutating func offerConfirmed(_ fix: Fix) -> Fix? {
        if let last = lastDelivered, !qualifies(fix, after: last) { return nil }
        candidate = nil
        lastDelivered = fix
        return fix
    }

    /// A fix timed `Timestamp.clockJumpBack` or more before the last delivered one (the
    /// receiver's clock jumped back) meets the interval: otherwise a backwards jump would silence
    /// significant changes for as long as the jump. One only a little older is out of order.
    @inlinable func qualifies(_ fix: Fix, after last: Fix) -> Bool {
        let interval: Bool
        switch fix.time.order(after: last.time) {
        case .later: interval = fix.time - last.time >= parameters.interval
        case .sameEpoch, .outOfOrder: interval = false
        case .jumpedBack: interval = true
        }
        return interval && !Geodesy.isCertainlyCloser(last.coordinate, fix.coordinate, than: parameters.distance)
            && Geodesy.distance(last.coordinate, fix.coordinate) >= parameters.distance
    }
}
