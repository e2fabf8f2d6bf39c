import Foundation
import LocationCore
import LocationProtocol
import Simulation
import Testing

/// `locationctl map`'s page as a person sees it: loaded from a file:// URL by headless Chromium
/// (Debian's `chromium`), with no network.
@Suite(.serialized, .timeLimit(.minutes(5)),
       .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/chromium"), "chromium is not installed (scripts/install-deps)"),
       .enabled(if: FileManager.default.fileExists(atPath: "/usr/share/javascript/leaflet/leaflet.markercluster.js"),
                "libjs-leaflet.markercluster is not installed (scripts/install-deps)"))
struct MapTests {
    static let chromium = URL(fileURLWithPath: "/usr/bin/chromium")
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    /// Screenshots are kept here for a person to look at.
    static let artifacts = root.appendingPathComponent(".build/test-artifacts")

    static func directory() throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("map-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir
    }

    /// Runs headless Chromium on `page` in a 1000×700 window with a profile of its own:
    /// `--dump-dom` (the DOM once the scripts have run) or `--screenshot=PATH`.
    static func chromium(_ mode: String, _ page: URL, in dir: URL) throws -> String {
        let result = try runToExit(chromium, ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                                              "--user-data-dir=\(dir.appendingPathComponent("profile").path)",
                                              "--window-size=1000,700", "--virtual-time-budget=5000", mode, page.absoluteString],
                                   timeout: 120)
        #expect(result.status == 0, "chromium: \(result.err.suffix(2000))")
        return result.out
    }

    /// Elements whose class list has `name` (the page's own style sheets name it too).
    static func elements(withClass name: String, in dom: String) throws -> Int {
        try NSRegularExpression(pattern: "class=\"([^\"]* )?\(name)( [^\"]*)?\"").numberOfMatches(in: dom, range: NSRange(dom.startIndex..., in: dom))
    }

    /// The page's data object.
    static func data(of html: String) throws -> [String: Any] {
        let start = try #require(html.range(of: "const DATA = "))
        let end = try #require(html.range(of: ";</script>", range: start.upperBound..<html.endIndex))
        return try #require(try JSONSerialization.jsonObject(with: Data(html[start.upperBound..<end.lowerBound].utf8)) as? [String: Any])
    }

    /// A screenshot of `page` in the artifacts folder, for a person to look at.
    static func screenshot(_ page: URL, as name: String, in dir: URL) throws {
        try FileManager.default.createDirectory(at: artifacts, withIntermediateDirectories: true)
        let shot = artifacts.appendingPathComponent(name)
        try? FileManager.default.removeItem(at: shot)
        _ = try chromium("--screenshot=\(shot.path)", page, in: dir)
        let png = try Data(contentsOf: shot)
        #expect(png.count > 5_000 && png.starts(with: [0x89, 0x50, 0x4E, 0x47]), "screenshot of \(png.count) bytes")
    }

    /// A day at 1 Hz (Benchmarks/day-24h.json: home, office, a café 280 m from it, office, a
    /// shop, home 360 m from where the day began): the page loads without a script error, and at
    /// the initial zoom (the whole day, ≈ 15 km across) the six visits are two clusters — the
    /// two at home and the office's two with the café's — and the shop alone. The track is thinned to a size that pans smoothly.
    @Test func aDayOpensWithItsVisitsClustered() throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let scenario = try Scenario.parse(String(contentsOf: Self.root.appendingPathComponent("Benchmarks/day-24h.json"), encoding: .utf8))
        let output = Simulator(scenario).run()
        #expect(output.truth.count == 6)
        let log = dir.appendingPathComponent("day.nmea"), page = dir.appendingPathComponent("day.html")
        try Data(output.nmea).write(to: log)
        let made = try LocationCtlReplayTests.run(["map", log.path, "-o", page.path])
        #expect(made.status == 0 && made.err.isEmpty, "\(made.err)")
        let html = try String(contentsOf: page, encoding: .utf8)
        // Self-contained: nothing is fetched (no src/href to another file, no tile server).
        #expect(!html.contains("<script src") && !html.contains("<link"))
        let data = try Self.data(of: html)
        let track = try #require(data["track"] as? [[String: Any]])
        let points = track.reduce(0) { $0 + (($1["points"] as? [Any])?.count ?? 0) }
        #expect(points > 1000 && points < 20_000, "\(points) track points")
        #expect((data["fixes"] as? Int ?? 0) > 60_000)
        #expect((data["visits"] as? [Any])?.count == 6)

        let dom = try Self.chromium("--dump-dom", page, in: dir)
        #expect(dom.contains("id=\"map\""), "no page: \(dom.prefix(500))")
        #expect(!dom.contains("id=\"errors\""), "script error: \(dom.components(separatedBy: "id=\"errors\"").last?.prefix(300) ?? "")")
        // A cluster is a `marker-cluster` icon with its count; a lone visit its own icon.
        #expect(try Self.elements(withClass: "marker-cluster", in: dom) == 2)
        #expect(dom.contains("<span>2</span>") && dom.contains("<span>3</span>"))
        #expect(try Self.elements(withClass: "visit-icon", in: dom) == 1)
        // Places: the office visited twice; the evening's home stop is 360 m from the
        // morning's (the scenario's legs do not close), so it is a place of its own.
        #expect(dom.contains("fixes, 6 visits, 5 places"))
        #expect((data["places"] as? [[String: Any]])?.compactMap { $0["visits"] as? Int } == [1, 2, 1, 1, 1])

        try Self.screenshot(page, as: "map-day.png", in: dir)
    }

    /// Regions are drawn with the state the log ended in; a tile template is passed to the page.
    @Test func regionsShowTheirLastStateAndTilesAreOptional() throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let scenario = try Scenario.parse(String(contentsOf: Self.root.appendingPathComponent("Scenarios/demo.json"), encoding: .utf8))
        let output = Simulator(scenario).run()
        let log = dir.appendingPathComponent("demo.nmea"), page = dir.appendingPathComponent("demo.html")
        try Data(output.nmea).write(to: log)
        let last = output.truth.last!.coordinate, first = output.truth.first!.coordinate
        let regions = dir.appendingPathComponent("regions.geojson")
        try """
        {"type":"FeatureCollection","features":[
        {"type":"Feature","geometry":{"type":"Point","coordinates":[\(last.longitude),\(last.latitude)]},"properties":{"id":"end </script>","radius":100}},
        {"type":"Feature","geometry":{"type":"Point","coordinates":[\(first.longitude),\(first.latitude)]},"properties":{"id":"start","radius":100}}]}
        """.write(to: regions, atomically: true, encoding: .utf8)
        let made = try LocationCtlReplayTests.run(["map", log.path, "--regions", regions.path, "-o", page.path,
                                                   "--tiles", "http://127.0.0.1:9/{z}/{x}/{y}.png"])
        #expect(made.status == 0, "\(made.err)")
        let html = try String(contentsOf: page, encoding: .utf8)
        let data = try Self.data(of: html)
        let states = (data["regions"] as? [[String: Any]] ?? []).map { "\($0["id"] ?? "")=\($0["state"] ?? "")" }
        #expect(states == ["end </script>=inside", "start=outside"])
        #expect(data["tiles"] as? String == "http://127.0.0.1:9/{z}/{x}/{y}.png")
        let dom = try Self.chromium("--dump-dom", page, in: dir)
        #expect(dom.contains("id=\"map\"") && !dom.contains("id=\"errors\""), "\(dom.suffix(500))")

        let bad = try LocationCtlReplayTests.run(["map", log.path, "-o", page.path, "--tiles", "http://x/tile.png"])
        #expect(bad.status == 64 && bad.err.contains("{z}, {x} and {y}"), "\(bad.err)")
        let noLeaflet = try LocationCtlReplayTests.run(["map", log.path, "-o", page.path, "--leaflet", dir.path])
        #expect(noLeaflet.status == 1 && noLeaflet.err.contains("install libjs-leaflet"), "\(noLeaflet.err)")
    }

    /// The `spikes` scenario's multipath spikes (1–3 epochs, 100–300 m off): every fix the
    /// simulator displaced is marked as a rejected outlier, and no other.
    @Test func rejectedOutliersAreMarked() throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let log = dir.appendingPathComponent("spikes.nmea"), page = dir.appendingPathComponent("spikes.html")
        let simulated = try LocationCtlReplayTests.run(["simulate", "spikes", "-o", log.path], directory: Self.root)
        #expect(simulated.status == 0, "\(simulated.err)")
        let scenario = try Scenario.parse(String(contentsOf: Self.root.appendingPathComponent("Scenarios/spikes.json"), encoding: .utf8))
        let spikes = Simulator(scenario).run().outliers
        #expect(spikes.count > 50)
        let made = try LocationCtlReplayTests.run(["map", log.path, "-o", page.path])
        #expect(made.status == 0 && made.err.isEmpty, "\(made.err)")
        let data = try Self.data(of: String(contentsOf: page, encoding: .utf8))
        let marked = (data["outliers"] as? [[String: Any]] ?? []).compactMap { $0["time"] as? String }
        #expect(marked == spikes.map(ISO8601.string))
        let dom = try Self.chromium("--dump-dom", page, in: dir)
        #expect(dom.contains("id=\"map\"") && !dom.contains("id=\"errors\""), "\(dom.suffix(500))")
        #expect(dom.contains(", \(spikes.count) outliers rejected"))
        try Self.screenshot(page, as: "map-spikes.png", in: dir)
    }

    /// `map --live` against a real daemon reading a real gpsd: the demo trip is fed while the
    /// map watches; Ctrl-C ends the watch and the page shows what this program (locationctl)
    /// may see — its three visits, the three places they made, its regions with their states.
    /// Without `--for`, the map shows the same visits from the daemon's recent visits.
    /// `locationctl places --geojson` exports the same places.
    @Test(.enabled(if: GPSDHarness.isAvailable, "gpsd is not installed (apt-get install gpsd)"))
    func liveShowsTheProgramsRegionsPlacesAndVisits() async throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let gpsd = try GPSDHarness()
        defer { gpsd.shutdown() }
        let daemon = try DaemonProcess(arguments: ["--gpsd", "\(gpsd.host):\(gpsd.portString)"])
        defer { daemon.stop() }
        let probe = try await daemon.connect()
        defer { probe.close() }
        let scenario = try Scenario.parse(String(contentsOf: Self.root.appendingPathComponent("Scenarios/demo.json"), encoding: .utf8))
        let trip = Simulator(scenario).run()
        // locationctl's own regions: one at the trip's last stay, one far away.
        let last = trip.truth.last!.coordinate
        let regions = dir.appendingPathComponent("regions.geojson")
        try """
        {"type":"FeatureCollection","features":[
        {"type":"Feature","geometry":{"type":"Point","coordinates":[\(last.longitude),\(last.latitude)]},"properties":{"id":"last","radius":100}},
        {"type":"Feature","geometry":{"type":"Point","coordinates":[\(last.longitude + 1),\(last.latitude)]},"properties":{"id":"far","radius":100}}]}
        """.write(to: regions, atomically: true, encoding: .utf8)
        let imported = try LocationCtlReplayTests.run(["regions", "import", regions.path, "--socket", daemon.socketPath])
        try #require(imported.status == 0, "\(imported.err)")

        let page = dir.appendingPathComponent("live.html")
        let map = Process()
        map.executableURL = LocationCtlReplayTests.locationctl
        map.arguments = ["map", "--live", "--for", "600", "--socket", daemon.socketPath, "-o", page.path]
        let err = Pipe()
        map.standardError = err
        map.standardOutput = FileHandle.nullDevice
        try map.run()
        defer { if map.isRunning { map.terminate() }; map.waitUntilExit() }
        // A hang is a failure, not a test that never ends.
        let watchdog = Task { try await Task.sleep(for: .seconds(90)); map.terminate() }
        defer { watchdog.cancel() }
        var text = ""
        func read(until done: (String) -> Bool) {
            while !done(text) {
                let chunk = err.fileHandleForReading.availableData
                if chunk.isEmpty { return }
                text += String(decoding: chunk, as: UTF8.self)
            }
        }
        func count(_ s: String) -> Int { text.components(separatedBy: s).count - 1 }
        read { $0.contains("watching for 600 s") }
        gpsd.serve(bytes: trip.nmea)
        read { _ in count("visit arrival") == 3 && count("visit departure") == 2 }
        #expect(count("visit arrival") == 3, "\(text)")
        map.interrupt()
        read { _ in false }  // to the end: the map is written
        map.waitUntilExit()
        #expect(map.terminationStatus == 0, "\(text)")

        let data = try Self.data(of: String(contentsOf: page, encoding: .utf8))
        #expect((data["fixes"] as? Int ?? 0) > 100)
        let visits = (data["visits"] as? [[String: Any]] ?? []).compactMap { $0["label"] as? String }
        #expect(visits.count == 3 && visits.map { $0.prefix(12) } == ["Visit to p1:", "Visit to p2:", "Visit to p3:"], "\(visits)")
        #expect((data["places"] as? [[String: Any]])?.compactMap { $0["name"] as? String } == ["p1", "p2", "p3"])
        let states = (data["regions"] as? [[String: Any]] ?? []).map { "\($0["id"] ?? "")=\($0["state"] ?? "")" }
        #expect(states.sorted() == ["far=outside", "last=inside"])
        let dom = try Self.chromium("--dump-dom", page, in: dir)
        #expect(dom.contains("id=\"map\"") && !dom.contains("id=\"errors\""), "\(dom.suffix(500))")
        #expect(dom.contains("fixes, 3 visits, 3 places, 2 regions"))
        try Self.screenshot(page, as: "map-live.png", in: dir)

        // No watch: the visits are the ones the daemon kept.
        let kept = dir.appendingPathComponent("kept.html")
        let again = try LocationCtlReplayTests.run(["map", "--live", "--socket", daemon.socketPath, "-o", kept.path])
        #expect(again.status == 0, "\(again.err)")
        let keptData = try Self.data(of: String(contentsOf: kept, encoding: .utf8))
        #expect((keptData["visits"] as? [[String: Any]] ?? []).compactMap { $0["label"] as? String } == visits)
        let keptDOM = try Self.chromium("--dump-dom", kept, in: dir)
        #expect(!keptDOM.contains("id=\"errors\"") && keptDOM.contains("3 visits, 3 places, 2 regions"), "\(keptDOM.suffix(500))")

        // The same places as GeoJSON, from another run of the same program.
        let exported = try LocationCtlReplayTests.run(["places", "--geojson", "--socket", daemon.socketPath])
        #expect(exported.status == 0, "\(exported.err)")
        let geojson = try #require(try JSONSerialization.jsonObject(with: Data(exported.out.utf8)) as? [String: Any])
        let features = geojson["features"] as? [[String: Any]] ?? []
        #expect(features.compactMap { $0["id"] as? String } == ["p1", "p2", "p3"])
        let points = features.compactMap { ($0["geometry"] as? [String: Any])?["coordinates"] as? [Double] }
        let centres = (data["places"] as? [[String: Any]] ?? []).compactMap { p in (p["lon"] as? Double).flatMap { lon in (p["lat"] as? Double).map { [lon, $0] } } }
        #expect(points.count == 3 && zip(points, centres).allSatisfy { abs($0[0] - $1[0]) < 1e-6 && abs($0[1] - $1[1]) < 1e-6 }, "\(points) \(centres)")
    }
}
