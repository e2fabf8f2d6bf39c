import ArgumentParser
import LocationCore
import Simulation
import LocationProtocol

/// `locationctl evaluate`: visit detection scored against ground truth (docs/visits.md).
struct Evaluate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Score visit detection against ground truth: per-stay precision/recall/F1, arrival and departure errors.",
        discussion: """
            Either simulate SCENARIO (file or name, as for simulate) and score the engine's visits \
            on it, or score a recorded --log against a --truth file (JSON lines as simulate \
            --truth writes them).
            """)

    @Argument(help: "Scenario file or name.") var scenario: String?
    @Option(help: "NMEA log to score (with --truth).") var log: String?
    @Option(help: "True visits, JSON lines (with --log).") var truth: String?
    @Option(help: "Visit radius, metres.") var radius: Double = VisitDetector.Parameters().radius
    @Option(help: "Dwell time before an arrival, seconds.") var dwell: Double = VisitDetector.Parameters().dwell
    @Flag(help: "List the true and the detected visits.") var verbose = false

    func validate() throws {
        guard (scenario != nil) != (log != nil || truth != nil) else {
            throw ValidationError("give either a SCENARIO or --log LOG --truth TRUTH")
        }
        if scenario == nil, log == nil || truth == nil { throw ValidationError("--log and --truth go together") }
        // A NaN or negative value detected nothing and printed a zero score with exit 0.
        guard radius > 0, radius <= 100_000 else {
            throw ValidationError("--radius \(numberText(radius)) is out of range; expected more than 0 and at most 100000 metres")
        }
        guard (0...604_800).contains(dwell) else {
            throw ValidationError("--dwell \(numberText(dwell)) is out of range; expected 0…604800 seconds")
        }
    }

    func run() throws {
        var parameters = VisitDetector.Parameters()
        parameters.radius = radius
        parameters.dwell = dwell
        let nmea: [UInt8]
        let trueVisits: [TrueVisit]
        if let scenario {
            let output = Simulator(try loadScenario(scenario)).run()
            nmea = output.nmea
            trueVisits = output.truth
        } else {
            nmea = try readFileBytes(log!, what: "NMEA log")
            let truthText = String(decoding: try readFileBytes(truth!, what: "truth file"), as: UTF8.self)
            do { trueVisits = try TrueVisit.parse(lines: truthText) } catch { throw RuntimeError(error.described(file: truth!)) }
        }
        let detected = detectVisits(nmea: nmea, parameters: parameters)
        let end = lastFixTime(nmea) ?? Timestamp(nanoseconds: 0)
        let score = scoreVisits(detected: detected, truth: trueVisits, end: end)
        var out = StandardOutput()
        if verbose {
            for t in trueVisits {
                out.line("true      \(ISO8601.string(t.arrival)) – \(t.departure.map(ISO8601.string) ?? "end")  \(t.place ?? "")")
            }
            for d in detected {
                out.line("detected  \(ISO8601.string(d.arrival)) – \(d.departure.map(ISO8601.string) ?? "end")  emitted \(ISO8601.string(d.arrivalEmitted))")
            }
        }
        out.line(score.description)
        out.flush()
    }
}
