import LocationCore
import LocationProtocol
import NMEA
#if canImport(Glibc)
import Glibc
#endif

/// A true visit of a scenario: a stay of at least `minimumVisit` seconds.
public struct TrueVisit: Hashable, Sendable {
    public var place: String?
    public var arrival: Timestamp
    /// `nil` when the scenario ends during the stay.
    public var departure: Timestamp?
    public var coordinate: Coordinate
    public var indoors: Bool

    public init(place: String?, arrival: Timestamp, departure: Timestamp?, coordinate: Coordinate, indoors: Bool) {
        self.place = place; self.arrival = arrival; self.departure = departure
        self.coordinate = coordinate; self.indoors = indoors
    }

    /// One JSON line (with `\n`).
    public var line: String {
        var out: [UInt8] = []
        JSONWriter.appendASCII("{\"type\":\"visit\",\"place\":", to: &out)
        if let place { JSONWriter.appendString(place, to: &out) } else { JSONWriter.appendASCII("null", to: &out) }
        JSONWriter.appendASCII(",\"arrival\":", to: &out)
        EventEncoder.appendTime(arrival, to: &out)
        JSONWriter.appendASCII(",\"departure\":", to: &out)
        EventEncoder.appendTime(departure, to: &out)
        JSONWriter.appendASCII(",\"latitude\":", to: &out)
        DecimalFormat.appendFixed(coordinate.latitude, decimals: 9, to: &out)
        JSONWriter.appendASCII(",\"longitude\":", to: &out)
        DecimalFormat.appendFixed(coordinate.longitude, decimals: 9, to: &out)
        JSONWriter.appendASCII(indoors ? ",\"indoors\":true}\n" : ",\"indoors\":false}\n", to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// The visits of a truth file, one JSON object a line (`line`'s format). Every field is
    /// checked: an unreadable departure must not read as "still there", nor a string `indoors`
    /// as false. Errors give the line number, counting blank lines too.
    public static func parse(lines text: String) throws(Scenario.ParseError) -> [TrueVisit] {
        var visits: [TrueVisit] = []
        let parser = JSONParser(maxDepth: 4, maxBytes: 65_536)
        // Bytes, not Characters: "\r\n" is one Character and would not split at "\n".
        for (n, bytes) in text.utf8.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).enumerated() {
            var line = Array(bytes)
            if line.last == UInt8(ascii: "\r") { line.removeLast() }
            guard line.contains(where: { $0 != UInt8(ascii: " ") }) else { continue }
            let at = "truth line \(n + 1)"
            let value: JSONValue
            do { value = try parser.parse(line) } catch {
                throw Scenario.ParseError("not JSON: \(error.reason)", at: (n + 1, error.position(in: line).column))
            }
            guard case .object(let o) = value else {
                throw Scenario.ParseError("\(at) is not a JSON object; expected one visit a line, as simulate --truth writes them")
            }
            func time(_ key: String) throws(Scenario.ParseError) -> Timestamp? {
                switch o[key] {
                case nil, .null?: return nil
                case .string(let t)?:
                    guard let parsed = ISO8601.parse(t) else {
                        throw Scenario.ParseError("\(at): \(key) \(JSONWriter.quoted(t)) \(Scenario.timeProblem(t))")
                    }
                    return parsed
                case let v?: throw Scenario.ParseError("\(at): \(key) must be an ISO 8601 time or null, not \(Scenario.shown(v))")
                }
            }
            guard let arrival = try time("arrival") else {
                throw Scenario.ParseError("\(at): arrival is required, an ISO 8601 time")
            }
            let departure = try time("departure")
            guard case .number(let lat)? = o["latitude"], case .number(let lon)? = o["longitude"] else {
                throw Scenario.ParseError("\(at): latitude and longitude are required numbers")
            }
            let coordinate = Coordinate(latitude: lat, longitude: lon)
            guard coordinate.isValid else {
                throw Scenario.ParseError("\(at): latitude \(JSONWriter.numberText(lat)), longitude \(JSONWriter.numberText(lon)) is off the globe")
            }
            let place: String?
            switch o["place"] {
            case nil, .null?: place = nil
            case .string(let p)?: place = p
            case let v?: throw Scenario.ParseError("\(at): place must be a string or null, not \(Scenario.shown(v))")
            }
            let indoors: Bool
            switch o["indoors"] {
            case nil, .null?: indoors = false
            case .bool(let b)?: indoors = b
            case let v?: throw Scenario.ParseError("\(at): indoors must be true or false, not \(Scenario.shown(v))")
            }
            visits.append(TrueVisit(place: place, arrival: arrival, departure: departure, coordinate: coordinate, indoors: indoors))
        }
        return visits
    }
}

/// Turns a scenario into an NMEA log (RMC+GGA+GSA+GST per epoch, RMC/GGA/GSA with status V
/// while the fix is lost) and its ground truth. Deterministic for the scenario's seed.
public struct Simulator {
    public var scenario: Scenario
    public init(_ scenario: Scenario) { self.scenario = scenario }

    public struct Output {
        public var nmea: [UInt8]
        public var truth: [TrueVisit]
        /// Time of the last epoch.
        public var end: Timestamp
        /// Times of the fixes written displaced by an outlier (a spike's epochs), in order.
        public var outliers: [Timestamp] = []
        /// Times of the first fix written after each leg with `"signal":"lost"`: where a real
        /// jump (out of a tunnel) shows.
        public var jumps: [Timestamp] = []
    }

    /// The ground truth only (cheap: no noise, no NMEA).
    public var truth: [TrueVisit] { run(writeNMEA: false).truth }

    public func run(writeNMEA: Bool = true) -> Output {
        var rng = SplitMix64(seed: scenario.seed)
        let writer = NMEAWriter()
        var nmea: [UInt8] = []
        var truth: [TrueVisit] = []
        let dt = scenario.sampleInterval
        var position = scenario.origin
        var elapsed = 0.0          // seconds since start of the next epoch
        var mpNorth = 0.0, mpEast = 0.0
        var lost = false
        // Re-acquisition after a loss: the offset's direction and the time the fixes came back.
        var reacquired: (time: Double, north: Double, east: Double)?
        var wasLost = false
        // The current outlier run: epochs left, and its displacement.
        var spikeLeft = 0, spikeNorth = 0.0, spikeEast = 0.0
        var outliers: [Timestamp] = []
        var jumps: [Timestamp] = []
        var afterLostLeg = false

        func epoch(_ truthPosition: Coordinate, speed: Double, course: Double?, noise: Scenario.Noise, forcedLoss: Bool) {
            let time = scenario.start.adding(seconds: elapsed)
            elapsed += dt
            guard writeNMEA else { return }
            // Multipath: first-order Gauss–Markov offset, per axis.
            let a = exp(-dt / noise.multipathSeconds)
            let b = (1 - a * a).squareRoot() * noise.multipathSigma
            mpNorth = a * mpNorth + b * rng.gaussian()
            mpEast = a * mpEast + b * rng.gaussian()
            // Fix loss: a two-state Markov chain with the given long-run fraction and burst length.
            let exitP = min(1, dt / noise.lossBurstSeconds)
            let enterP = noise.lossFraction > 0 ? min(1, exitP * noise.lossFraction / (1 - noise.lossFraction)) : 0
            let u = Double(rng.next() >> 11) / Double(1 << 53)
            lost = lost ? u >= exitP : u < enterP
            let outlierDraw = Double(rng.next() >> 11) / Double(1 << 53)
            let gn = rng.gaussian(), ge = rng.gaussian(), galt = rng.gaussian(), gv = rng.gaussian()
            if lost || forcedLoss {
                wasLost = true
                // A track of positions has no point while the fix is lost.
                if scenario.receiver == .gnss { nmea.append(contentsOf: writer.noFixEpoch(at: time).utf8) }
                if forcedLoss { afterLostLeg = true }
                spikeLeft = max(0, spikeLeft - 1)
                return
            }
            if afterLostLeg { jumps.append(time); afterLostLeg = false }
            var dn = mpNorth + gn * noise.sigma, de = mpEast + ge * noise.sigma
            // Drawn only when the model has it, so scenarios without it keep their bytes.
            if wasLost && noise.reacquisitionDistance > 0 {
                let angle = Double(rng.next() >> 11) / Double(1 << 53) * 2 * Double.pi
                reacquired = (elapsed - dt, cos(angle), sin(angle))
            }
            wasLost = false
            if let r = reacquired {
                let left = 1 - (elapsed - dt - r.time) / noise.reacquisitionSeconds
                if left > 0 {
                    dn += noise.reacquisitionDistance * left * r.north
                    de += noise.reacquisitionDistance * left * r.east
                } else {
                    reacquired = nil
                }
            }
            if spikeLeft > 0 {
                spikeLeft -= 1
                dn += spikeNorth; de += spikeEast
                outliers.append(time)
            } else if outlierDraw < noise.outlierRate {
                let angle = Double(rng.next() >> 11) / Double(1 << 53) * 2 * Double.pi
                let r = noise.outlierDistance * (0.5 + Double(rng.next() >> 11) / Double(1 << 53))
                spikeNorth = r * cos(angle); spikeEast = r * sin(angle)
                dn += spikeNorth; de += spikeEast
                outliers.append(time)
                // Drawn only for runs: a scenario without them makes the same bytes as before.
                if noise.outlierEpochs > 1 { spikeLeft = Int(rng.next() % UInt64(noise.outlierEpochs)) }
            }
            let coordinate = Scenario.offset(truthPosition, north: dn, east: de)
            // The receiver's own error estimate knows its white noise and part of multipath,
            // never an outlier.
            let reported = (noise.sigma * noise.sigma + noise.multipathSigma * noise.multipathSigma / 4).squareRoot()
            var quality = NMEAWriter.Quality()
            quality.sigmaLatitude = reported; quality.sigmaLongitude = reported; quality.sigmaAltitude = reported * 1.5
            quality.geoidSeparation = 39.5
            quality.hdop = max(0.6, reported / 4)
            let fix = Fix(time: time, coordinate: coordinate, mode: .threeD, altitudeMSL: 34 + galt * reported,
                          speed: max(0, speed + gv * 0.2), course: course)
            switch scenario.receiver {
            case .gnss: nmea.append(contentsOf: writer.epoch(fix, quality: quality).utf8)
            case .positions: nmea.append(contentsOf: writer.positions(fix).utf8)
            }
        }

        for leg in scenario.legs {
            switch leg {
            case .stay(let seconds, let indoors, let place):
                let arrival = scenario.start.adding(seconds: elapsed)
                let n = Int(Scenario.stayEpochs(seconds, dt))
                for _ in 0..<n {
                    epoch(position, speed: 0, course: nil, noise: indoors ? scenario.indoor : scenario.outdoor, forcedLoss: false)
                }
                if seconds >= scenario.minimumVisit {
                    truth.append(TrueVisit(place: place, arrival: arrival, departure: scenario.start.adding(seconds: elapsed),
                                           coordinate: position, indoors: indoors))
                }
            case .move(_, let target, let speed, let signalLost):
                let to = Scenario.destination(target, from: position)
                let from = position
                let steps = Int(Scenario.moveEpochs(from, to, speed: speed, dt))
                var course = Self.bearing(from, to)
                for i in 1...steps {
                    let previous = position
                    position = Scenario.along(from, to, Double(i) / Double(steps))
                    // A great circle's heading changes on the way (over a pole, by 180°).
                    if Geodesy.distance(previous, position) > 0.01 { course = Self.bearing(previous, position) }
                    epoch(position, speed: speed, course: course, noise: scenario.outdoor, forcedLoss: signalLost)
                }
            }
        }
        // A stay that runs to the end of the scenario has no known departure.
        if case .stay? = scenario.legs.last, !truth.isEmpty,
           truth[truth.count - 1].departure == scenario.start.adding(seconds: elapsed) {
            truth[truth.count - 1].departure = nil
        }
        return Output(nmea: nmea, truth: truth, end: scenario.start.adding(seconds: elapsed - dt),
                      outliers: outliers, jumps: jumps)
    }

    static func bearing(_ a: Coordinate, _ b: Coordinate) -> Double {
        let p1 = Geodesy.radians(a.latitude), p2 = Geodesy.radians(b.latitude)
        let dl = Geodesy.radians(b.longitude - a.longitude)
        let y = sin(dl) * cos(p2), x = cos(p1) * sin(p2) - sin(p1) * cos(p2) * cos(dl)
        let deg = atan2(y, x) * 180 / Double.pi
        return deg < 0 ? deg + 360 : deg
    }
}

/// SplitMix64: tiny, fast and fully deterministic across platforms (unlike the system RNG).
public struct SplitMix64: RandomNumberGenerator, Sendable {
    public var state: UInt64
    public init(seed: UInt64) { state = seed }
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    /// A standard normal sample (Box–Muller).
    public mutating func gaussian() -> Double {
        let u1 = max(Double(next() >> 11) / Double(1 << 53), .leastNonzeroMagnitude)
        let u2 = Double(next() >> 11) / Double(1 << 53)
        return (-2 * log(u1)).squareRoot() * cos(2 * Double.pi * u2)
    }
}
