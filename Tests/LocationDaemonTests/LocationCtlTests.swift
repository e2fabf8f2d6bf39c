import Foundation
import LocationCore
import LocationProtocol
import NMEA
import Testing

/// `locationctl replay` as a user runs it: the real executable, its NDJSON output parsed back.
@Suite(.timeLimit(.minutes(5))) struct LocationCtlReplayTests {
    static var locationctl: URL { DaemonProcess.executable.deletingLastPathComponent().appendingPathComponent("locationctl") }

    /// Runs locationctl (or `executable`) to its exit (`runToExit`).
    static func run(_ arguments: [String], environment: [String: String?] = [:], timeout: Double = 60,
                    executable: URL? = nil, directory: URL? = nil) throws
        -> (status: Int32, out: String, err: String) {
        try runToExit(executable ?? locationctl, arguments, environment: environment, directory: directory, timeout: timeout)
    }

    @Test func replayPrintsWhatTheEngineDelivers() throws {
        let log = DaemonEndToEndTests.walk(count: 200, startSecond: 0)
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ctl-\(UUID().uuidString.prefix(8)).nmea")
        try Data(log.bytes).write(to: path)
        defer { try? FileManager.default.removeItem(at: path) }

        let result = try Self.run(["replay", path.path, "--distance-filter", "40"])
        #expect(result.status == 0, "\(result.err)")
        let messages = try result.out.split(separator: "\n").map { try ServerMessage.decode(String($0)) }
        // 1.3 m per epoch under a 40 m filter: every 31st fix (40.3 m) from the first.
        let expected = stride(from: 0, to: log.fixes.count, by: 31).map { log.fixes[$0].time }
        #expect(messages.fixes.map(\.time) == expected)
        #expect(messages.states == [.disconnected, .connected, .fix, .disconnected])

        let onlyLocations = try Self.run(["replay", path.path, "--distance-filter", "40", "--events", "location"])
        #expect(onlyLocations.out.split(separator: "\n").count == expected.count)
    }

    /// `evaluate --dataset`: each listed track's log against its label file beside the list,
    /// the scores summed (a track's visits match only its own truth); '#' starts a comment.
    @Test func evaluateScoresADatasetTrackByTrack() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ctl-dataset-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: dir) }
        let logs = dir.appendingPathComponent("logs"), labels = dir.appendingPathComponent("set/labels")
        try FileManager.default.createDirectory(at: logs, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: labels, withIntermediateDirectories: true)
        for name in ["demo", "hike"] {
            let r = try Self.run(["simulate", name, "-o", logs.appendingPathComponent("\(name).nmea").path,
                                  "--truth", labels.appendingPathComponent("\(name).truth").path])
            #expect(r.status == 0, "\(r.err)")
        }
        try Data("# two tracks\ndemo  # the README's\n\nhike\n".utf8).write(to: dir.appendingPathComponent("set/all.list"))
        let r = try Self.run(["evaluate", "--dataset", dir.appendingPathComponent("set/all.list").path, "--logs", logs.path, "--verbose"])
        #expect(r.status == 0, "\(r.err)")
        #expect(r.out.contains("demo: true 3, detected 3, matched 3\nhike: true 5, detected 5, matched 5\n2 tracks\ntrue visits 8, detected 8, matched 8\n"), "\(r.out)")
    }

    /// A GGA/GLL-only log's positions: skipped with a warning naming `--date` (not printed as a
    /// "noFix" status each), fixes with it. The corpus has a real one (an echo sounder).
    @Test func replayOfAnUndatedLogWarnsAndTakesADate() throws {
        let body = "GPGLL,5119.881,N,00125.169,E,164326,A,D"
        let x = body.utf8.reduce(UInt8(0)) { $0 ^ $1 }
        let hex = Array("0123456789ABCDEF")
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ctl-undated-\(UUID().uuidString.prefix(8)).nmea")
        try Data("$\(body)*\(hex[Int(x >> 4)])\(hex[Int(x & 15)])\r\n".utf8).write(to: path)
        defer { try? FileManager.default.removeItem(at: path) }

        let undated = try Self.run(["replay", path.path])
        #expect(undated.status == 0)
        #expect(try undated.out.split(separator: "\n").map { try ServerMessage.decode(String($0)) }.states == [.disconnected, .connected, .disconnected])
        #expect(undated.err == "locationctl replay: warning: \(path.path): 1 position had no date (no RMC or ZDA sentence dated them: a GGA/GLL-only log, or the positions before its first date) and was not replayed; give the log's UTC date with --date YYYY-MM-DD\n")

        let dated = try Self.run(["replay", path.path, "--date", "2012-01-19"])
        #expect(dated.status == 0 && dated.err == "", "\(dated.err)")
        let messages = try dated.out.split(separator: "\n").map { try ServerMessage.decode(String($0)) }
        #expect(messages.fixes.map(\.time) == [CivilTime(year: 2012, month: 1, day: 19, hour: 16, minute: 43, second: 26).timestamp])

        let bad = try Self.run(["replay", path.path, "--date", "2012-13-01"])
        #expect(bad.status == 64)
        #expect(bad.err.hasPrefix("Error: --date '2012-13-01': there is no such day; expected a date as YYYY-MM-DD (UTC)\n"), "\(bad.err)")
    }

    /// `--as-gpsd` prints what the daemon sees through gpsd 3.22: for gr8013-w (a 2015 log with
    /// GST) gpsd's dates from its `.chk` (1024 weeks on) and its `eph` as the accuracy; without
    /// it, the log's own dates and the GST's accuracy.
    @Test(.enabled(if: GPSDHarness.corpusLog("gr8013-w") != nil, "gpsd corpus not found at ../shared/corpus/gpsd"))
    func replayAsGPSDPrintsGPSDsDatesAndAccuracy() throws {
        let log = try #require(GPSDHarness.corpusLog("gr8013-w"))
        var eph: [Timestamp: Double] = [:]  // gpsd's last TPV of each time
        for line in try String(contentsOf: URL(fileURLWithPath: log.path + ".chk"), encoding: .utf8).split(whereSeparator: \.isNewline)
        where line.hasPrefix("{\"class\":\"TPV\"") {
            let obj = try #require(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            guard let text = obj["time"] as? String, let e = obj["eph"] as? Double else { continue }
            eph[try #require(ISO8601.parse(text), "\(text)")] = e
        }
        try #require(!eph.isEmpty)
        let weeks1024 = Int64(619_315_200) * 1_000_000_000
        func fixes(_ extra: [String]) throws -> [Fix] {
            let r = try Self.run(["replay", log.path, "--events", "location"] + extra)
            #expect(r.status == 0, "\(r.err)")
            return try r.out.split(separator: "\n").map { try ServerMessage.decode(String($0)) }.fixes
        }
        let asGPSD = try fixes(["--as-gpsd"])
        #expect(asGPSD.count >= eph.count - 1, "gpsd never reports the log's last epoch")
        for fix in asGPSD {
            let gpsd = try #require(eph[fix.time], "\(fix.time): no gpsd TPV at this time")
            #expect(abs((fix.horizontalAccuracy ?? -1) - gpsd) < 0.0015, "\(fix.time): ours \(fix.horizontalAccuracy ?? -1), gpsd's eph \(gpsd)")
        }
        let own = try fixes([])
        #expect(own.map(\.time.nanoseconds) == asGPSD.map { $0.time.nanoseconds - weeks1024 })
        #expect(own.allSatisfy { eph[$0.time] == nil })
        #expect(zip(own, asGPSD).allSatisfy { $0.horizontalAccuracy != $1.horizontalAccuracy }, "the GST's σ gives the accuracy")
    }

    /// A bad flag is a usage error (64, with the usage); a missing log is not (1, its reason
    /// alone, and nothing on standard output: the log is opened before the subscription's first
    /// status).
    @Test func badOptionsAndMissingFilesAreClearErrors() throws {
        let bad = try Self.run(["replay", "/nonexistent.nmea", "--distance-filter=-5"])
        #expect(bad.status == 64)
        #expect(bad.err.contains("--distance-filter -5 is out of range"))
        #expect(bad.err.contains("Usage: locationctl replay"), "\(bad.err)")
        let missing = try Self.run(["replay", "/nonexistent.nmea"])
        #expect(missing.status == 1, "\(missing.err)")
        #expect(missing.err == "Error: /nonexistent.nmea: cannot open NMEA log: No such file or directory\n", "\(missing.err)")
        #expect(missing.out == "")
    }

    /// Failures at run time exit 1 with the reason and no usage; bad flags and values exit 64
    /// with the usage, found before anything is opened.
    @Test func runtimeFailuresAreNotUsageErrors() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ctl-fail-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try Data("not json".utf8).write(to: dir.appendingPathComponent("bad.json"))
        try Data("{\n \"type\": \"FeatureCollection\",\n \"features\": [,]\n}\n".utf8).write(to: dir.appendingPathComponent("broken.geojson"))
        let feature = #"{"type":"Feature","geometry":{"type":"Point","coordinates":[13.4,52.5]},"properties":{"id":"x""#
        try Data(#"{"type":"FeatureCollection","features":[\#(feature),"radius":5}}]}"#.utf8).write(to: dir.appendingPathComponent("small.geojson"))
        try Data(#"{"type":"FeatureCollection","features":[\#(feature)}}]}"#.utf8).write(to: dir.appendingPathComponent("noradius.geojson"))
        func geometry(_ text: String) -> Data {
            Data(#"{"type":"FeatureCollection","features":[{"type":"Feature","geometry":\#(text),"properties":{"id":"x","radius":50}}]}"#.utf8)
        }
        try geometry(#"{"type":"Point","coordinates":[13.4,"52.5"]}"#).write(to: dir.appendingPathComponent("quoted.geojson"))
        try geometry(#"{"type":"Polygon","coordinates":[[[0,0],[1,0],[1,1],[0,0]]]}"#).write(to: dir.appendingPathComponent("polygon.geojson"))
        try geometry("null").write(to: dir.appendingPathComponent("nogeometry.geojson"))
        try geometry(#"{"type":"Point","coordinates":[-33.9,151.2]}"#).write(to: dir.appendingPathComponent("swapped.geojson"))
        try geometry(#"{"type":"Point","coordinates":[181,95]}"#).write(to: dir.appendingPathComponent("farout.geojson"))
        // Metadata deeper than a request line can carry: the daemon could not parse the request,
        // refused it without its id, and the import waited 10 s for a reply that never came.
        let deep = String(repeating: "[", count: 14) + String(repeating: "]", count: 14)
        try Data(#"{"type":"FeatureCollection","features":[\#(feature),"radius":50,"metadata":\#(deep)}}]}"#.utf8).write(to: dir.appendingPathComponent("deep.geojson"))
        try Data(#"{"type":"FeatureCollection","features":[{"type":"Polygon","geometry":{"type":"Point","coordinates":[13.4,52.5]},"properties":{"id":"x","radius":50}}]}"#.utf8)
            .write(to: dir.appendingPathComponent("notafeature.geojson"))
        try Data(#"{"type":"FeatureCollection","features":[{"type":"Feature","geometry":{"type":"Point","coordinates":[13.4,52.5]},"properties":null}]}"#.utf8)
            .write(to: dir.appendingPathComponent("noproperties.geojson"))
        // Not a FeatureCollection: what it is instead, and how to make it one.
        try Data(#"{"type":"Point","coordinates":[13.4,52.5]}"#.utf8).write(to: dir.appendingPathComponent("bare.geojson"))
        try Data(#"{"type":"Polygon","coordinates":[[[13.4,52.5],[13.5,52.5],[13.4,52.6],[13.4,52.5]]]}"#.utf8).write(to: dir.appendingPathComponent("area.geojson"))
        try Data(#"{"type":"Feature","geometry":{"type":"Point","coordinates":[13.4,52.5]},"properties":{"id":"x","radius":50}}"#.utf8)
            .write(to: dir.appendingPathComponent("single.geojson"))
        // A property a letter or two from a region's is refused (ignored, the region would be
        // registered with the default, notifyOnEntry true, silently). Others are the file's own.
        let foreign = #""name":"Home","stroke":"red","marker-color":"blue","title":"t","description":"d","date":"2024-05-01","radius_km":1,"_id":"x","ID":7,"radius_m":50"#
        try Data(#"{"type":"FeatureCollection","features":[\#(feature),"radius":50,\#(foreign),"notifyOnEnter":false}}]}"#.utf8)
            .write(to: dir.appendingPathComponent("typo.geojson"))
        try Data(#"{"type":"FeatureCollection","features":[\#(feature),"radius":50,\#(foreign),"notify_on_exit":false}}]}"#.utf8)
            .write(to: dir.appendingPathComponent("snake.geojson"))
        try Data(#"{"type":"FeatureCollection","features":[\#(feature),"radius":50,\#(foreign),"notifyOnEntry":false,"state":"inside"}}]}"#.utf8)
            .write(to: dir.appendingPathComponent("foreign.geojson"))
        let accepted = try Self.run(["replay", "/dev/null", "--regions", "foreign.geojson"], directory: dir)
        #expect(accepted.status == 0, "\(accepted.err)")
        let runtime: [([String], String)] = [
            (["regions", "import", "typo.geojson"],
             #"Error: typo.geojson: features[0].properties: "notifyOnEnter" is no region property; did you mean "notifyOnEntry"? Rename it: as written it is ignored and the region registered without it (properties a region does not take, such as name or stroke, are ignored)"#),
            (["replay", "-", "--regions", "snake.geojson"], #"Error: snake.geojson: features[0].properties: "notify_on_exit" is no region property; did you mean "notifyOnExit"?"#),
            (["evaluate", "nosuch"], "no scenario 'nosuch'"),
            (["simulate", "nosuch"], "no scenario 'nosuch'"),
            // JSON that does not parse: where, as line and column.
            (["simulate", "bad.json"], "Error: bad.json:1:1: not JSON: invalid literal; expected null\n"),
            (["regions", "import", "broken.geojson"], "Error: broken.geojson:3:15: not JSON: unexpected ','; expected a value\n"),
            (["simulate", "demo", "--output", "/nonexistent/demo.nmea"], "/nonexistent/demo.nmea: cannot write: No such file or directory"),
            (["evaluate", "--log", "missing.nmea", "--truth", "missing.truth"], "missing.nmea: cannot open NMEA log: No such file or directory"),
            (["evaluate", "--dataset", "missing.list", "--logs", "."], "missing.list: cannot open dataset list: No such file or directory"),
            (["replay", "-", "--regions", "missing.geojson"], "missing.geojson: cannot open GeoJSON file: No such file or directory"),
            (["regions", "import", "missing.geojson"], "missing.geojson: cannot open GeoJSON file: No such file or directory"),
            // Named by the feature, not by the request the daemon would have been sent (regions[0]).
            (["regions", "import", "small.geojson"], "Error: small.geojson: features[0].properties: region x: radius 5 is out of range; expected 10…100000 metres\n"),
            (["regions", "import", "noradius.geojson"], "Error: noradius.geojson: features[0].properties (x) has no radius\n"),
            // What the geometry has instead of a Point's two numbers, one message for each.
            (["regions", "import", "quoted.geojson"],
             "Error: quoted.geojson: features[0]: geometry.coordinates[1] (latitude) must be a number, not the string \"52.5\": write it without quotes\n"),
            (["regions", "import", "polygon.geojson"], "Error: polygon.geojson: features[0]: geometry is a Polygon; expected a Point with [longitude, latitude]"),
            (["replay", "-", "--regions", "nogeometry.geojson"], "Error: nogeometry.geojson: features[0]: geometry is null; expected a Point"),
            // A coordinate out of range is the geometry's, not the properties'.
            (["regions", "import", "swapped.geojson"],
             "Error: swapped.geojson: features[0]: geometry.coordinates[1] (latitude) is 151.2; expected -90…90 (GeoJSON order is [longitude, latitude]: swapped?)\n"),
            (["replay", "-", "--regions", "farout.geojson"],
             "Error: farout.geojson: features[0]: geometry.coordinates[0] (longitude) is 181; expected -180…180 (GeoJSON order is [longitude, latitude])\n"),
            (["regions", "import", "deep.geojson"],
             "Error: deep.geojson: features[0].properties (x): metadata is nested 14 levels deep; at most 13 (a protocol line holds 16, 3 of them around a region's metadata)\n"),
            (["regions", "import", "notafeature.geojson"], #"Error: notafeature.geojson: features[0]: type is "Polygon"; expected "Feature""#),
            (["regions", "import", "bare.geojson"],
             #"Error: bare.geojson: expected a GeoJSON FeatureCollection with a features array; found a bare Point geometry: make it a Feature's geometry ({"type":"Feature","geometry":…,"properties":{…}}) and put it in one: {"type":"FeatureCollection","features":[…]}"#),
            (["regions", "import", "area.geojson"],
             "Error: area.geojson: expected a GeoJSON FeatureCollection with a features array; found a bare Polygon geometry: a region is a Feature with a Point geometry (its centre) and properties.radius (metres), in a FeatureCollection\n"),
            (["replay", "-", "--regions", "single.geojson"],
             #"Error: single.geojson: expected a GeoJSON FeatureCollection with a features array; found a single Feature: put it in one: {"type":"FeatureCollection","features":[…]}"#),
            (["regions", "import", "noproperties.geojson"],
             "Error: noproperties.geojson: features[0]: properties is null; a region needs an object with radius (metres), and id unless the feature has one\n"),
        ]
        for (arguments, message) in runtime {
            let r = try Self.run(arguments, directory: dir)
            #expect(r.status == 1, "\(arguments): \(r.err)")
            #expect(r.err.hasPrefix("Error: ") && r.err.contains(message), "\(arguments): \(r.err)")
            #expect(!r.err.contains("Usage") && !r.err.contains("USAGE"), "\(arguments): \(r.err)")
            #expect(r.out == "", "\(arguments): \(r.out)")
        }
        let usage: [([String], String)] = [
            (["evaluate"], "give either a SCENARIO, --log LOG --truth TRUTH, or --dataset LIST --logs DIR"),
            (["evaluate", "--dataset", "dev.list"], "--dataset and --logs go together"),
            // Not a zero score with exit 0.
            (["evaluate", "demo", "--radius", "nan"], "--radius nan is out of range; expected more than 0 and at most 100000 metres"),
            (["evaluate", "demo", "--radius=-5"], "--radius -5 is out of range; expected more than 0 and at most 100000 metres"),
            (["evaluate", "demo", "--dwell", "inf"], "--dwell inf is out of range; expected 0…604800 seconds"),
            (["replay", "missing.nmea", "--accuracy", "fuzzy"], "--accuracy 'fuzzy': expected precise or approximate"),
            (["replay", "missing.nmea", "--max-active", "0"], "--max-active '0': expected a number ≥ 1 or unlimited"),
            (["replay", "missing.nmea", "--pauses-when-stationary", "--activity-type", "boat"], "--activity-type 'boat': expected automotive, fitness or other"),
            (["watch", "--activity-type", "boat"], "--activity-type 'boat': expected automotive, fitness or other"),
            (["simulate", "--seed", "x"], "--seed"),
            (["regions", "remove"], "give region ids or --all"),
            // Checked before connecting, as the daemon would: a NaN was sent as null ("has no latitude").
            (["regions", "add", "x", "--latitude", "nan", "--longitude", "0", "--radius", "50"],
             "region x: latitude nan is out of range; expected -90…90 degrees"),
            (["regions", "add", "x", "--latitude", "1", "--longitude", "0", "--radius", "5"],
             "region x: radius 5 is out of range; expected 10…100000 metres"),
            (["regions", "add", "", "--latitude", "1", "--longitude", "0", "--radius", "50"], "region id must be 1…256 bytes"),
            (["watch", "--events", "location,foo"], "unknown event type 'foo'; expected location, visits or significant\n"),
            (["watch", "--events", "status"], "status events always come"),
            // Not an exit 0 after the subscribed reply, before any location.
            (["watch", "--count", "0"], "--count 0 is out of range; expected at least 1 location event"),
            (["watch", "--count=-2"], "--count -2 is out of range; expected at least 1 location event"),
            // Not a crash converting the deadline to milliseconds.
            (["watch", "--wait", "nan"], "--wait nan is out of range; expected 0…86400 seconds"),
            (["watch", "--wait", "1e300"], "--wait 1e+300 is out of range; expected 0…86400 seconds"),
            // A negative value after a space: the range, not "Missing value for '--distance-filter'".
            (["replay", "missing.nmea", "--distance-filter", "-5"], "--distance-filter -5 is out of range; expected 0…"),
            (["replay", "missing.nmea", "--desired-accuracy", "-5"], "--desired-accuracy -5 is out of range; expected "),
            (["watch", "--minimum-interval", "-1"], "--minimum-interval -1 is out of range; expected 0…"),
        ]
        for (arguments, message) in usage {
            let r = try Self.run(arguments, directory: dir)
            #expect(r.status == 64, "\(arguments): \(r.err)")
            #expect(r.err.contains(message) && r.err.contains("Usage: locationctl \(arguments[0])"), "\(arguments): \(r.err)")
            #expect(r.out == "", "\(arguments): \(r.out)")
        }
    }
}

/// Bundled scenarios by name outside a checkout: an installed locationctl finds them in
/// ../share/locationd/scenarios from its own directory (`make install`'s $(DATADIR)/locationd/
/// scenarios), and an unknown name lists where it looked.
@Suite(.timeLimit(.minutes(5))) struct LocationCtlScenarioTests {
    @Test func anInstalledLocationctlFindsTheInstalledScenarios() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("ctl-prefix-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: root) }
        let bin = root.appendingPathComponent("bin"), scenarios = root.appendingPathComponent("share/locationd/scenarios")
        let elsewhere = root.appendingPathComponent("elsewhere")
        for dir in [bin, scenarios, elsewhere] { try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true) }
        // A copy, not a link: the executable's own path (/proc/self/exe) is what is resolved.
        let locationctl = bin.appendingPathComponent("locationctl")
        try FileManager.default.copyItem(at: LocationCtlReplayTests.locationctl, to: locationctl)
        try FileManager.default.copyItem(at: ConfigTests.repo.appendingPathComponent("Scenarios/delivery.json"),
                                         to: scenarios.appendingPathComponent("delivery.json"))

        let truth = elsewhere.appendingPathComponent("delivery.truth")
        let found = try LocationCtlReplayTests.run(["simulate", "delivery", "--output", "/dev/null", "--truth", truth.path],
                                                   executable: locationctl, directory: elsewhere)
        #expect(found.status == 0, "\(found.err)")
        let expected = try LocationCtlReplayTests.run(["simulate", "Scenarios/delivery.json", "--output", "/dev/null", "--truth", "/dev/stdout"],
                                                      directory: ConfigTests.repo)
        #expect(try String(contentsOf: truth, encoding: .utf8) == expected.out)

        let unknown = try LocationCtlReplayTests.run(["evaluate", "nosuch"], executable: locationctl, directory: elsewhere)
        #expect(unknown.status == 1, "\(unknown.err)")
        // Where it looked (symbolic links in the temporary path resolved, as /proc/self/exe has them).
        let installed = scenarios.resolvingSymlinksInPath().path
        #expect(unknown.err == "Error: no scenario 'nosuch': no file 'nosuch', and no nosuch.json in ./Scenarios or \(installed) (where make install puts the bundled ones); give a scenario file's path or one of: delivery, demo\n",
                "\(unknown.err)")
    }
}

/// `locationctl help SUBCOMMAND` reads as written: a discussion's hard-wrapped source lines
/// are one paragraph (they came out as lines of one or two words), and no option states its
/// default twice (ArgumentParser appends `(default: …)` itself).
@Suite struct LocationCtlHelpTests {
    static let subcommands = [["watch"], ["status"], ["replay"], ["simulate"], ["evaluate"], ["regions", "add"],
                              ["regions", "remove"], ["regions", "import"], ["places"], ["visits"], ["map"], ["gazetteer", "build"], ["policy", "check"], ["reload"]]

    @Test func discussionsAreParagraphsAndDefaultsAreSaidOnce() throws {
        for command in Self.subcommands {
            let help = try LocationCtlReplayTests.run(["help"] + command)
            #expect(help.status == 0, "\(command): \(help.err)")
            let lines = help.out.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            // OVERVIEW, a blank line, the discussion's paragraphs, USAGE: every line of a
            // paragraph but its last is filled (ArgumentParser wraps at 80 columns).
            if let usage = lines.firstIndex(where: { $0.hasPrefix("USAGE:") }),
               let blank = lines.firstIndex(of: ""), blank < usage {
                let body = Array(lines[(blank + 1)..<usage])
                for (i, line) in body.enumerated() where i + 1 < body.count && !body[i + 1].isEmpty && !line.isEmpty {
                    #expect(line.count >= 60, "\(command): a short line inside a paragraph: '\(line)'\n\(help.out)")
                }
            }
            // Each option's entry (its first line and the indented ones after it).
            var entries: [String] = []
            for line in lines {
                if line.hasPrefix("  -") || line.hasPrefix("  <") { entries.append(line) }
                else if line.hasPrefix("      "), !entries.isEmpty { entries[entries.count - 1] += " " + line }
            }
            for entry in entries {
                #expect(entry.components(separatedBy: "default").count <= 2, "\(command): \(entry)")
            }
        }
    }

    /// The top-level help lists every exit status, as README.md does (75 was missing).
    @Test func topLevelHelpListsTheExitStatuses() throws {
        let help = try LocationCtlReplayTests.run(["--help"])
        #expect(help.status == 0, "\(help.err)")
        let text = help.out.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        for status in ["0 on success", "1 for a failure at run time", "64 for a usage error", "78 when the file is missing or invalid",
                       "75 when a policy user or group could not be looked up for now"] {
            #expect(text.contains(status), "\(status)\n\(help.out)")
        }
    }
}

/// `locationctl replay --regions` runs the same engine path as the daemon and prints region events.
@Suite(.timeLimit(.minutes(5))) struct LocationCtlRegionReplayTests {
    @Test func replayWithRegionsPrintsRegionEventsIdenticallyCappedAndUnlimited() throws {
        let log = DaemonEndToEndTests.walk(count: 300, startSecond: 0)  // 1.3 m/s north, 390 m
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ctl-regions-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try Data(log.bytes).write(to: dir.appendingPathComponent("walk.nmea"))
        // 30 regions of 40 m along the walk (one every 12 m northwards): cap 3 must rotate.
        let start = log.fixes[0].coordinate
        var features: [String] = []
        for i in 0..<30 {
            let lat = start.latitude + (60 + 10 * Double(i)) / 111_195.0
            features.append(#"{"type":"Feature","geometry":{"type":"Point","coordinates":[\#(start.longitude),\#(lat)]},"properties":{"id":"r\#(i)","radius":15}}"#)
        }
        let geojson = #"{"type":"FeatureCollection","features":["# + features.joined(separator: ",") + "]}"
        try Data(geojson.utf8).write(to: dir.appendingPathComponent("regions.geojson"))

        let capped = try LocationCtlReplayTests.run(["replay", dir.appendingPathComponent("walk.nmea").path,
                                                     "--regions", dir.appendingPathComponent("regions.geojson").path, "--max-active", "3"])
        let unlimited = try LocationCtlReplayTests.run(["replay", dir.appendingPathComponent("walk.nmea").path,
                                                        "--regions", dir.appendingPathComponent("regions.geojson").path, "--max-active", "unlimited"])
        #expect(capped.status == 0, "\(capped.err)")
        #expect(capped.out == unlimited.out)
        let events = try capped.out.split(separator: "\n").map { try ServerMessage.decode(String($0)) }
        let kinds = events.compactMap { if case .region(let e) = $0 { e.kind } else { nil } }
        #expect(kinds.count == events.count)
        #expect(kinds.filter { $0 == .enter }.count >= 20, "\(capped.out)")

        let bad = try LocationCtlReplayTests.run(["replay", dir.appendingPathComponent("walk.nmea").path, "--regions", "/nonexistent.geojson"])
        #expect(bad.status == 1, "\(bad.err)")
        #expect(bad.err.contains("/nonexistent.geojson: cannot open GeoJSON file: No such file or directory"), "\(bad.err)")
    }

    /// RFC 7946 gives a Feature an `id` of its own: it names the region when `properties.id` is
    /// absent or null.
    @Test func theFeaturesOwnIDNamesTheRegionWhenPropertiesHaveNone() throws {
        let log = DaemonEndToEndTests.walk(count: 30, startSecond: 0)
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ctl-featureid-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try Data(log.bytes).write(to: dir.appendingPathComponent("walk.nmea"))
        let c = log.fixes[0].coordinate
        let point = #"{"type":"Point","coordinates":[\#(c.longitude),\#(c.latitude)]}"#
        let features = [
            #"{"type":"Feature","id":"gate","geometry":\#(point),"properties":{"radius":100,"notifyInitialState":true}}"#,
            #"{"type":"Feature","id":7,"geometry":\#(point),"properties":{"id":null,"radius":100,"notifyInitialState":true}}"#,
            #"{"type":"Feature","id":"ignored","geometry":\#(point),"properties":{"id":"own","radius":100,"notifyInitialState":true}}"#,
        ]
        try Data((#"{"type":"FeatureCollection","features":["# + features.joined(separator: ",") + "]}").utf8)
            .write(to: dir.appendingPathComponent("regions.geojson"))
        let run = try LocationCtlReplayTests.run(["replay", dir.appendingPathComponent("walk.nmea").path,
                                                  "--regions", dir.appendingPathComponent("regions.geojson").path])
        #expect(run.status == 0, "\(run.err)")
        let ids = try run.out.split(separator: "\n").compactMap { line -> String? in
            if case .region(let e) = try ServerMessage.decode(String(line)) { e.region } else { nil }
        }
        #expect(Set(ids) == ["gate", "7", "own"], "\(run.out)")
    }
}
