import ArgumentParser
import LocationCore
import Simulation
import LocationProtocol
import NMEA

/// `locationctl evaluate`: visit detection scored against ground truth (docs/visits.md).
struct Evaluate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Score visit detection against ground truth: per-stay precision/recall/F1, arrival and departure errors; for a scenario also the outlier gate: good and outlier fixes delivered, delay after real jumps.",
        discussion: """
            Either simulate SCENARIO (file or name, as for simulate) and score the engine's visits \
            on it, or score a recorded --log against a --truth file (JSON lines as simulate \
            --truth writes them), or score every track of a --dataset list (one NAME a line, \
            '#' comments): --logs DIR/NAME.nmea against labels/NAME.truth beside the list, \
            the scores summed over the tracks (Benchmarks/real-tracks, docs/visits.md). \
            With --as-gpsd the logs are decoded as the daemon sees them through gpsd, and the \
            true visits are moved with their dates.
            """)

    @Argument(help: "Scenario file or name.") var scenario: String?
    @Option(help: "NMEA log to score (with --truth).") var log: String?
    @Option(help: "True visits, JSON lines (with --log).") var truth: String?
    @Option(help: "A list of track names (with --logs).") var dataset: String?
    @Option(help: "Folder of the dataset's NMEA logs, NAME.nmea (with --dataset).") var logs: String?
    @Option(help: "Visit radius, metres.") var radius: Double = VisitDetector.Parameters().radius
    @Option(help: "Dwell time before an arrival, seconds.") var dwell: Double = VisitDetector.Parameters().dwell
    @OptionGroup var decoding: LogDecodingFlags
    @Flag(help: "List the true and the detected visits.") var verbose = false

    func validate() throws {
        let sources = [scenario != nil, log != nil || truth != nil, dataset != nil || logs != nil].filter { $0 }.count
        guard sources == 1 else {
            throw ValidationError("give either a SCENARIO, --log LOG --truth TRUTH, or --dataset LIST --logs DIR")
        }
        if log != nil || truth != nil, log == nil || truth == nil { throw ValidationError("--log and --truth go together") }
        if dataset != nil || logs != nil, dataset == nil || logs == nil { throw ValidationError("--dataset and --logs go together") }
        // A NaN or negative value would detect nothing and print a zero score with exit 0.
        guard radius > 0, radius <= 100_000 else {
            throw ValidationError("--radius \(numberText(radius)) is out of range; expected more than 0 and at most 100000 metres")
        }
        guard (0...604_800).contains(dwell) else {
            throw ValidationError("--dwell \(numberText(dwell)) is out of range; expected 0…604800 seconds")
        }
    }

    func run() throws {
        let decoding = try self.decoding.options()
        var parameters = VisitDetector.Parameters()
        parameters.radius = radius
        parameters.dwell = dwell
        if let dataset, let logs {
            try runDataset(dataset, logs: logs, parameters: parameters, decoding: decoding)
            return
        }
        let nmea: [UInt8]
        let trueVisits: [TrueVisit]
        var locations: LocationScore?
        if let scenario {
            let output = Simulator(try loadScenario(scenario)).run()
            nmea = output.nmea
            trueVisits = output.truth.map { $0.timed(by: decoding) }
            locations = scoreLocations(output, decoding: decoding)
        } else {
            nmea = try readFileBytes(log!, what: "NMEA log")
            let truthText = String(decoding: try readFileBytes(truth!, what: "truth file"), as: UTF8.self)
            do { trueVisits = try TrueVisit.parse(lines: truthText).map { $0.timed(by: decoding) } } catch { throw RuntimeError(error.described(file: truth!)) }
        }
        let detected = detectVisits(nmea: nmea, parameters: parameters, decoding: decoding)
        let end = lastFixTime(nmea, decoding: decoding) ?? Timestamp(nanoseconds: 0)
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
        // Only a simulation knows which of its fixes are outliers.
        if let locations { out.line(locations.description) }
        out.flush()
    }

    /// Scores each listed track and the sum over them (a track's visits match only its own).
    func runDataset(_ list: String, logs: String, parameters: VisitDetector.Parameters, decoding: NMEADecoder.Options) throws {
        let text = String(decoding: try readFileBytes(list, what: "dataset list"), as: UTF8.self)
        let names = text.split(separator: "\n").compactMap { line -> String? in
            let name = line.prefix { $0 != "#" }.filter { !$0.isWhitespace }
            return name.isEmpty ? nil : String(name)
        }
        guard !names.isEmpty else { throw RuntimeError("\(list): no track names") }
        let folder = list.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        let labels = (folder.isEmpty ? "." : folder) + "/labels"
        var total = VisitScore.none
        var out = StandardOutput()
        for name in names {
            let nmea = try readFileBytes("\(logs)/\(name).nmea", what: "NMEA log")
            let truthPath = "\(labels)/\(name).truth"
            let truthText = String(decoding: try readFileBytes(truthPath, what: "truth file"), as: UTF8.self)
            let trueVisits: [TrueVisit]
            do { trueVisits = try TrueVisit.parse(lines: truthText).map { $0.timed(by: decoding) } } catch { throw RuntimeError(error.described(file: truthPath)) }
            let detected = detectVisits(nmea: nmea, parameters: parameters, decoding: decoding)
            let score = scoreVisits(detected: detected, truth: trueVisits, end: lastFixTime(nmea, decoding: decoding) ?? Timestamp(nanoseconds: 0))
            if verbose {
                out.line("\(name): true \(score.truthCount), detected \(score.detectedCount), matched \(score.matched)")
            }
            total.add(score)
        }
        out.line("\(names.count) tracks")
        out.line(total.description)
        out.flush()
    }
}
