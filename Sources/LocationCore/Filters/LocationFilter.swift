/// What a subscriber asks of its location stream. Zero/`nil` means "no constraint".
public struct SubscriptionOptions: Hashable, Sendable {
    /// Deliver a fix only once it is at least this far (metres) from the last *delivered* fix.
    public var distanceFilter: Double
    /// Deliver only fixes whose `horizontalAccuracy` (95 %, metres) is at most this; a fix of
    /// unknown accuracy does not pass a set gate.
    public var desiredAccuracy: Double?
    /// Deliver at most one fix per this many seconds of fix time.
    public var minimumInterval: Double
    /// Which events to deliver (default: location only).
    public var events: EventKinds = .location
    /// Visit detection parameters (docs/semantics.md, "Visits").
    public var visitParameters = VisitDetector.Parameters()
    /// Significant-change parameters (docs/semantics.md, "Significant change").
    public var significantParameters = SignificantChange.Parameters()
    /// Every event of the subscription (after its filters) is numbered in the program's durable
    /// queue and written from there, kept until acknowledged (docs/protocol.md, "Durable
    /// subscriptions"). The daemon's concern: the engine delivers the same events either way.
    public var durable = false
    /// What the session allows (set by the daemon from the session, not by the client):
    /// `approximate` runs the subscription through `ApproximateLocation` (docs/privacy.md).
    public var accuracy: Accuracy = .precise
    /// Location events from every fix, outliers included: the outlier gate (docs/semantics.md,
    /// "Outliers") applies to the other kinds only.
    public var raw = false
    /// Pause the location events while the device is still (docs/semantics.md, "Pause when
    /// stationary"), with the stillness `activityType` asks for.
    public var pausesWhenStationary = false
    public var activityType: ActivityType = .other

    /// The options the location filter of an approximate subscription runs with: at most one
    /// fix per `approximateInterval`, and no accuracy gate (approximate fixes are ~2 km).
    public var effectiveForFilter: SubscriptionOptions {
        guard accuracy == .approximate else { return self }
        var o = self
        o.desiredAccuracy = nil
        o.minimumInterval = Swift.max(minimumInterval, Self.approximateInterval)
        return o
    }

    /// One approximate fix per 10 minutes (Android's rule for coarse clients).
    public static let approximateInterval = 600.0

    public init(distanceFilter: Double = 0, desiredAccuracy: Double? = nil, minimumInterval: Double = 0) {
        self.distanceFilter = distanceFilter
        self.desiredAccuracy = desiredAccuracy
        self.minimumInterval = minimumInterval
    }

    public init(distanceFilter: Double = 0, desiredAccuracy: Double? = nil, minimumInterval: Double = 0,
                events: EventKinds) {
        self.init(distanceFilter: distanceFilter, desiredAccuracy: desiredAccuracy, minimumInterval: minimumInterval)
        self.events = events
    }

    public static let limits = (distanceFilter: 0.0...1_000_000.0,
                                desiredAccuracy: 0.0...1_000_000.0,
                                minimumInterval: 0.0...86_400.0)
}

/// The accuracy gate: one rule, documented in docs/semantics.md ("Accuracy gate").
public struct AccuracyGate: Hashable, Sendable {
    public var desiredAccuracy: Double?

    @inlinable public init(desiredAccuracy: Double?) { self.desiredAccuracy = desiredAccuracy }

    @inlinable public func admits(_ fix: Fix) -> Bool {
        guard let desired = desiredAccuracy else { return true }
        guard let accuracy = fix.horizontalAccuracy else { return false }
        return accuracy <= desired
    }
}

/// The distance filter, measured from the last *delivered* fix (docs/semantics.md,
/// "Distance filter"): measuring from the last seen fix instead would let a slow creep at
/// 1 Hz never reach the threshold.
public struct DistanceFilter: Hashable, Sendable {
    public var threshold: Double

    @inlinable public init(threshold: Double) { self.threshold = threshold }

    @inlinable public func admits(_ fix: Fix, lastDelivered: Fix?) -> Bool {
        guard threshold > 0, let last = lastDelivered else { return true }
        // Between deliveries most fixes are far inside the threshold: no trigonometry for them.
        if Geodesy.isCertainlyCloser(last.coordinate, fix.coordinate, than: threshold) { return false }
        return Geodesy.distance(last.coordinate, fix.coordinate) >= threshold
    }

    /// The same rule, given both fixes' `Geodesy.unitVector`s: decided from their chord where
    /// its bounds settle it (`Geodesy.distanceBounds`), which is nearly always.
    /// The last delivered fix is given by its position alone (no copy of the whole fix).
    @inlinable public func admits(_ fix: Fix, unit: SIMD3<Double>, lastDelivered: Coordinate?, lastUnit: SIMD3<Double>) -> Bool {
        guard threshold > 0, let last = lastDelivered else { return true }
        let bounds = Geodesy.distanceBounds(lastUnit, unit)
        if bounds.high < threshold { return false }
        if bounds.low >= threshold { return true }
        return Geodesy.distance(last, fix.coordinate) >= threshold
    }
}

/// The minimum interval between delivered fixes, in fix (GPS) time (docs/semantics.md,
/// "Minimum interval"). A fix timed `Timestamp.clockJumpBack` or more *before* the last
/// delivered one means the receiver's clock jumped back; it passes, so a backwards jump cannot
/// silence a subscriber. One timed less than that before it is out of order (two receivers
/// behind one gpsd) and never passes: passing, it would restart the interval from an earlier
/// time and show the subscriber time going backwards. A fix with the *same* time as the last
/// delivered one is of the same epoch (a second receiver's, or a piece gpsd sent after the
/// source passed its epoch on) and never passes: one epoch, one event.
public struct IntervalFilter: Hashable, Sendable {
    public var minimumInterval: Double

    @inlinable public init(minimumInterval: Double) { self.minimumInterval = minimumInterval }

    @inlinable public func admits(_ fix: Fix, lastDelivered: Fix?) -> Bool {
        admits(fix, lastDeliveredAt: lastDelivered?.time)
    }

    /// The same, given the last delivered fix's time.
    @inlinable public func admits(_ fix: Fix, lastDeliveredAt last: Timestamp?) -> Bool {
        guard let last else { return true }
        switch fix.time.order(after: last) {
        case .later: return fix.time - last >= minimumInterval
        case .sameEpoch, .outOfOrder: return false
        case .jumpedBack: return true
        }
    }
}

/// One subscription's location pipeline: accuracy gate → interval → distance filter
/// (docs/semantics.md, "Location pipeline").
/// Holds the last delivered fix, the reference for both distance and interval.
public struct LocationFilter: Hashable, Sendable {
    public private(set) var options: SubscriptionOptions
    public private(set) var lastDelivered: Fix?
    /// `lastDelivered`'s `Geodesy.unitVector` (zero while there is none).
    @usableFromInline var lastDeliveredUnit = SIMD3<Double>()
    @usableFromInline var gate: AccuracyGate
    @usableFromInline var distance: DistanceFilter
    @usableFromInline var interval: IntervalFilter

    public init(options: SubscriptionOptions) {
        self.options = options
        self.lastDelivered = nil
        self.gate = AccuracyGate(desiredAccuracy: options.desiredAccuracy)
        self.distance = DistanceFilter(threshold: options.distanceFilter)
        self.interval = IntervalFilter(minimumInterval: options.minimumInterval)
    }

    /// Offers a fix; returns whether it is to be delivered (and then remembers it).
    public mutating func offer(_ fix: Fix) -> Bool {
        guard gate.admits(fix),
              interval.admits(fix, lastDelivered: lastDelivered),
              distance.admits(fix, lastDelivered: lastDelivered) else { return false }
        lastDelivered = fix
        lastDeliveredUnit = Geodesy.unitVector(fix.coordinate)
        return true
    }

    /// The same, with the fix's `Geodesy.unitVector`, computed once per fix by the caller for
    /// every subscription: the distance filter then needs no trigonometry for nearly all fixes.
    public mutating func offer(_ fix: Fix, unit: SIMD3<Double>) -> Bool {
        guard gate.admits(fix) else { return false }
        // Both filters pass anything when nothing was delivered yet: the optional is tested
        // once for the two (each test is a call, per subscription and fix).
        if let last = lastDelivered {
            guard interval.admits(fix, lastDeliveredAt: last.time),
                  distance.admits(fix, unit: unit, lastDelivered: last.coordinate, lastUnit: lastDeliveredUnit)
            else { return false }
        }
        lastDelivered = fix
        lastDeliveredUnit = unit
        return true
    }
}
