/// A circular region (geofence) registered by a program. Rules: docs/regions.md.
public struct Region: Hashable, Sendable {
    /// Unique per program; 1…256 bytes of UTF-8, without U+0000.
    public var id: String
    public var center: Coordinate
    /// Metres, `Region.radiusLimits`.
    public var radius: Double
    public var notifyOnEntry: Bool
    public var notifyOnExit: Bool
    /// Report the first state decided after registration as an `inside`/`outside` event.
    public var notifyInitialState: Bool
    /// Seconds inside (of fix time) after which a `dwell` event is sent; `nil` = none.
    public var dwell: Double?
    /// Opaque JSON text the program attached (echoed by list/export, never interpreted).
    public var metadata: String?

    public init(id: String, center: Coordinate, radius: Double, notifyOnEntry: Bool = true,
                notifyOnExit: Bool = true, notifyInitialState: Bool = false, dwell: Double? = nil,
                metadata: String? = nil) {
        self.id = id; self.center = center; self.radius = radius
        self.notifyOnEntry = notifyOnEntry; self.notifyOnExit = notifyOnExit
        self.notifyInitialState = notifyInitialState; self.dwell = dwell; self.metadata = metadata
    }

    /// 10 m (below that GNSS cannot tell inside from outside) to 100 km.
    public static let radiusLimits = 10.0...100_000.0
    public static let dwellLimits = 0.0...604_800.0
    public static let maxIDBytes = 256
    public static let maxMetadataBytes = 4096

    /// Why the region cannot be registered, or `nil`.
    public var invalidReason: String? {
        if id.utf8.isEmpty || id.utf8.count > Region.maxIDBytes {
            return "region id must be 1…\(Region.maxIDBytes) bytes"
        }
        // The store keeps ids as C strings: "a\u0000b" would be saved as "a" (colliding with a
        // region "a", or an empty id that fails the program's next start).
        if id.utf8.contains(0) { return "region id must not contain U+0000 (NUL)" }
        if !center.latitude.isFinite || abs(center.latitude) > 90 {
            return "region \(id): latitude \(numberText(center.latitude)) is out of range; expected -90…90 degrees"
        }
        if !center.longitude.isFinite || abs(center.longitude) > 180 {
            return "region \(id): longitude \(numberText(center.longitude)) is out of range; expected -180…180 degrees"
        }
        if !radius.isFinite || !Region.radiusLimits.contains(radius) {
            return "region \(id): radius \(numberText(radius)) is out of range; expected 10…100000 metres"
        }
        if let d = dwell, !d.isFinite || !Region.dwellLimits.contains(d) {
            return "region \(id): dwell \(numberText(d)) is out of range; expected 0…604800 seconds"
        }
        if let m = metadata, m.utf8.count > Region.maxMetadataBytes {
            return "region \(id): metadata is longer than \(Region.maxMetadataBytes) bytes"
        }
        return nil
    }
}

/// What the monitor believes about the device and one region.
public enum RegionState: String, Hashable, Sendable, CaseIterable {
    case unknown, inside, outside
}

/// The kind of a region event. `inside`/`outside` report the initial state (only when the
/// region asked for it); the others are transitions.
public enum RegionEventKind: String, Hashable, Sendable, CaseIterable {
    case enter, exit, dwell, inside, outside
}

/// One region event for one program.
public struct RegionEvent: Hashable, Sendable {
    public var region: String
    public var kind: RegionEventKind
    /// Fix time of the fix that decided it, or the interpolated time of an inferred crossing.
    public var time: Timestamp
    public var coordinate: Coordinate
    /// Inferred from the straight segment between two fixes, not observed.
    public var inferred: Bool

    public init(region: String, kind: RegionEventKind, time: Timestamp, coordinate: Coordinate, inferred: Bool = false) {
        self.region = region; self.kind = kind; self.time = time; self.coordinate = coordinate; self.inferred = inferred
    }
}

/// The transition rules (docs/regions.md, "Hysteresis"), kept in one place.
public enum RegionRules {
    /// Enter: the fix is at least `enterFactor × accuracy` inside the boundary.
    public static let enterFactor = 0.75
    /// Exit: the fix is at least `max(exitFactor × accuracy, exitFloor)` outside the boundary.
    public static let exitFactor = 0.75
    public static let exitFloor = 20.0
    /// A transition needs this many consecutive deciding fixes of the other side …
    public static let confirmingFixes = 3
    /// … or two that are at least this many seconds apart …
    public static let confirmingPairSpan = 30.0
    /// … or a single one that comes more than this many seconds after the previous fix.
    public static let singleFixGap = 120.0
    /// A crossing is inferred only across gaps of at most this many seconds …
    public static let maxInferenceGap = 120.0
    /// … and implied speeds of at most this many m/s (250 km/h).
    public static let maxInferenceSpeed = 70.0

    /// Whether `evidence` consecutive deciding fixes of the other side, the first `span`
    /// seconds before the last, which came `gap` seconds after the fix before it (`nil`: no
    /// fix before it), make a transition (docs/regions.md, "Hysteresis"). Each clause bounds
    /// the false transitions an hour on a boundary whatever the fix rate: fewer fixes an hour
    /// allow fewer fixes per confirmation.
    @inlinable public static func confirms(evidence: Int, span: Double, gap: Double?) -> Bool {
        if evidence >= confirmingFixes { return true }
        if evidence >= 2 && span >= confirmingPairSpan { return true }
        guard let gap else { return true }
        return gap > singleFixGap
    }

    /// Whether a fix of accuracy `a` can decide either side of any region: one of unknown
    /// accuracy decides nothing.
    @inlinable public static func canDecide(accuracy a: Double?) -> Bool {
        guard let a else { return false }
        return a.isFinite && a >= 0
    }

    /// Whether `fix` (distance `d` from the centre) decides "inside" for a region of radius `r`.
    @inlinable public static func decidesInside(distance d: Double, radius r: Double, accuracy a: Double?) -> Bool {
        guard canDecide(accuracy: a), let a else { return false }
        return d <= insideLimit(radius: r, accuracy: a)
    }

    @inlinable public static func decidesOutside(distance d: Double, radius r: Double, accuracy a: Double?) -> Bool {
        guard canDecide(accuracy: a), let a else { return false }
        return d >= outsideLimit(radius: r, accuracy: a)
    }

    /// The distance at or below which a fix of accuracy `a` (one that `canDecide`) decides inside.
    @inlinable public static func insideLimit(radius r: Double, accuracy a: Double) -> Double { r - enterFactor * a }

    /// The distance at or beyond which a fix of accuracy `a` (one that `canDecide`) decides outside.
    @inlinable public static func outsideLimit(radius r: Double, accuracy a: Double) -> Double {
        r + Swift.max(exitFactor * a, exitFloor)
    }
}
