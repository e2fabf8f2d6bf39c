/// A position on the WGS 84 ellipsoid, in degrees.
public struct Coordinate: Hashable, Sendable {
    public var latitude: Double
    public var longitude: Double

    @inlinable public init(latitude: Double, longitude: Double) {
        self.latitude = latitude
        self.longitude = longitude
    }

    /// Whether the coordinate is a real position (finite, latitude in ±90, longitude in ±180).
    @inlinable public var isValid: Bool {
        latitude.isFinite && longitude.isFinite && abs(latitude) <= 90 && abs(longitude) <= 180
    }
}

/// The receiver's fix dimension.
public enum FixMode: UInt8, Sendable, Hashable {
    case twoD = 2
    case threeD = 3
}

/// One position solution from the receiver: what gpsd calls a TPV with a position, and what
/// one NMEA epoch (all sentences sharing a UTC time) assembles into.
///
/// Unknown values are `nil`, never NaN. `horizontalAccuracy` and `verticalAccuracy` are the
/// radius (resp. half-interval) in metres of the **95 % confidence** region — the level
/// gpsd's `eph`/`epv` are computed at — and every rule in the core reads them at that level
/// (see docs/semantics.md, "Accuracy").
public struct Fix: Hashable, Sendable {
    public var time: Timestamp
    public var coordinate: Coordinate
    public var mode: FixMode
    /// Height above the WGS 84 ellipsoid, metres.
    public var altitudeHAE: Double?
    /// Height above mean sea level (geoid), metres.
    public var altitudeMSL: Double?
    /// 95 % horizontal error radius, metres.
    public var horizontalAccuracy: Double?
    /// 95 % vertical error, metres.
    public var verticalAccuracy: Double?
    /// Speed over ground, m/s.
    public var speed: Double?
    /// Course over ground, degrees clockwise from true north, 0..<360.
    public var course: Double?

    @inlinable public init(
        time: Timestamp, coordinate: Coordinate, mode: FixMode = .twoD,
        altitudeHAE: Double? = nil, altitudeMSL: Double? = nil,
        horizontalAccuracy: Double? = nil, verticalAccuracy: Double? = nil,
        speed: Double? = nil, course: Double? = nil
    ) {
        self.time = time; self.coordinate = coordinate; self.mode = mode
        self.altitudeHAE = altitudeHAE; self.altitudeMSL = altitudeMSL
        self.horizontalAccuracy = horizontalAccuracy; self.verticalAccuracy = verticalAccuracy
        self.speed = speed; self.course = course
    }
}
