import LocationCore
import LocationProtocol
#if canImport(Glibc)
import Glibc
#endif

/// A scenario: where a device goes and how its receiver behaves (docs/visits.md, "Scenario
/// format"). Parsed from JSON with our own parser; unknown fields are errors so typos show.
public struct Scenario: Sendable {
    /// How the receiver's fixes deviate from the truth, and when they are lost.
    public struct Noise: Sendable, Equatable {
        /// White noise per axis, metres (1 σ).
        public var sigma: Double = 3
        /// Multipath: a slowly wandering offset per axis (first-order Gauss–Markov), 1 σ metres…
        public var multipathSigma: Double = 0
        /// …with this correlation time, seconds.
        public var multipathSeconds: Double = 60
        /// Probability per fix of a wild fix…
        public var outlierRate: Double = 0
        /// …displaced by about this many metres (uniform 0.5–1.5 ×), in a random direction.
        public var outlierDistance: Double = 300
        /// Long-run fraction of epochs without a fix…
        public var lossFraction: Double = 0
        /// …in bursts of this mean length, seconds.
        public var lossBurstSeconds: Double = 30
        public init() {}
    }

    public enum Mode: String, Sendable { case walk, cycle, drive }

    public enum Leg: Sendable {
        /// Stay at the current place. `indoors` uses the indoor noise model.
        case stay(seconds: Double, indoors: Bool, place: String?)
        /// Move in a straight line to a point at a speed (m/s); `signalLost` writes no-fix epochs throughout.
        case move(mode: Mode, to: Target, speed: Double, signalLost: Bool)
    }

    public enum Target: Sendable {
        case coordinate(Coordinate)
        /// Metres north and east of the current position.
        case offset(north: Double, east: Double)
    }

    public var name: String
    public var description: String
    public var start: Timestamp
    public var origin: Coordinate
    /// Seconds between epochs.
    public var sampleInterval: Double = 1
    public var seed: UInt64 = 1
    /// Stays at least this long are the true visits, seconds.
    public var minimumVisit: Double = 300
    public var outdoor = Noise()
    public var indoor = Noise()
    public var legs: [Leg] = []

    public struct ParseError: Error, CustomStringConvertible, Sendable {
        public var description: String
        init(_ d: String) { description = d }
    }

    public static func parse(_ text: String) throws(ParseError) -> Scenario {
        let value: JSONValue
        do { value = try JSONParser(maxDepth: 16, maxBytes: 1 << 24).parse(text) } catch {
            throw ParseError("scenario is not valid JSON: \(error)")
        }
        guard case .object(let o) = value else { throw ParseError("a scenario is a JSON object") }
        try known(o, ["name", "description", "start", "origin", "sampleInterval", "seed", "minimumVisit",
                      "outdoor", "indoor", "legs"], in: "scenario")
        guard let startText = try string(o, "start"), let start = ISO8601.parse(startText) else {
            throw ParseError("scenario: start must be an ISO 8601 time")
        }
        guard let originValue = o["origin"], let origin = try coordinate(originValue, "origin") else {
            throw ParseError("scenario: origin {latitude, longitude} is required")
        }
        var s = Scenario(name: try string(o, "name") ?? "scenario", description: try string(o, "description") ?? "",
                         start: start, origin: origin)
        if let v = try number(o, "sampleInterval") {
            guard v > 0 && v <= 3600 else { throw ParseError("sampleInterval must be in (0, 3600] seconds") }
            s.sampleInterval = v
        }
        if let v = try number(o, "seed") {
            // JSON numbers are read as doubles: integers are exact up to 2^53.
            guard v <= 9_007_199_254_740_992, let seed = UInt64(exactly: v) else {
                throw ParseError("seed must be an integer 0…9007199254740992")
            }
            s.seed = seed
        }
        if let v = try number(o, "minimumVisit") { s.minimumVisit = v }
        if let n = o["outdoor"] { s.outdoor = try noise(n, base: Noise(), "outdoor") }
        s.indoor = s.outdoor
        if let n = o["indoor"] { s.indoor = try noise(n, base: s.outdoor, "indoor") }
        guard case .array(let legs)? = o["legs"], !legs.isEmpty else { throw ParseError("scenario: legs must be a non-empty array") }
        for (i, l) in legs.enumerated() { s.legs.append(try leg(l, "legs[\(i)]")) }
        try s.checkSize()
        return s
    }

    /// The most epochs a scenario may make (116 days at one a second): what `simulate` writes
    /// is held in memory.
    public static let maximumEpochs = 10_000_000.0

    /// Where a move to `target` starting at `p` ends.
    static func destination(_ target: Target, from p: Coordinate) -> Coordinate {
        switch target {
        case .coordinate(let c): return c
        case .offset(let north, let east):
            let mPerDegLat = Geodesy.earthRadius * Double.pi / 180
            return Coordinate(latitude: p.latitude + north / mPerDegLat,
                              longitude: p.longitude + east / (mPerDegLat * cos(Geodesy.radians(p.latitude))))
        }
    }

    /// The largest `sigma`, `multipathSigma` and `outlierDistance`, metres: far beyond any
    /// receiver's error, and small enough that a noisy fix stays a position on the globe.
    public static let maximumNoiseMetres = 100_000.0

    /// Epochs a stay of `seconds` makes (at least one).
    static func stayEpochs(_ seconds: Double, _ dt: Double) -> Double { max(1, (seconds / dt).rounded()) }

    /// Epochs a move from `a` to `b` at `speed` makes (at least one).
    static func moveEpochs(_ a: Coordinate, _ b: Coordinate, speed: Double, _ dt: Double) -> Double {
        max(1, (Geodesy.distance(a, b) / speed / dt).rounded())
    }

    /// Walks the legs without noise: every move ends on the globe, and the whole scenario makes
    /// at most `maximumEpochs`.
    func checkSize() throws(ParseError) {
        var position = origin, epochs = 0.0
        for (i, leg) in legs.enumerated() {
            switch leg {
            case .stay(let seconds, _, _):
                epochs += Self.stayEpochs(seconds, sampleInterval)
            case .move(_, let target, let speed, _):
                let to = Self.destination(target, from: position)
                guard to.isValid else {
                    throw ParseError("legs[\(i)] ends at latitude \(to.latitude), longitude \(to.longitude), off the globe: choose a nearer target")
                }
                epochs += Self.moveEpochs(position, to, speed: speed, sampleInterval)
                position = to
            }
            guard epochs <= Self.maximumEpochs else {
                throw ParseError("legs[\(i)]: the scenario makes more than \(Int(Self.maximumEpochs)) epochs by then; shorten it or raise sampleInterval")
            }
        }
    }

    static func known(_ o: [String: JSONValue], _ keys: Set<String>, in what: String) throws(ParseError) {
        for k in o.keys where !keys.contains(k) {
            throw ParseError("\(what): unknown field \(JSONWriter.quoted(k)); expected one of \(keys.sorted().joined(separator: ", "))")
        }
    }

    static func number(_ o: [String: JSONValue], _ key: String) throws(ParseError) -> Double? {
        switch o[key] {
        case nil, .null?: return nil
        case .number(let n)?:
            guard n.isFinite else { throw ParseError("\(key) must be a finite number") }
            return n
        default: throw ParseError("\(key) must be a number")
        }
    }

    static func string(_ o: [String: JSONValue], _ key: String) throws(ParseError) -> String? {
        switch o[key] {
        case nil, .null?: return nil
        case .string(let s)?: return s
        default: throw ParseError("\(key) must be a string")
        }
    }

    static func coordinate(_ v: JSONValue, _ what: String) throws(ParseError) -> Coordinate? {
        guard case .object(let o) = v else { throw ParseError("\(what) must be an object") }
        guard let lat = try number(o, "latitude"), let lon = try number(o, "longitude") else { return nil }
        let c = Coordinate(latitude: lat, longitude: lon)
        guard c.isValid else { throw ParseError("\(what) is not a valid position") }
        return c
    }

    static func noise(_ v: JSONValue, base: Noise, _ what: String) throws(ParseError) -> Noise {
        guard case .object(let o) = v else { throw ParseError("\(what) must be an object") }
        try known(o, ["sigma", "multipathSigma", "multipathSeconds", "outlierRate", "outlierDistance",
                      "lossFraction", "lossBurstSeconds"], in: what)
        var n = base
        // Distances beyond `maximumNoiseMetres` are no receiver's error, and 1e300 overflowed
        // the position into latitudes the NMEA writer could not write.
        func metres(_ key: String) throws(ParseError) -> Double? {
            guard let x = try number(o, key) else { return nil }
            guard x >= 0 && x <= maximumNoiseMetres else {
                throw ParseError("\(what).\(key) \(JSONWriter.numberText(x)) is out of range; expected 0…\(JSONWriter.numberText(maximumNoiseMetres)) metres")
            }
            return x
        }
        if let x = try metres("sigma") { n.sigma = x }
        if let x = try metres("multipathSigma") { n.multipathSigma = x }
        if let x = try number(o, "multipathSeconds") { n.multipathSeconds = max(1, x) }
        if let x = try number(o, "outlierRate") {
            guard x >= 0 && x <= 1 else {
                throw ParseError("\(what).outlierRate \(JSONWriter.numberText(x)) is out of range; expected a probability 0…1")
            }
            n.outlierRate = x
        }
        if let x = try metres("outlierDistance") { n.outlierDistance = x }
        if let x = try number(o, "lossFraction") {
            guard x >= 0 && x < 1 else { throw ParseError("\(what).lossFraction must be in [0, 1)") }
            n.lossFraction = x
        }
        if let x = try number(o, "lossBurstSeconds") { n.lossBurstSeconds = max(1, x) }
        return n
    }

    static func leg(_ v: JSONValue, _ what: String) throws(ParseError) -> Leg {
        guard case .object(let o) = v else { throw ParseError("\(what) must be an object") }
        if let seconds = try number(o, "stay") {
            try known(o, ["stay", "indoors", "place"], in: what)
            guard seconds > 0 else { throw ParseError("\(what).stay must be positive seconds") }
            var indoors = false
            if case .bool(let b)? = o["indoors"] { indoors = b }
            return .stay(seconds: seconds, indoors: indoors, place: try string(o, "place"))
        }
        try known(o, ["walk", "cycle", "drive", "speed", "signal"], in: what)
        for (key, mode, speed) in [("walk", Mode.walk, 1.4), ("cycle", .cycle, 5), ("drive", .drive, 12)] {
            guard let t = o[key] else { continue }
            guard case .object(let to) = t else { throw ParseError("\(what).\(key) must be an object") }
            let target: Target
            if let c = try coordinate(t, "\(what).\(key)") {
                target = .coordinate(c)
            } else {
                target = .offset(north: try number(to, "north") ?? 0, east: try number(to, "east") ?? 0)
            }
            let v = try number(o, "speed") ?? speed
            guard v > 0 else { throw ParseError("\(what).speed must be positive") }
            let lost: Bool
            switch try string(o, "signal") {
            case nil, "ok"?: lost = false
            case "lost"?: lost = true
            case let other?: throw ParseError("\(what).signal \(JSONWriter.quoted(other)) must be ok or lost")
            }
            return .move(mode: mode, to: target, speed: v, signalLost: lost)
        }
        throw ParseError("\(what) must have stay, walk, cycle or drive")
    }
}
