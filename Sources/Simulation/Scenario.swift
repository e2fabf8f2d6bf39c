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
        /// …displaced by about this many metres (uniform 0.5–1.5 ×), in a random direction…
        public var outlierDistance: Double = 300
        /// …for 1…this many epochs in a row (uniform), the same displacement (a multipath spike).
        public var outlierEpochs = 1
        /// Long-run fraction of epochs without a fix…
        public var lossFraction: Double = 0
        /// …in bursts of this mean length, seconds.
        public var lossBurstSeconds: Double = 30
        /// The first fixes after a loss are off by this many metres in a random direction (a
        /// receiver re-acquiring with a poor solution)…
        public var reacquisitionDistance: Double = 0
        /// …shrinking linearly to nothing over this long, seconds.
        public var reacquisitionSeconds: Double = 20
        public init() {}
    }

    public enum Mode: String, Sendable { case walk, cycle, drive }

    public enum Leg: Sendable {
        /// Stay at the current place. `indoors` uses the indoor noise model.
        case stay(seconds: Double, indoors: Bool, place: String?)
        /// Move along the great circle to a point at a speed (m/s); `signalLost` writes no-fix epochs throughout.
        case move(mode: Mode, to: Target, speed: Double, signalLost: Bool)
    }

    public enum Target: Sendable {
        case coordinate(Coordinate)
        /// Metres north and east of the current position, along the great circle (`offset`).
        case offset(north: Double, east: Double)
    }

    public var name: String
    public var description: String
    public var start: Timestamp
    public var origin: Coordinate
    /// Seconds between epochs.
    public var sampleInterval: Double = 1
    /// What the receiver writes: a GNSS receiver's epochs (speed, course, accuracy), or only
    /// time and position, as a GPX track or a phone's log converted to NMEA.
    public enum Receiver: String, Sendable { case gnss, positions }
    public var receiver: Receiver = .gnss
    public var seed: UInt64 = 1
    /// Stays at least this long are the true visits, seconds.
    public var minimumVisit: Double = 300
    public var outdoor = Noise()
    public var indoor = Noise()
    public var legs: [Leg] = []

    public struct ParseError: Error, CustomStringConvertible, Sendable {
        public var description: String
        /// Where in the file, when the JSON itself is wrong (the parser's byte offset as an
        /// editor counts it, `JSONError.position`); nil for a value that is.
        public var position: (line: Int, column: Int)?
        init(_ d: String, at position: (line: Int, column: Int)? = nil) { description = d; self.position = position }

        /// `FILE:LINE:COLUMN: problem`, or `FILE: problem` without a position.
        public func described(file: String) -> String {
            position.map { "\(file):\($0.line):\($0.column): \(description)" } ?? "\(file): \(description)"
        }
    }

    public static func parse(_ text: String) throws(ParseError) -> Scenario {
        let value: JSONValue
        do { value = try JSONParser(maxDepth: 16, maxBytes: 1 << 24).parse(text) } catch {
            throw ParseError("not JSON: \(error.reason)", at: error.position(in: text.utf8))
        }
        guard case .object(let o) = value else { throw ParseError("a scenario is a JSON object") }
        try known(o, ["name", "description", "start", "origin", "sampleInterval", "receiver", "seed", "minimumVisit",
                      "outdoor", "indoor", "legs"], in: "scenario")
        guard let startText = try string(o, "start", in: "") else {
            throw ParseError("start is required: the ISO 8601 time of the first epoch, such as 2026-03-10T07:00:00Z")
        }
        guard let start = ISO8601.parse(startText) else {
            throw ParseError("start \(JSONWriter.quoted(startText)) \(timeProblem(startText))")
        }
        guard let originValue = o["origin"], let origin = try coordinate(originValue, "origin") else {
            throw ParseError("origin {latitude, longitude} is required")
        }
        var s = Scenario(name: try string(o, "name", in: "") ?? "scenario",
                         description: try string(o, "description", in: "") ?? "", start: start, origin: origin)
        if let v = try number(o, "sampleInterval", in: "") {
            guard v > 0 && v <= 3600 else {
                throw ParseError("sampleInterval \(JSONWriter.numberText(v)) is out of range; expected more than 0 and at most 3600 seconds")
            }
            s.sampleInterval = v
        }
        if let v = try string(o, "receiver", in: "") {
            guard let r = Receiver(rawValue: v) else {
                throw ParseError("receiver \(JSONWriter.quoted(v)) must be \"gnss\" or \"positions\"")
            }
            s.receiver = r
        }
        if let v = try number(o, "seed", in: "") {
            // JSON numbers are read as doubles: integers are exact up to 2^53.
            guard v <= 9_007_199_254_740_992, let seed = UInt64(exactly: v) else {
                throw ParseError("seed must be an integer 0…9007199254740992, not \(JSONWriter.numberText(v))")
            }
            s.seed = seed
        }
        if let v = try number(o, "minimumVisit", in: "") {
            // Longer than any stay (1e300) would make no true visit at all, silently.
            guard v >= 0 && v <= maximumVisitSeconds else {
                throw ParseError("minimumVisit \(JSONWriter.numberText(v)) is out of range; expected 0…\(JSONWriter.numberText(maximumVisitSeconds)) seconds")
            }
            s.minimumVisit = v
        }
        if let n = o["outdoor"] { s.outdoor = try noise(n, base: Noise(), "outdoor") }
        s.indoor = s.outdoor
        if let n = o["indoor"] { s.indoor = try noise(n, base: s.outdoor, "indoor") }
        guard case .array(let legs)? = o["legs"], !legs.isEmpty else { throw ParseError("legs must be a non-empty array") }
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
        case .offset(let north, let east): return offset(p, north: north, east: east)
        }
    }

    /// The point `north` and `east` metres from `p`: that far along the great circle in that
    /// direction. (Degrees scaled by cos(latitude) would go past ±180 and divide by zero at a
    /// pole.)
    public static func offset(_ p: Coordinate, north: Double, east: Double) -> Coordinate {
        let d = (north * north + east * east).squareRoot() / Geodesy.earthRadius
        guard d > 0 else { return p }
        let theta = atan2(east, north)
        let phi1 = Geodesy.radians(p.latitude), lambda1 = Geodesy.radians(p.longitude)
        let sinPhi2 = min(1, max(-1, sin(phi1) * cos(d) + cos(phi1) * sin(d) * cos(theta)))
        let lambda2 = lambda1 + atan2(sin(theta) * sin(d) * cos(phi1), cos(d) - sin(phi1) * sinPhi2)
        return Coordinate(latitude: asin(sinPhi2) * 180 / Double.pi, longitude: remainder(lambda2 * 180 / Double.pi, 360))
    }

    /// The point a fraction `t` of the way from `a` to `b` along the great circle, at an even pace:
    /// across ±180 the short way (not round the globe, as linear longitude would) and over a pole.
    public static func along(_ a: Coordinate, _ b: Coordinate, _ t: Double) -> Coordinate {
        let u = Geodesy.unitVector(a), v = Geodesy.unitVector(b)
        let omega = acos(min(1, max(-1, (u * v).sum())))
        guard omega > 1e-12 else { return t < 0.5 ? a : b }
        let p = u * (sin((1 - t) * omega) / sin(omega)) + v * (sin(t * omega) / sin(omega))
        let horizontal = (p.x * p.x + p.y * p.y).squareRoot()
        return Coordinate(latitude: atan2(p.z, horizontal) * 180 / Double.pi,
                          longitude: horizontal > 0 ? atan2(p.y, p.x) * 180 / Double.pi : a.longitude)
    }

    /// The farthest a move may go, metres: short of the antipode, where no one great circle
    /// joins the ends and `along` would divide by sin(π).
    static let maximumMove = Geodesy.earthRadius * Double.pi - 1000

    /// The largest `sigma`, `multipathSigma` and `outlierDistance`, metres: far beyond any
    /// receiver's error, and small enough that a noisy fix stays a position on the globe.
    public static let maximumNoiseMetres = 100_000.0

    /// The longest `minimumVisit`, seconds: a week, as a region's `dwell` and `evaluate --dwell`.
    public static let maximumVisitSeconds = 604_800.0

    /// The longest `multipathSeconds` and `lossBurstSeconds`: a day. Far longer, the model
    /// stood still without a word: a correlation time of 1e17 s froze the multipath offset at
    /// 0 (whatever multipathSigma), a burst of 1e300 s never began (whatever lossFraction).
    public static let maximumNoiseSeconds = 86_400.0

    /// Epochs a stay of `seconds` makes (at least one).
    static func stayEpochs(_ seconds: Double, _ dt: Double) -> Double { max(1, (seconds / dt).rounded()) }

    /// Epochs a move from `a` to `b` at `speed` makes (at least one).
    static func moveEpochs(_ a: Coordinate, _ b: Coordinate, speed: Double, _ dt: Double) -> Double {
        max(1, (Geodesy.distance(a, b) / speed / dt).rounded())
    }

    /// Walks the legs without noise: no move ends near its antipode, and the whole scenario makes
    /// at most `maximumEpochs`.
    func checkSize() throws(ParseError) {
        var position = origin, epochs = 0.0
        for (i, leg) in legs.enumerated() {
            switch leg {
            case .stay(let seconds, _, _):
                epochs += Self.stayEpochs(seconds, sampleInterval)
            case .move(_, let target, let speed, _):
                let to = Self.destination(target, from: position)
                guard Geodesy.distance(position, to) <= Self.maximumMove else {
                    throw ParseError("legs[\(i)] ends within 1 km of the antipode of where it starts, where no one great circle leads: add a leg in between")
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
        // Sorted: a dictionary's order changes from run to run, and so would the message.
        for k in o.keys.sorted() where !keys.contains(k) {
            throw ParseError("\(what): unknown field \(JSONWriter.quoted(k)); expected one of \(keys.sorted().joined(separator: ", "))")
        }
    }

    /// The JSON path of `key` in the object at `what` ("legs[3].speed"; `what` is empty at the top).
    static func path(_ what: String, _ key: String) -> String { what.isEmpty ? key : "\(what).\(key)" }

    /// A value as a message shows it: scalars as written, containers by kind.
    static func shown(_ v: JSONValue) -> String {
        switch v {
        case .string(let s): JSONWriter.quoted(s)
        case .number(let n): JSONWriter.numberText(n)
        case .bool(let b): b ? "true" : "false"
        case .null, .array, .object: v.kindName
        }
    }

    static func number(_ o: [String: JSONValue], _ key: String, in what: String) throws(ParseError) -> Double? {
        switch o[key] {
        case nil, .null?: return nil
        case .number(let n)?:
            guard n.isFinite else { throw ParseError("\(path(what, key)) must be a finite number") }
            return n
        case let v?: throw ParseError("\(path(what, key)) must be a number, not \(shown(v))")
        }
    }

    static func string(_ o: [String: JSONValue], _ key: String, in what: String) throws(ParseError) -> String? {
        switch o[key] {
        case nil, .null?: return nil
        case .string(let s)?: return s
        case let v?: throw ParseError("\(path(what, key)) must be a string, not \(shown(v))")
        }
    }

    /// `nil` when latitude or longitude is missing.
    static func coordinate(_ v: JSONValue, _ what: String) throws(ParseError) -> Coordinate? {
        guard case .object(let o) = v else { throw ParseError("\(what) must be an object, not \(shown(v))") }
        guard let lat = try number(o, "latitude", in: what), let lon = try number(o, "longitude", in: what) else { return nil }
        let c = Coordinate(latitude: lat, longitude: lon)
        guard c.isValid else {
            throw ParseError("\(what) latitude \(JSONWriter.numberText(lat)), longitude \(JSONWriter.numberText(lon)) is off the globe; expected latitude −90…90 and longitude −180…180")
        }
        return c
    }

    /// Why ISO8601.parse refused `text`: a missing zone and a year beyond a `Timestamp` are the
    /// likely slips, which "must be an ISO 8601 time" would not name.
    static func timeProblem(_ text: String) -> String {
        let b = Array(text.utf8)
        let zoned = b.last == UInt8(ascii: "Z") || b.last == UInt8(ascii: "z")
            || (b.count >= 6 && (b[b.count - 6] == UInt8(ascii: "+") || b[b.count - 6] == UInt8(ascii: "-"))
                && b[b.count - 3] == UInt8(ascii: ":"))
        if b.count >= 19, !zoned {
            return "has no time zone; add Z for UTC or an offset such as +01:00"
        }
        if b.count >= 4, let year = Int(String(decoding: b[0..<4], as: UTF8.self)), !(1678...2261).contains(year) {
            return "is out of range; a time must be in the years 1678–2261"
        }
        return "is not an ISO 8601 time; expected YYYY-MM-DDTHH:MM:SS[.fraction] and Z or ±HH:MM, with a real calendar date"
    }

    static func noise(_ v: JSONValue, base: Noise, _ what: String) throws(ParseError) -> Noise {
        guard case .object(let o) = v else { throw ParseError("\(what) must be an object, not \(shown(v))") }
        try known(o, ["sigma", "multipathSigma", "multipathSeconds", "outlierRate", "outlierDistance",
                      "outlierEpochs", "lossFraction", "lossBurstSeconds", "reacquisitionDistance", "reacquisitionSeconds"], in: what)
        var n = base
        // Distances beyond `maximumNoiseMetres` are no receiver's error, and 1e300 overflowed
        // the position into latitudes the NMEA writer could not write.
        func metres(_ key: String) throws(ParseError) -> Double? {
            guard let x = try number(o, key, in: what) else { return nil }
            guard x >= 0 && x <= maximumNoiseMetres else {
                throw ParseError("\(what).\(key) \(JSONWriter.numberText(x)) is out of range; expected 0…\(JSONWriter.numberText(maximumNoiseMetres)) metres")
            }
            return x
        }
        if let x = try metres("sigma") { n.sigma = x }
        if let x = try metres("multipathSigma") { n.multipathSigma = x }
        // Below a second counts as one (the model divides by it).
        func seconds(_ key: String) throws(ParseError) -> Double? {
            guard let x = try number(o, key, in: what) else { return nil }
            guard x >= 0 && x <= maximumNoiseSeconds else {
                throw ParseError("\(what).\(key) \(JSONWriter.numberText(x)) is out of range; expected 0…\(JSONWriter.numberText(maximumNoiseSeconds)) seconds")
            }
            return max(1, x)
        }
        if let x = try seconds("multipathSeconds") { n.multipathSeconds = x }
        if let x = try number(o, "outlierRate", in: what) {
            guard x >= 0 && x <= 1 else {
                throw ParseError("\(what).outlierRate \(JSONWriter.numberText(x)) is out of range; expected a probability 0…1")
            }
            n.outlierRate = x
        }
        if let x = try metres("outlierDistance") { n.outlierDistance = x }
        if let x = try number(o, "outlierEpochs", in: what) {
            guard x >= 1 && x <= 60, x == x.rounded() else {
                throw ParseError("\(what).outlierEpochs \(JSONWriter.numberText(x)) is out of range; expected an integer 1…60")
            }
            n.outlierEpochs = Int(x)
        }
        if let x = try number(o, "lossFraction", in: what) {
            guard x >= 0 && x < 1 else {
                throw ParseError("\(what).lossFraction \(JSONWriter.numberText(x)) is out of range; expected at least 0 and less than 1")
            }
            n.lossFraction = x
        }
        if let x = try seconds("lossBurstSeconds") { n.lossBurstSeconds = x }
        if let x = try metres("reacquisitionDistance") { n.reacquisitionDistance = x }
        if let x = try seconds("reacquisitionSeconds") { n.reacquisitionSeconds = x }
        return n
    }

    static func leg(_ v: JSONValue, _ what: String) throws(ParseError) -> Leg {
        guard case .object(let o) = v else { throw ParseError("\(what) must be an object, not \(shown(v))") }
        // One kind per leg: with two, one would be silently dropped.
        let kinds = ["stay", "walk", "cycle", "drive"].filter { o[$0] != nil }
        guard kinds.count == 1 else {
            throw ParseError(kinds.isEmpty ? "\(what) must have one of stay, walk, cycle or drive"
                : "\(what) has \(kinds.joined(separator: " and ")); a leg is exactly one of stay, walk, cycle or drive: make each its own leg")
        }
        if kinds[0] == "stay" {
            try known(o, ["stay", "indoors", "place"], in: what)
            guard let seconds = try number(o, "stay", in: what), seconds > 0 else {
                throw ParseError("\(what).stay \(shown(o["stay"] ?? .null)) must be positive seconds")
            }
            let indoors: Bool
            switch o["indoors"] {
            case nil, .null?: indoors = false
            case .bool(let b)?: indoors = b
            case let other?: throw ParseError("\(what).indoors must be true or false, not \(shown(other))")
            }
            return .stay(seconds: seconds, indoors: indoors, place: try string(o, "place", in: what))
        }
        try known(o, ["walk", "cycle", "drive", "speed", "signal"], in: what)
        let key = kinds[0]
        let (mode, speed): (Mode, Double) = key == "walk" ? (.walk, 1.4) : key == "cycle" ? (.cycle, 5) : (.drive, 12)
        let target = try target(o[key] ?? .null, "\(what).\(key)")
        let v = try number(o, "speed", in: what) ?? speed
        guard v > 0 else { throw ParseError("\(what).speed \(JSONWriter.numberText(v)) must be positive metres per second") }
        let lost: Bool
        switch try string(o, "signal", in: what) {
        case nil, "ok"?: lost = false
        case "lost"?: lost = true
        case let other?: throw ParseError("\(what).signal \(JSONWriter.quoted(other)) must be ok or lost")
        }
        return .move(mode: mode, to: target, speed: v, signalLost: lost)
    }

    /// A move's target: a position or an offset, never both and never a part of one (a typo
    /// must not read as a move of zero metres).
    static func target(_ v: JSONValue, _ what: String) throws(ParseError) -> Target {
        guard case .object(let o) = v else { throw ParseError("\(what) must be an object, not \(shown(v))") }
        try known(o, ["latitude", "longitude", "north", "east"], in: what)
        let position = o["latitude"] != nil || o["longitude"] != nil
        let offset = o["north"] != nil || o["east"] != nil
        if position && offset {
            throw ParseError("\(what) has both latitude/longitude and north/east; give a position or an offset, not both")
        }
        if position {
            guard let c = try coordinate(v, what) else {
                let missing = try number(o, "latitude", in: what) == nil ? "latitude" : "longitude"
                throw ParseError("\(what).\(missing) is missing; a position needs both latitude and longitude")
            }
            return .coordinate(c)
        }
        guard offset else { throw ParseError("\(what) is empty; give {latitude, longitude} or {north, east} in metres") }
        let north = try number(o, "north", in: what) ?? 0, east = try number(o, "east", in: what) ?? 0
        // Farther would wrap round the globe: surely a slip of a few zeros.
        guard (north * north + east * east).squareRoot() <= maximumMove else {
            throw ParseError("\(what) north \(JSONWriter.numberText(north)), east \(JSONWriter.numberText(east)) goes more than halfway round the globe (\(JSONWriter.numberText((maximumMove / 1000).rounded())) km); choose a nearer target")
        }
        return .offset(north: north, east: east)
    }
}
