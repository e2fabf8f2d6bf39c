import ArgumentParser
import LocationCore
import LocationProtocol
import NMEA
import ShellWords
#if canImport(Glibc)
import Glibc
#endif

/// `locationctl replay LOG`: the daemon's engine, in-process, over a recorded log; prints as
/// NDJSON exactly the events one subscriber with these options would have been sent.
struct Replay: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the events a subscriber would receive from an NMEA log (NDJSON), without a daemon.",
        discussion: """
            The log is decoded by the same parser and run through the same engine as the daemon's \
            replay source: the output is what a subscriber connected before the log began would \
            have been sent. Use - to read standard input.
            """)

    enum EventKind: String, ExpressibleByArgument, CaseIterable { case location, status, visits, significant, region }

    @Argument(help: "NMEA 0183 log file, or - for standard input.") var log: String
    @OptionGroup var subscription: SubscriptionFlags
    @Option(help: "Event types to print, comma-separated: location, status, visits, significant, region (default: location,status; region alone with --regions).", transform: Replay.parseKinds)
    var events: Set<EventKind>?
    @Option(help: "Monitor the regions of this GeoJSON file (FeatureCollection of Points with id and radius) and print their events.")
    var regions: String?
    @Option(name: .customLong("max-active"), help: "Regions evaluated per fix: a number, or unlimited.")
    var maxActive: String = "20"
    @Option(help: "precise, or approximate: print what an approximate program would receive (the daemon's privacy stage).")
    var accuracy: String = "precise"
    @Option(name: .customLong("privacy-seed"), help: "Seed of the approximate grid (the daemon's --privacy-seed).")
    var privacySeed: UInt64 = 1
    @Option(help: ArgumentHelp("A GeoNames dump (cities500.txt, …): visit and significant events carry the nearest populated place as locality, as the daemon's [geocoding] gazetteer.", valueName: "PATH"))
    var gazetteer: String?
    @OptionGroup var decoding: LogDecodingFlags

    static func parseKinds(_ text: String) throws -> Set<EventKind> {
        try parseKinds(text, expected: "location, status, visits, significant or region")
    }

    /// `--events`' comma-separated names; an unknown one is named with `expected`.
    static func parseKinds(_ text: String, expected: String) throws -> Set<EventKind> {
        var kinds = Set<EventKind>()
        for part in text.split(separator: ",") {
            guard let k = EventKind(rawValue: String(part)) else {
                throw ValidationError("--events: unknown event type '\(part)'; expected \(expected)")
            }
            kinds.insert(k)
        }
        return kinds
    }

    static func parseMaxActive(_ text: String) throws -> Int? {
        if text == "unlimited" { return nil }
        guard let n = Int(text), n >= 1 else { throw ValidationError("--max-active '\(text)': expected a number ≥ 1 or unlimited") }
        return n
    }

    /// Usage errors, found before anything is opened (and so named with this command's usage).
    func validate() throws {
        guard let level = Accuracy(rawValue: accuracy) else {
            throw ValidationError("--accuracy '\(accuracy)': expected precise or approximate")
        }
        if level == .approximate && regions != nil {
            throw ValidationError("--regions needs precise accuracy: approximate programs are refused region monitoring")
        }
        _ = try Replay.parseMaxActive(maxActive)
    }


    func run() throws {
        var engine = Engine()
        let subscriber = SubscriberID(1)
        let encoder = EventEncoder(gazetteer: try gazetteer.map(Replay.loadGazetteer))
        var deliveries: [Delivery] = []
        var out = StandardOutput()
        let kinds = events ?? (regions == nil ? [.location, .status] : [.region])
        let printLocations = kinds.contains(.location), printStatus = kinds.contains(.status)
        let printRegions = kinds.contains(.region)
        var options = subscription.options
        options.events = Replay.subscribedKinds(kinds)
        options.accuracy = Accuracy(rawValue: accuracy) ?? .precise  // checked by validate()
        engine.privacy = ApproximateLocation(grid: PrivacyGrid(secret: privacySeed))
        engine.handle(.subscribe(subscriber, options), into: &deliveries)
        // As the daemon binds a precise session: its visits name places, its regions are its own.
        let program = ProgramID("replay")
        if options.accuracy == .precise { engine.bind(subscriber, to: program) }
        if let regions {
            let list = try RegionsGeoJSON.read(path: regions)
            engine.regionLimits = RegionMonitor.Limits(maxActive: try Replay.parseMaxActive(maxActive), maxRegistered: max(list.count, 1))
            do { try engine.addRegions(list, for: program) } catch { throw RuntimeError("\(regions): \(error.message)") }
        }
        // Takes its buffers inout rather than capturing them: captured, every access in the loop
        // would go through the runtime's exclusivity check (swift_beginAccess), a few % of a
        // replay.
        func emit(_ deliveries: inout [Delivery], _ out: inout StandardOutput) {
            for d in deliveries {
                switch d.event {
                case .location: if printLocations { encoder.append(d.event, to: &out.buffer) }
                case .status: if printStatus { encoder.append(d.event, to: &out.buffer) }
                case .region: if printRegions { encoder.append(d.event, to: &out.buffer) }
                default: encoder.append(d.event, to: &out.buffer)  // only subscribed kinds are delivered
                }
            }
            deliveries.removeAll(keepingCapacity: true)
            out.flushIfFull()
        }
        // The subscription's first status waits in `deliveries` for the log's first input:
        // nothing is printed before the log is open, so a missing log prints only its error.
        let statistics: NMEAStatistics
        do {
            statistics = try NMEAReplay.inputs(fromFile: log, options: try decoding.options()) { input in
                engine.handle(input, into: &deliveries)
                emit(&deliveries, &out)
            }
        } catch let failure as NMEAReplay.Failure {
            out.flush()
            throw RuntimeError(failure.description)
        }
        out.flush()
        if statistics.undatedFixes > 0 {
            var warning = StandardOutput(fd: STDERR_FILENO)
            warning.line("locationctl replay: warning: \(NMEAReplay.undatedWarning(path: log, count: statistics.undatedFixes, remedy: "give the log's UTC date with --date YYYY-MM-DD"))")
            warning.flush()
        }
    }

    /// `--gazetteer`: `PATH.idx` while it is the index of the dump as it is now, as the daemon
    /// takes it (an index it cannot use is passed over, with a warning); else the dump, whose
    /// malformed row is named by its line, as the daemon names it.
    static func loadGazetteer(_ path: String) throws -> Gazetteer {
        let source = try GazetteerCommand.Build.source(of: path)
        let index = path + ".idx"
        if access(index, F_OK) == 0 {
            do {
                let bytes = try readFileBytes(index, what: "gazetteer index")
                return try bytes.withUnsafeBytes { (b) throws(GazetteerIndex.Problem) -> Gazetteer in try GazetteerIndex.gazetteer(from: b, builtFrom: source) }
            } catch {
                var warning = StandardOutput(fd: STDERR_FILENO)
                let reason = (error as? GazetteerIndex.Problem)?.reason ?? "\(error)"
                warning.line("locationctl replay: warning: \(index): \(reason); the dump was read instead (rebuild the index: locationctl gazetteer build \(shellOperands(path)))")
                warning.flush()
            }
        }
        let bytes = try readFileBytes(path, what: "gazetteer")
        do { return try GeoNamesReader.read(bytes) } catch { throw RuntimeError("\(path):\(error.line): \(error.reason)") }
    }

    /// The engine's event kinds for the printed ones (status needs no subscription kind); at
    /// least `location`, as a subscriber that names none gets.
    static func subscribedKinds(_ kinds: Set<EventKind>) -> EventKinds {
        var k: EventKinds = []
        if kinds.contains(.location) { k.insert(.location) }
        if kinds.contains(.visits) { k.insert(.visits) }
        if kinds.contains(.significant) { k.insert(.significant) }
        return k.isEmpty ? .location : k
    }
}
