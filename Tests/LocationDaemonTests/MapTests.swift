import Foundation
import LocationCore
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

        try FileManager.default.createDirectory(at: Self.artifacts, withIntermediateDirectories: true)
        let shot = Self.artifacts.appendingPathComponent("map-day.png")
        try? FileManager.default.removeItem(at: shot)
        _ = try Self.chromium("--screenshot=\(shot.path)", page, in: dir)
        let png = try Data(contentsOf: shot)
        #expect(png.count > 5_000 && png.starts(with: [0x89, 0x50, 0x4E, 0x47]), "screenshot of \(png.count) bytes")
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
}
