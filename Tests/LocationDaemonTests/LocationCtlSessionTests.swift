import Foundation
import LocationClient
import LocationCore
import LocationProtocol
import TestSupport
import Testing

/// `locationctl status` and `locationctl watch --session/--purpose` as a user runs them: the
/// real executable against the real daemon.
@Suite(.serialized, .timeLimit(.minutes(5))) struct LocationCtlSessionTests {
    static var locationctl: String { LocationCtlReplayTests.locationctl.path }

    /// A daemon whose policy gives `locationctl` (by executable) `rule`; everything else here
    /// (the test runs as root) falls to the built-in owner rule.
    static func daemon(rule: String, arguments: [String] = ["--gpsd", "127.0.0.1:1"]) async throws -> DaemonProcess {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ctl-session-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let config = dir.appendingPathComponent("locationd.toml")
        try "[policy.ctl]\nexecutable = \"\(locationctl)\"\n\(rule)".write(to: config, atomically: true, encoding: .utf8)
        let d = try DaemonProcess(arguments: ["--config", config.path] + arguments, directory: dir)
        try await d.connect().close()  // waits for the socket
        return d
    }

    @Test func statusPrintsEveryConnectionAsATable() async throws {
        let daemon = try DaemonProcess(arguments: ["--gpsd", "127.0.0.1:1"])
        defer { daemon.stop() }
        let navigator = try await daemon.connect()
        defer { navigator.close() }
        let weather = try await daemon.connect()
        defer { weather.close() }
        try await navigator.startSession(.always)
        try await navigator.subscribe()
        try await weather.startSession(.whenInUse, purpose: "radar")
        let me = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path

        let text = try LocationCtlReplayTests.run(["status", "--socket", daemon.socketPath])
        #expect(text.status == 0, "\(text.err)")
        let lines = text.out.split(separator: "\n").map(String.init)
        #expect(lines.contains("sessions:     2") && lines.contains("subscribers:  1") && lines.contains("receiver:     watching"), "\(text.out)")
        #expect(lines.contains("regions:      0 registered by this program"), "\(text.out)")
        // The probe DaemonProcess.connect opened may still be closing: count the rows instead.
        let header = try #require(lines.firstIndex { $0.hasPrefix("conn  ") }, "\(text.out)")
        #expect(lines[header].split(separator: " ", omittingEmptySubsequences: true)
            == ["conn", "pid", "uid", "program", "rule", "grant", "subscribed"])
        let rows = lines[(header + 1)...].prefix { !$0.hasPrefix("* ") }.map {
            $0.split(separator: "  ", omittingEmptySubsequences: true).map { $0.trimmingCharacters(in: .whitespaces) }
        }
        let owner = "owner (built in: root and the daemon's user)"
        #expect(rows.contains { $0.count == 7 && $0[2] == "0" && $0[3] == me && $0[4] == owner && $0[5] == "always precise" && $0[6] == "yes" },
                "\(text.out)")
        #expect(rows.contains { $0.count == 7 && $0[3] == me && $0[5] == "when-in-use precise (purpose radar)" && $0[6] == "no" },
                "\(text.out)")
        let mine = rows.filter { $0.first?.hasSuffix("*") == true }
        #expect(mine.count == 1 && mine.first?[3] == Self.locationctl && mine.first?[5] == "no session", "\(text.out)")
        #expect(lines.last == "* this connection")
        #expect(lines.contains("connections:  \(rows.count)"), "\(text.out)")

        let json = try LocationCtlReplayTests.run(["status", "--socket", daemon.socketPath, "--json"])
        #expect(json.status == 0, "\(json.err)")
        #expect(json.out.hasSuffix("}\n") && json.out.split(separator: "\n").count == 1, "\(json.out)")
        guard case .statusReply(let reply) = try ServerMessage.decode(String(json.out.dropLast())) else { Issue.record("not a status reply: \(json.out)"); return }
        #expect(reply.connectionsShown == .all && reply.connections?.count == reply.connected)
        let own = try #require(reply.connections?.first { $0.isSelf })
        #expect(own.executable == Self.locationctl && own.session == nil && own.pid != getpid())
    }

    @Test func watchOpensTheRequestedSessionAndNamesARefusal() async throws {
        let log = DaemonEndToEndTests.walk(count: 30, startSecond: 0)
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("ctl-watch-\(UUID().uuidString.prefix(8)).nmea")
        try Data(log.bytes).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        // The replay starts at the first subscription, so refusals (which never subscribe) leave it whole.
        let daemon = try await Self.daemon(
            rule: "authorization = \"when-in-use\"\naccuracy = \"approximate\"\npurposes = [\"nav\"]\n",
            arguments: ["--replay", file.path, "--speed", "0"])
        defer { daemon.stop() }

        let spy = try LocationCtlReplayTests.run(["watch", "--socket", daemon.socketPath, "--session", "always", "--purpose", "spy"])
        #expect(spy.status == 1)
        #expect(spy.err.contains("locationd refused the session (--session always --purpose spy): fullAccuracyDenied: purpose 'spy' is not allowed by rule 'ctl'; allowed: nav"),
                "\(spy.err)")
        #expect(spy.out.isEmpty, "\(spy.out)")
        let region = try LocationCtlReplayTests.run(["watch", "--socket", daemon.socketPath, "--events", "location,region"])
        #expect(region.status == 64 && region.err.contains("--events region: watch subscribes to location, visits or significant"), "\(region.err)")
        let typo = try LocationCtlReplayTests.run(["watch", "--socket", daemon.socketPath, "--session", "sometimes"])
        #expect(typo.status == 64)
        #expect(typo.err.contains("--session must be when-in-use or always, not 'sometimes'"), "\(typo.err)")

        // always under a when-in-use rule is capped, not refused; the purpose makes it precise.
        let watch = try LocationCtlReplayTests.run(["watch", "--socket", daemon.socketPath, "--session", "always", "--purpose", "nav",
                                                    "--json", "--count", "\(log.fixes.count)"])
        #expect(watch.status == 0, "\(watch.err)")
        #expect(!watch.out.contains("\n\n") && watch.out.hasSuffix("}\n"), "NDJSON: one message per line, no blank lines")
        let messages = try watch.out.split(separator: "\n").map { try ServerMessage.decode(String($0)) }
        guard case .session(let grant) = messages.first else { Issue.record("no session line: \(watch.out)"); return }
        #expect(grant.state == .active && grant.requested == .always && grant.authorization == .whenInUse)
        #expect(grant.accuracy == .precise && grant.temporaryPrecise && grant.rule == "ctl")
        #expect(grant.reason == "requested always, rule 'ctl' allows at most when-in-use; purpose 'nav' allows precise for this session")
        // Every fix of the log, as it is: an approximate session would get one cell centre per 10 minutes.
        #expect(messages.fixes.map(\.time) == log.fixes.map(\.time))
        for (got, sent) in zip(messages.fixes, log.fixes) {
            #expect(abs(got.coordinate.latitude - sent.coordinate.latitude) < 1e-8 && got.altitudeMSL != nil)
        }
    }

    /// A reload that revokes the session ends `watch` with the daemon's reason (rather than
    /// waiting forever, printing nothing); a reload that only changes it is printed.
    @Test func watchEndsWhenAReloadEndsItsSession() async throws {
        let daemon = try await Self.daemon(rule: "authorization = \"always\"\n")
        defer { daemon.stop() }
        let config = daemon.directory.appendingPathComponent("locationd.toml")
        let watch = Process()
        watch.executableURL = URL(fileURLWithPath: Self.locationctl)
        watch.arguments = ["watch", "--socket", daemon.socketPath]
        let out = Pipe(), err = Pipe()
        watch.standardOutput = out
        watch.standardError = err
        try watch.run()
        defer { if watch.isRunning { watch.terminate() } }
        // A hang fails, not waits: the watchdog ends watch, which ends its output (and the reads).
        let watchdog = Task { try await Task.sleep(for: .seconds(30)); watch.terminate() }
        defer { watchdog.cancel() }
        var text = ""
        func waitFor(_ needle: String) -> Bool {
            while !text.contains(needle) {
                let chunk = out.fileHandleForReading.availableData  // blocks until output or EOF
                if chunk.isEmpty { return false }
                text += String(decoding: chunk, as: UTF8.self)
            }
            return true
        }
        try #require(waitFor("subscribed"), "\(text)")
        try "[policy.ctl]\nexecutable = \"\(Self.locationctl)\"\nauthorization = \"when-in-use\"\naccuracy = \"approximate\"\n"
            .write(to: config, atomically: true, encoding: .utf8)
        daemon.signal(SIGHUP)
        try #require(waitFor("session changed"), "\(text)")
        #expect(text.contains("session changed: when-in-use, approximate"), "\(text)")
        try "[policy.ctl]\nexecutable = \"\(Self.locationctl)\"\nauthorization = \"denied\"\n".write(to: config, atomically: true, encoding: .utf8)
        daemon.signal(SIGHUP)
        watch.waitUntilExit()
        watchdog.cancel()
        let stderr = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(watch.terminationStatus == 1, "\(stderr)")
        #expect(stderr.contains("locationd ended the session: policy rule 'ctl'"), "\(stderr)")
    }

    /// The daemon stopping ends `watch` with exit status 1 and says so, also with `--json` (not 0,
    /// as if it had done what it was asked).
    @Test func watchFailsWhenTheDaemonGoesAway() async throws {
        let daemon = try await Self.daemon(rule: "authorization = \"always\"\n")
        defer { daemon.stop() }
        let watch = Process()
        watch.executableURL = URL(fileURLWithPath: Self.locationctl)
        watch.arguments = ["watch", "--socket", daemon.socketPath, "--json"]
        let out = Pipe(), err = Pipe()
        watch.standardOutput = out
        watch.standardError = err
        try watch.run()
        defer { if watch.isRunning { watch.terminate() } }
        // A hang fails, not waits: the watchdog ends watch, which ends its output (and the reads).
        let watchdog = Task { try await Task.sleep(for: .seconds(30)); watch.terminate() }
        defer { watchdog.cancel() }
        var text = ""
        while !text.contains("\"subscribed\"") {
            let chunk = out.fileHandleForReading.availableData  // blocks until output or EOF
            if chunk.isEmpty { break }
            text += String(decoding: chunk, as: UTF8.self)
        }
        try #require(text.contains("\"subscribed\""), "\(text)")
        daemon.stop()
        watch.waitUntilExit()
        watchdog.cancel()
        let stderr = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(watch.terminationReason == .exit && watch.terminationStatus == 1, "\(stderr)")
        #expect(stderr.contains("locationd closed the connection"), "\(stderr)")
    }

    /// `regions list` prints an id with a control character (C0, DEL, C1) or a leading quote
    /// quoted, with escapes: a tab or newline broke its columns and lines, an escape reached the
    /// terminal (the daemon accepts any id of 1…256 bytes without NUL).
    @Test func regionsListQuotesAnIDWithControlCharacters() async throws {
        let daemon = try await Self.daemon(rule: "authorization = \"always\"\naccuracy = \"precise\"\n")
        defer { daemon.stop() }
        for id in ["plain", "tab\tnew\nline", "esc\u{1B}[31m", "csi\u{9B}31m", "\"quoted\""] {
            let added = try LocationCtlReplayTests.run(["regions", "add", id, "--latitude", "52.5", "--longitude", "13.4",
                                                        "--radius", "50", "--socket", daemon.socketPath])
            #expect(added.status == 0, "\(added.err)")
        }
        let listed = try LocationCtlReplayTests.run(["regions", "list", "--socket", daemon.socketPath])
        let lines = listed.out.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
        #expect(lines.count == 5, "\(listed.out)")
        #expect(lines.contains { $0.hasPrefix("plain  52.5,13.4  r=50 m") }, "\(listed.out)")
        #expect(lines.contains { $0.hasPrefix(#""tab\tnew\nline"  52.5,13.4"#) }, "\(listed.out)")
        #expect(lines.contains { $0.hasPrefix(#""esc\u001b[31m"  52.5,13.4"#) }, "\(listed.out)")
        #expect(lines.contains { $0.hasPrefix(#""csi\u009b31m"  52.5,13.4"#) }, "\(listed.out)")
        #expect(lines.contains { $0.hasPrefix(#""\"quoted\""  52.5,13.4"#) }, "\(listed.out)")
    }

    /// Regions need a precise always session; under a rule that is approximate but lists purpose
    /// keys, `--purpose` gets one (the regions commands had no way to pass it), and a refusal
    /// without it names the flag.
    @Test func regionsPassAPurposeForAPreciseSession() async throws {
        let daemon = try await Self.daemon(rule: "authorization = \"always\"\naccuracy = \"approximate\"\npurposes = [\"fleet\"]\n")
        defer { daemon.stop() }
        let add = ["regions", "add", "depot", "--latitude", "52.5", "--longitude", "13.4", "--radius", "50", "--socket", daemon.socketPath]
        let approximate = try LocationCtlReplayTests.run(add)
        #expect(approximate.status == 1, "\(approximate.err)")
        #expect(approximate.err == "Error: locationd refused region 'depot'; it was not registered: fullAccuracyDenied: region monitoring needs precise location; this session is approximate (rule 'ctl') (if the policy rule lists purpose keys, pass one with --purpose)\n",
                "\(approximate.err)")
        let added = try LocationCtlReplayTests.run(add + ["--purpose", "fleet"])
        #expect(added.status == 0 && added.out == "added 1; 1 registered\n", "\(added.out)\(added.err)")
        let listed = try LocationCtlReplayTests.run(["regions", "list", "--purpose", "fleet", "--socket", daemon.socketPath])
        #expect(listed.status == 0 && listed.out.hasPrefix("depot  52.5,13.4  r=50 m"), "\(listed.out)\(listed.err)")
        let spy = try LocationCtlReplayTests.run(["regions", "remove", "--all", "--purpose", "spy", "--socket", daemon.socketPath])
        #expect(spy.status == 1)
        #expect(spy.err == "Error: locationd refused the always session regions need (--purpose spy): fullAccuracyDenied: purpose 'spy' is not allowed by rule 'ctl'; allowed: fleet\n",
                "\(spy.err)")
    }

    /// The daemon refusing a region change is not a usage error: exit 1 and its reason, no usage.
    @Test func regionsRefusedByTheDaemonExitOneWithItsReason() async throws {
        let daemon = try await Self.daemon(rule: "authorization = \"always\"\naccuracy = \"precise\"\n")
        defer { daemon.stop() }
        let refused = try LocationCtlReplayTests.run(["regions", "remove", "nosuch", "--socket", daemon.socketPath])
        #expect(refused.status == 1, "\(refused.err)")
        #expect(refused.err.contains("locationd refused: unknownRegion: region nosuch is not registered"), "\(refused.err)")
        #expect(!refused.err.contains("USAGE"), "\(refused.err)")
        let typo = try LocationCtlReplayTests.run(["regions", "remove", "--socket", daemon.socketPath])
        #expect(typo.status == 64 && typo.err.contains("give region ids or --all"), "\(typo.err)")
    }

    /// A refused add says which regions were refused and whether any went in before: regions go
    /// 200 to a request, each all-or-nothing.
    @Test func refusedRegionsSayWhatWasRegistered() async throws {
        let daemon = try await Self.daemon(rule: "authorization = \"always\"\naccuracy = \"precise\"\n[regions]\nmax_registered = 200\n")
        defer { daemon.stop() }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ctl-add-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        func geojson(_ ids: [String]) throws -> String {
            let features = ids.map { #"{"type":"Feature","geometry":{"type":"Point","coordinates":[13.4,52.5]},"properties":{"id":"\#($0)","radius":50}}"# }
            let file = dir.appendingPathComponent("\(ids.count).geojson")
            try Data((#"{"type":"FeatureCollection","features":["# + features.joined(separator: ",") + "]}").utf8).write(to: file)
            return file.path
        }
        let many = try LocationCtlReplayTests.run(["regions", "import", try geojson((1...201).map { "r\($0)" }), "--socket", daemon.socketPath])
        #expect(many.status == 1, "\(many.err)")
        #expect(many.err.hasPrefix("Error: locationd refused region 201 ('r201') of 201; the 200 before it were registered: "), "\(many.err)")
        let listed = try LocationCtlReplayTests.run(["regions", "list", "--socket", daemon.socketPath])
        #expect(listed.out.split(separator: "\n").count == 200, "\(listed.err)")

        let two = try LocationCtlReplayTests.run(["regions", "import", try geojson(["a", "b"]), "--socket", daemon.socketPath])
        #expect(two.status == 1, "\(two.err)")
        #expect(two.err.hasPrefix("Error: locationd refused regions 1…2 of 2; none of the 2 were registered: "), "\(two.err)")
        let one = try LocationCtlReplayTests.run(["regions", "add", "home", "--latitude", "52.5", "--longitude", "13.4",
                                                  "--radius", "50", "--socket", daemon.socketPath])
        #expect(one.status == 1, "\(one.err)")
        #expect(one.err.hasPrefix("Error: locationd refused region 'home'; it was not registered: "), "\(one.err)")
    }

    /// Importing a file without features changes nothing and says how many stay registered,
    /// asking the daemon.
    @Test func importingNoFeaturesReportsTheRegisteredOnes() async throws {
        let daemon = try await Self.daemon(rule: "authorization = \"always\"\naccuracy = \"precise\"\n")
        defer { daemon.stop() }
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("ctl-empty-\(UUID().uuidString.prefix(8)).geojson")
        try Data(#"{"type":"FeatureCollection","features":[]}"#.utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        // South and west, written as --help shows them (not only as --latitude=-33.9).
        let one = try LocationCtlReplayTests.run(["regions", "add", "home", "--latitude", "-33.9", "--longitude", "-18.4",
                                                  "--radius", "50", "--socket", daemon.socketPath])
        #expect(one.status == 0 && one.out == "added 1; 1 registered\n", "\(one.out)\(one.err)")
        let none = try LocationCtlReplayTests.run(["regions", "import", file.path, "--socket", daemon.socketPath])
        #expect(none.status == 0, "\(none.err)")
        #expect(none.out == "added 0; 1 registered\n", "\(none.out)")
    }

    /// A file giving an id twice is refused before anything is sent: with 200 regions between
    /// the two, the daemon refused the second request after registering the first's 200. Ids
    /// given as numbers are compared as the strings they become.
    @Test func importingAnIDTwiceRegistersNothing() async throws {
        let daemon = try await Self.daemon(rule: "authorization = \"always\"\naccuracy = \"precise\"\n")
        defer { daemon.stop() }
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("ctl-twice-\(UUID().uuidString.prefix(8)).geojson")
        defer { try? FileManager.default.removeItem(at: file) }
        let ids = (1...200).map { "\"r\($0)\"" } + ["1.5", "\"1.5\""]
        let features = ids.map { #"{"type":"Feature","geometry":{"type":"Point","coordinates":[13.4,52.5]},"properties":{"id":\#($0),"radius":50}}"# }
        try Data((#"{"type":"FeatureCollection","features":["# + features.joined(separator: ",") + "]}").utf8).write(to: file)
        let twice = try LocationCtlReplayTests.run(["regions", "import", file.path, "--socket", daemon.socketPath])
        #expect(twice.status == 1)
        #expect(twice.err == "Error: \(file.path): features[201]: id '1.5' is also features[200]'s; region ids must be unique: rename or remove one of them\n",
                "\(twice.err)")
        let listed = try LocationCtlReplayTests.run(["regions", "list", "--socket", daemon.socketPath])
        #expect(listed.status == 0 && listed.out == "", "\(listed.out)\(listed.err)")
    }

    /// `regions export` writes what `regions import` reads: every property survives the round
    /// trip (metadata, dwell, notify flags, a number id as its text), standard output and `-o`
    /// give the same file, and a feature's `state` is the daemon's, dropped on import.
    @Test func exportedRegionsImportAsTheSameRegions() async throws {
        let daemon = try await Self.daemon(rule: "authorization = \"always\"\naccuracy = \"precise\"\n")
        defer { daemon.stop() }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ctl-export-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let features = [
            #"{"type":"Feature","geometry":{"type":"Point","coordinates":[13.4,52.5]},"properties":{"id":"home","radius":50,"dwell":120,"metadata":{"floor":3,"name":"Flat"}}}"#,
            #"{"type":"Feature","geometry":{"type":"Point","coordinates":[-0.1234567891,51.5]},"properties":{"id":1.5,"radius":10000,"notifyOnEntry":false}}"#,
            #"{"type":"Feature","geometry":{"type":"Point","coordinates":[179.9,-45]},"properties":{"id":"a \"quoted\" id","radius":10,"notifyOnExit":false,"notifyInitialState":true}}"#,
        ]
        let original = dir.appendingPathComponent("original.geojson")
        try Data((#"{"type":"FeatureCollection","features":["# + features.joined(separator: ",") + "]}").utf8).write(to: original)
        let imported = try LocationCtlReplayTests.run(["regions", "import", original.path, "--socket", daemon.socketPath])
        #expect(imported.status == 0 && imported.out == "added 3; 3 registered\n", "\(imported.out)\(imported.err)")

        let printed = try LocationCtlReplayTests.run(["regions", "export", "--socket", daemon.socketPath])
        let file = dir.appendingPathComponent("exported.geojson")
        let written = try LocationCtlReplayTests.run(["regions", "export", "-o", file.path, "--socket", daemon.socketPath])
        #expect(printed.status == 0 && written.status == 0 && written.out == "", "\(printed.err)\(written.err)")
        #expect(try String(contentsOf: file, encoding: .utf8) == printed.out)
        let exported = try JSONSerialization.jsonObject(with: Data(printed.out.utf8)) as? [String: Any]
        let properties = (exported?["features"] as? [[String: Any]])?.compactMap { $0["properties"] as? [String: Any] } ?? []
        #expect(Set(properties.compactMap { $0["id"] as? String }) == ["home", "1.5", "a \"quoted\" id"], "\(printed.out)")
        #expect(properties.allSatisfy { $0["state"] != nil }, "\(printed.out)")

        let removed = try LocationCtlReplayTests.run(["regions", "remove", "--all", "--socket", daemon.socketPath])
        #expect(removed.status == 0, "\(removed.err)")
        let again = try LocationCtlReplayTests.run(["regions", "import", file.path, "--socket", daemon.socketPath])
        #expect(again.status == 0 && again.out == "added 3; 3 registered\n", "\(again.out)\(again.err)")
        let reexported = try LocationCtlReplayTests.run(["regions", "export", "--socket", daemon.socketPath])
        #expect(reexported.status == 0 && reexported.out == printed.out, "\(printed.out)\n---\n\(reexported.out)")
    }

    /// No daemon at the socket is not a usage error: exit 1 with the socket and what to do.
    @Test func noDaemonExitsOneNamingTheSocket() throws {
        for command in [["status"], ["watch"], ["regions", "list"]] {
            let r = try LocationCtlReplayTests.run(command + ["--socket", "/nonexistent/locationd.sock"])
            #expect(r.status == 1, "\(command): \(r.err)")
            #expect(r.err.contains("cannot connect to locationd at /nonexistent/locationd.sock") && r.err.contains("is locationd running?"), "\(r.err)")
            #expect(!r.err.contains("Usage") && !r.err.contains("USAGE"), "\(r.err)")
        }
    }

    @Test func watchDeniedByPolicyExitsNonZeroWithTheRule() async throws {
        let daemon = try await Self.daemon(rule: "authorization = \"denied\"\n")
        defer { daemon.stop() }
        let denied = try LocationCtlReplayTests.run(["watch", "--socket", daemon.socketPath])
        #expect(denied.status == 1)
        #expect(denied.err.contains("locationd refused the session (--session when-in-use): notAuthorized: policy rule 'ctl' (executable \(Self.locationctl)) denies location access"),
                "\(denied.err)")
        // The regions commands say which session was refused too.
        let geojson = FileManager.default.temporaryDirectory.appendingPathComponent("denied-\(UUID().uuidString.prefix(8)).geojson")
        try Data(#"{"type":"FeatureCollection","features":[]}"#.utf8).write(to: geojson)
        defer { try? FileManager.default.removeItem(at: geojson) }
        for command in [["regions", "list"], ["regions", "add", "x", "--latitude", "1", "--longitude", "2", "--radius", "50"], ["regions", "import", geojson.path]] {
            let r = try LocationCtlReplayTests.run(command + ["--socket", daemon.socketPath])
            #expect(r.status == 1, "\(command): \(r.err)")
            #expect(r.err == "Error: locationd refused the always session regions need: notAuthorized: policy rule 'ctl' (executable \(Self.locationctl)) denies location access\n",
                    "\(command): \(r.err)")
        }
    }
}
