import ArgumentParser
import LocationCore
import NMEA

/// `locationctl simulate`: writes an NMEA log of a scripted trip, made by our own code so the
/// project's demo and test data never depend on a recorded file.
struct Simulate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write an NMEA log (RMC+GGA+GSA+GST at 1 Hz) of a built-in scripted trip.",
        discussion: """
            Scenarios: 'demo' (a 20-minute urban trip: a stay, a drive, a stay, a walk).
            The output is deterministic for a given --seed.
            """)

    @Argument(help: "Scenario name (demo).") var scenario: String = "demo"
    @Option(name: .shortAndLong, help: "Write to this file instead of standard output.") var output: String?
    @Option(help: "Seed of the position noise.") var seed: UInt64 = 1

    func run() throws {
        guard scenario == "demo" else {
            throw ValidationError("unknown scenario '\(scenario)'; expected demo")
        }
        let text = DemoTrip(seed: seed).nmea()
        try writeText(text, to: output)
    }
}

/// A small deterministic trip: legs of (target, speed m/s, or stay seconds).
struct DemoTrip {
    enum Leg { case stay(seconds: Int), move(to: Coordinate, speed: Double) }
    var seed: UInt64
    let start = Coordinate(latitude: 52.520_008, longitude: 13.404_954)
    let legs: [Leg] = [
        .stay(seconds: 180),
        .move(to: Coordinate(latitude: 52.516_275, longitude: 13.377_704), speed: 11),  // drive ~1.9 km
        .stay(seconds: 300),
        .move(to: Coordinate(latitude: 52.518_620, longitude: 13.376_187), speed: 1.4), // walk ~280 m
        .stay(seconds: 240),
    ]
    let startTime = CivilTime(year: 2026, month: 5, day: 4, hour: 8, minute: 30).timestamp

    func nmea() -> String {
        var rng = SplitMix64(seed: seed)
        let writer = NMEAWriter()
        var out = ""
        var position = start
        var t = 0
        func emit(_ truth: Coordinate, speed: Double, course: Double?) {
            let sigma = 3.0
            let dn = rng.gaussian() * sigma, de = rng.gaussian() * sigma
            let mPerDegLat = Geodesy.earthRadius * Double.pi / 180
            let noisy = Coordinate(latitude: truth.latitude + dn / mPerDegLat,
                                   longitude: truth.longitude + de / (mPerDegLat * cos(Geodesy.radians(truth.latitude))))
            var quality = NMEAWriter.Quality()
            quality.sigmaLatitude = sigma; quality.sigmaLongitude = sigma; quality.sigmaAltitude = 5
            quality.geoidSeparation = 39.5
            let fix = Fix(time: startTime.adding(seconds: Double(t)), coordinate: noisy, mode: .threeD,
                          altitudeMSL: 34 + rng.gaussian() * 2, speed: speed, course: course)
            out += writer.epoch(fix, quality: quality)
            t += 1
        }
        for leg in legs {
            switch leg {
            case .stay(let seconds):
                for _ in 0..<seconds { emit(position, speed: 0, course: nil) }
            case .move(let target, let speed):
                let distance = Geodesy.distance(position, target)
                let steps = max(1, Int((distance / speed).rounded()))
                let from = position
                let course = bearing(from, target)
                for i in 1...steps {
                    let f = Double(i) / Double(steps)
                    position = Coordinate(latitude: from.latitude + (target.latitude - from.latitude) * f,
                                          longitude: from.longitude + (target.longitude - from.longitude) * f)
                    emit(position, speed: speed, course: course)
                }
            }
        }
        return out
    }

    func bearing(_ a: Coordinate, _ b: Coordinate) -> Double {
        let p1 = Geodesy.radians(a.latitude), p2 = Geodesy.radians(b.latitude)
        let dl = Geodesy.radians(b.longitude - a.longitude)
        let y = sin(dl) * cos(p2), x = cos(p1) * sin(p2) - sin(p1) * cos(p2) * cos(dl)
        let deg = atan2(y, x) * 180 / Double.pi
        return deg < 0 ? deg + 360 : deg
    }
}

/// SplitMix64: tiny, fast and fully deterministic across platforms (unlike the system RNG).
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    /// A standard normal sample (Box–Muller).
    mutating func gaussian() -> Double {
        let u1 = max(Double(next() >> 11) / Double(1 << 53), .leastNonzeroMagnitude)
        let u2 = Double(next() >> 11) / Double(1 << 53)
        return (-2 * log(u1)).squareRoot() * cos(2 * Double.pi * u2)
    }
}

#if canImport(Glibc)
import Glibc
#endif
