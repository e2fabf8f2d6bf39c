import ArgumentParser
import LocationCore
import LocationProtocol
import NMEA

/// `locationctl map LOG -o trip.html`: one self-contained HTML page showing what the engine
/// makes of a log — its track coloured by accuracy, the outliers it rejected, its visits
/// (clustered when zoomed out), places and the states of a GeoJSON file's regions; or, with
/// `--live`, what the daemon holds for this program (MapLive). Leaflet and
/// Leaflet.markercluster are read from Debian's packages and inlined, so the page opens
/// offline from a file:// URL.
struct MapCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "map",
        abstract: "Write a self-contained HTML map of an NMEA log, or of the daemon's regions, places and visits (--live).",
        discussion: """
            A log runs through the daemon's engine as locationctl replay runs it (one precise \
            subscriber, no filter). The track is coloured by 95 % accuracy (green ≤ 10 m, amber \
            ≤ 30 m, red beyond, grey unknown) and thinned to one point every few metres; fixes the \
            outlier gate rejected are red rings; visits are markers with their times that coalesce \
            into clusters when zoomed out, places circles sized by their visits; regions are \
            circles, purple when the log ended inside. \
            --live draws this program's regions (with an always session), places and recent \
            visits from the running daemon, and with --for SECONDS the track and visits it is \
            sent meanwhile \
            (Ctrl-C ends the wait early). No map tiles unless --tiles is given (a \
            scale bar and a latitude/longitude grid instead). Needs libjs-leaflet and \
            libjs-leaflet.markercluster.
            """)

    @Argument(help: "NMEA 0183 log file, or - for standard input (not with --live).") var log: String?
    @Option(name: .shortAndLong, help: "The HTML file to write.") var output: String
    @Option(help: "Regions to draw and monitor: a GeoJSON FeatureCollection of Points with id and radius (as replay --regions).")
    var regions: String?
    @Option(help: ArgumentHelp("A tile server's URL template, e.g. https://tiles.example/{z}/{x}/{y}.png (the page then needs it reachable).", valueName: "URL-TEMPLATE"))
    var tiles: String?
    @Option(help: ArgumentHelp("Where Leaflet's files are (libjs-leaflet, libjs-leaflet.markercluster).", valueName: "DIR"))
    var leaflet: String = "/usr/share/javascript/leaflet"
    @OptionGroup var decoding: LogDecodingFlags
    @Flag(help: "Map the running daemon's regions, places and recent visits of this program (and, with --for, what it is sent meanwhile) instead of a log.")
    var live = false
    @Option(name: .customLong("for"), help: ArgumentHelp("With --live: watch this many seconds for fixes and visits before writing the map.", valueName: "SECONDS"))
    var watchSeconds: Double = 0
    @Option(help: "With --live: a purpose key the policy lists (for a precise session).") var purpose: String?
    @OptionGroup var socket: SocketFlag

    func validate() throws {
        if let tiles, !(tiles.contains("{z}") && tiles.contains("{x}") && tiles.contains("{y}")) {
            throw ValidationError("--tiles '\(tiles)': expected a URL template with {z}, {x} and {y}")
        }
        if live {
            if log != nil { throw ValidationError("give a LOG or --live, not both") }
            if regions != nil || decoding.date != nil || decoding.asGPSD {
                throw ValidationError("--regions, --date and --as-gpsd are for a log; --live draws the daemon's regions")
            }
            guard (0...86_400).contains(watchSeconds) else {
                throw ValidationError("--for \(numberText(watchSeconds)) is out of range; expected 0…86400 seconds")
            }
        } else {
            if log == nil { throw ValidationError("give an NMEA LOG to map, or --live for the running daemon") }
            if watchSeconds != 0 || purpose != nil { throw ValidationError("--for and --purpose are for --live") }
        }
    }

    func run() async throws {
        let assets = try MapPage.Assets(directory: leaflet)
        let trip: MapTrip, title: String
        if live {
            trip = try await MapLive.run(socket: socket.path, purpose: purpose, seconds: watchSeconds)
            title = "locationd, " + MapTrip.clock(trip.madeAt)
        } else {
            let log = self.log ?? "-"
            let list = try regions.map { try RegionsGeoJSON.read(path: $0) } ?? []
            trip = try MapTrip.run(log: log, regions: list, decoding: try decoding.options())
            title = log == "-" ? "standard input" : String(log.split(separator: "/").last ?? Substring(log))
        }
        try writeText(MapPage.html(title: title, data: trip.json(tiles: tiles), assets: assets), to: output)
    }
}

/// What the engine made of a log, for the map.
struct MapTrip {
    var fixes: [Fix] = []
    /// Visits by arrival time: the departure's when it came, else the arrival's.
    var visits: [Visit] = []
    var regions: [Region] = []
    /// The last state of each region (`inside`/`outside`), when one was decided.
    var regionStates: [String: Bool] = [:]
    /// The places the log's visits made (docs/places.md).
    var places: [Place] = []
    /// Fixes the outlier gate rejected (a raw subscription saw them, the others did not).
    var outliers: [Fix] = []
    /// When the map's data was taken (the last fix's time, or the clock's for --live).
    var madeAt = Timestamp(nanoseconds: 0)

    static func run(log: String, regions: [Region], decoding: NMEADecoder.Options) throws -> MapTrip {
        var trip = MapTrip()
        trip.regions = regions
        var engine = Engine()
        let subscriber = SubscriberID(1)
        var options = SubscriptionOptions()
        options.events = [.location, .visits]
        var deliveries: [Delivery] = []
        engine.handle(.subscribe(subscriber, options), into: &deliveries)
        // A raw subscriber beside it sees every fix: those it sees and the other does not are
        // what the outlier gate rejected (docs/semantics.md, "Outliers").
        let rawSubscriber = SubscriberID(2)
        var rawOptions = SubscriptionOptions()
        rawOptions.events = [.location]
        rawOptions.raw = true
        engine.handle(.subscribe(rawSubscriber, rawOptions), into: &deliveries)
        var rawFixes: [Fix] = []
        // Bound as the daemon binds a precise session: its regions, and its visits' places.
        let program = ProgramID("map")
        engine.bind(subscriber, to: program)
        if !regions.isEmpty {
            engine.regionLimits = RegionMonitor.Limits(maxActive: nil, maxRegistered: regions.count)
            do { try engine.addRegions(regions, for: program) } catch { throw RuntimeError("regions: \(error.message)") }
        }
        do {
            _ = try NMEAReplay.inputs(fromFile: log, options: decoding) { input in
                deliveries.removeAll(keepingCapacity: true)
                engine.handle(input, into: &deliveries)
                for d in deliveries {
                    if d.subscriber == rawSubscriber {
                        if case .location(let fix) = d.event { rawFixes.append(fix) }
                    } else {
                        trip.take(d.event)
                    }
                }
            }
        } catch let failure as NMEAReplay.Failure {
            throw RuntimeError(failure.description)
        }
        trip.places = engine.places(of: program)
        let accepted = Set(trip.fixes.map(\.time))
        trip.outliers = rawFixes.filter { !accepted.contains($0.time) }
        trip.madeAt = trip.fixes.last?.time ?? trip.madeAt
        return trip
    }

    mutating func take(_ event: Event) {
        switch event {
        case .location(let fix): fixes.append(fix)
        case .visit(let visit):
            if visit.kind == .departure, let i = visits.lastIndex(where: { $0.arrival == visit.arrival }) {
                visits[i] = visit
            } else {
                visits.append(visit)
            }
        case .region(let e):
            switch e.kind {
            case .enter, .inside, .dwell: regionStates[e.region] = true
            case .exit, .outside: regionStates[e.region] = false
            }
        default: break
        }
    }

    /// The track thinned for drawing, in lines of one accuracy class: a fix is kept when it lies
    /// farther from the last kept one than `spacing` metres and its own accuracy (what a fix
    /// moves by less than that is noise), or follows a gap of more than `gap` seconds (which
    /// breaks the line). A day at 1 Hz (86,400 epochs, most of them at a few stays) keeps a
    /// few thousand points: the page pans smoothly.
    static func segments(_ fixes: [Fix], spacing: Double = 10, gap: Double = 120) -> [(accuracy: String, points: [Coordinate])] {
        var out: [(accuracy: String, points: [Coordinate])] = []
        var last: Fix?
        for fix in fixes {
            let cls = accuracyClass(fix.horizontalAccuracy)
            guard let previous = last else {
                out.append((cls, [fix.coordinate])); last = fix; continue
            }
            if fix.time - previous.time > gap {
                out.append((cls, [fix.coordinate]))
            } else if Geodesy.distance(previous.coordinate, fix.coordinate) < max(spacing, fix.horizontalAccuracy ?? 0) {
                continue
            } else if cls != out[out.count - 1].accuracy {
                out.append((cls, [previous.coordinate, fix.coordinate]))
            } else {
                out[out.count - 1].points.append(fix.coordinate)
            }
            last = fix
        }
        return out
    }

    static func accuracyClass(_ accuracy: Double?) -> String {
        guard let accuracy else { return "unknown" }
        return accuracy <= 10 ? "good" : accuracy <= 30 ? "fair" : "poor"
    }

    /// The page's data, as a JavaScript object literal (JSON).
    func json(tiles: String?) -> String {
        var out = "{\"track\":["
        for (n, s) in MapTrip.segments(fixes).enumerated() {
            out += (n == 0 ? "" : ",") + "{\"accuracy\":\"\(s.accuracy)\",\"points\":["
            out += s.points.map { "[\(Self.degrees($0.latitude)),\(Self.degrees($0.longitude))]" }.joined(separator: ",")
            out += "]}"
        }
        out += "],\"fixes\":\(fixes.count),\"outliers\":["
        out += outliers.map { f in
            "{\"lat\":\(Self.degrees(f.coordinate.latitude)),\"lon\":\(Self.degrees(f.coordinate.longitude)),\"time\":\"\(ISO8601.string(f.time))\"}"
        }.joined(separator: ",")
        out += "],\"visits\":["
        out += visits.map { v in
            var label = "Visit\(v.place.map { " to p\($0)" } ?? ""): arrived \(Self.clock(v.arrival))"
            if let d = v.departure { label += ", left \(Self.clock(d)) (\(Self.duration(d - v.arrival)))" }
            return "{\"lat\":\(Self.degrees(v.coordinate.latitude)),\"lon\":\(Self.degrees(v.coordinate.longitude)),\"label\":\(JSONWriter.quoted(label))}"
        }.joined(separator: ",")
        out += "],\"regions\":["
        out += regions.map { r in
            let state = regionStates[r.id].map { $0 ? "inside" : "outside" } ?? "unknown"
            return "{\"id\":\(JSONWriter.quoted(r.id)),\"lat\":\(Self.degrees(r.center.latitude)),\"lon\":\(Self.degrees(r.center.longitude)),\"radius\":\(r.radius),\"state\":\"\(state)\"}"
        }.joined(separator: ",")
        out += "],\"places\":["
        out += places.map { p in
            "{\"name\":\"\(p.name)\",\"lat\":\(Self.degrees(p.centre.latitude)),\"lon\":\(Self.degrees(p.centre.longitude)),\"visits\":\(p.visits),\"label\":\(JSONWriter.quoted("Place \(p.name)\(p.locality.map { " near \($0.name)" } ?? ""): \(p.visits) visit\(p.visits == 1 ? "" : "s"), \(Self.duration(p.totalSeconds))"))}"
        }.joined(separator: ",")
        out += "],\"tiles\":\(tiles.map(JSONWriter.quoted) ?? "null")}"
        // Inside a <script> element: no "</" may end it early.
        return out.replacingAll("</", with: "<\\/")
    }

    static func degrees(_ d: Double) -> String { numberText((d * 1e7).rounded() / 1e7) }

    /// `2026-05-04 08:30 UTC`.
    static func clock(_ t: Timestamp) -> String {
        let c = CivilTime(t)
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : String(n) }
        return "\(c.year)-\(two(c.month))-\(two(c.day)) \(two(c.hour)):\(two(c.minute)) UTC"
    }

    /// `1 h 5 min`, `12 min`.
    static func duration(_ seconds: Double) -> String {
        let minutes = Int((seconds / 60).rounded())
        return minutes >= 60 ? "\(minutes / 60) h \(minutes % 60) min" : "\(minutes) min"
    }
}

private extension String {
    func replacingAll(_ target: String, with replacement: String) -> String {
        var out = ""
        var rest = self[...]
        while let r = rest.firstRange(of: target) {
            out += rest[..<r.lowerBound] + replacement
            rest = rest[r.upperBound...]
        }
        return out + rest
    }
}
