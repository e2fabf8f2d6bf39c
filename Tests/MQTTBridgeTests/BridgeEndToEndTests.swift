import Foundation
import LocationCore
import LocationProtocol
import TestSupport
import Testing

/// locationd-mqtt between a real locationd replaying the demo trip and a real mosquitto broker,
/// read by `mosquitto_sub -v`, a subscriber nobody here wrote (docs/mqtt.md, "Tests").
@Suite(.serialized, .timeLimit(.minutes(5))) struct BridgeEndToEndTests {
    static let topic = "owntracks/alice/car"

    static func seconds(_ iso: JSONValue?) -> Double? {
        guard case .string(let s)? = iso, let t = ISO8601.parse(s) else { return nil }
        return (Double(t.nanoseconds) / 1e9).rounded(.down)
    }

    /// Every location and visit locationd delivers arrives, in order, with OwnTracks' fields,
    /// units and types.
    @Test(.enabled(if: have("mosquitto", "mosquitto_sub"))) func everyEventArrivesInOwnTracksForm() throws {
        let fleet = try Fleet("mq-e2e", topic: Self.topic)
        let (dir, log, broker, sub) = (fleet.directory, fleet.log, fleet.broker, fleet.sub)
        let expected = try expectedEvents(log: log, events: "location,visits")
        var daemon = try startLocationd(directory: dir, log: log, extra: ["--speed", "0"])
        defer { daemon.stop() }
        let bridge = try startBridge(directory: dir, broker: broker, topic: Self.topic)
        defer { bridge.stop() }

        let expectedLocations = expected.filter { $0["type"] == .string("location") }
        let expectedVisits = expected.filter { $0["type"] == .string("visit") }
        #expect(expectedLocations.count > 1000 && expectedVisits.count >= 4)
        try waitUntil("every event at the subscriber", timeout: 60, detail: { "bridge: \(bridge.stderr.suffix(2000))" }) {
            // The replay's end stops locationd, maybe before the bridge has read every event it
            // numbered: started again on its database, it writes the rest.
            if !daemon.isRunning { daemon = try BridgeDurabilityTests.daemonAgain(dir) }
            return sub.messages.count >= expected.count
        }
        let locations = sub.messages.filter { $0.topic == Self.topic }
        #expect(locations.count == expectedLocations.count)
        for (message, want) in zip(locations, expectedLocations) {
            let got = try JSONParser().parse(message.payload)
            guard case .object(let fields) = got else { Issue.record("not an object: \(message.payload)"); continue }
            #expect(Set(fields.keys).isSubset(of: ["_type", "tid", "lat", "lon", "tst", "acc", "alt", "vac", "vel", "cog", "t", "_seq"]), "\(message.payload)")
            #expect(fields["_seq"] != nil, "every event is numbered by locationd: \(message.payload)")
            #expect(got["_type"] == .string("location") && got["tid"] == .string("ar") && got["t"] == .string("t"))
            #expect(got["lat"] == want["latitude"] && got["lon"] == want["longitude"])
            #expect(got["tst"].flatMap { if case .number(let n) = $0 { n } else { nil } } == Self.seconds(want["time"]))
            for key in ["acc", "alt", "vac", "vel", "cog"] {
                if case .number(let n)? = got[key] { #expect(n == n.rounded() && n != 0, "\(key) in \(message.payload)") }
            }
            if case .number(let speed)? = want["speed"], (speed * 3.6).rounded() != 0 {
                #expect(got["vel"] == .number((speed * 3.6).rounded()), "\(message.payload)")
            }
        }
        let visits = sub.objects("visit")
        #expect(visits.count == expectedVisits.count)
        for (got, want) in zip(visits, expectedVisits) {
            #expect(got["event"] == want["event"] && got["lat"] == want["latitude"] && got["lon"] == want["longitude"])
            #expect(got["atst"].flatMap { if case .number(let n) = $0 { n } else { nil } } == Self.seconds(want["arrival"]))
        }
        #expect(sub.messages.filter { $0.topic == Self.topic + "/visit" }.count == visits.count)
        // No precise coordinate in the bridge's log.
        #expect(!bridge.stderr.contains("52.5"), "\(bridge.stderr)")
    }

    /// `setWaypoints` from the broker registers regions in locationd that then fire transitions
    /// with the waypoint's `desc`, `rid` and `tst` (`wtst`); `waypoints` lists them.
    @Test(.enabled(if: have("mosquitto", "mosquitto_sub", "mosquitto_pub"))) func setWaypointsFromTheBrokerFiresTransitions() throws {
        let fleet = try Fleet("mq-wp", topic: Self.topic)
        let (dir, log, broker, sub) = (fleet.directory, fleet.log, fleet.broker, fleet.sub)
        // Looped, so that a pass after the command crosses the region.
        let daemon = try startLocationd(directory: dir, log: log, extra: ["--speed", "400", "--loop"])
        defer { daemon.stop() }
        let bridge = try startBridge(directory: dir, broker: broker, topic: Self.topic, config: "[publish]\nevents = [\"transition\"]\n")
        defer { bridge.stop() }
        try waitUntil("the bridge connected to both", detail: { bridge.stderr }) {
            let status = (try? String(contentsOfFile: "\(dir)/status.json", encoding: .utf8)) ?? ""
            return status.contains(#""broker":"connected","locationd":"connected""#)
        }
        // The demo's second stop, 52.5163 13.3777.
        let command = #"{"_type":"cmd","action":"setWaypoints","waypoints":{"_type":"waypoints","waypoints":[{"_type":"waypoint","desc":"Office","rid":"office-1","lat":52.5163,"lon":13.3777,"rad":120,"tst":1700000000}]}}"#
        _ = try run(["/usr/bin/mosquitto_pub", "-h", "127.0.0.1", "-p", "\(broker.port)", "-q", "1", "-t", Self.topic + "/cmd", "-m", command])
        try waitUntil("the waypoints message", detail: { bridge.stderr }) { !sub.objects("waypoints").isEmpty }
        #expect(sub.messages.first { $0.topic == Self.topic + "/waypoints" }?.payload
                == #"{"_type":"waypoints","_creator":"locationd-mqtt","waypoints":[{"_type":"waypoint","desc":"Office","lat":52.5163,"lon":13.3777,"rad":120,"tst":1700000000,"rid":"office-1"}]}"#)
        try waitUntil("an enter and a leave", timeout: 60, detail: { String(bridge.stderr.suffix(3000) + sub.process.stdout.suffix(2000)) }) {
            let events = sub.objects("transition").compactMap { $0["event"] }
            return events.contains(.string("enter")) && events.contains(.string("leave"))
        }
        for t in sub.objects("transition") {
            #expect(t["desc"] == .string("Office") && t["rid"] == .string("office-1") && t["wtst"] == .number(1_700_000_000))
            #expect(t["t"] == .string("c") && t["tid"] == .string("ar"))
        }
        #expect(sub.messages.filter { $0.topic == Self.topic }.isEmpty, "locations are not published: events = [transition]")

        // Asked again, the list comes again; cleared, it is empty.
        _ = try run(["/usr/bin/mosquitto_pub", "-h", "127.0.0.1", "-p", "\(broker.port)", "-q", "1", "-t", Self.topic + "/cmd", "-m", #"{"_type":"cmd","action":"clearWaypoints"}"#])
        try waitUntil("the empty list", detail: { bridge.stderr }) {
            sub.messages.contains { $0.payload == #"{"_type":"waypoints","_creator":"locationd-mqtt","waypoints":[]}"# }
        }
    }

    /// Every transition of the replay arrives: waypoints set from the broker (with locationd
    /// running without fixes), then locationd replaying the demo trip on the same database
    /// gives exactly the `enter`/`exit` events `locationctl replay --regions` computes for the
    /// same regions, as OwnTracks transitions with their time, position and waypoint.
    @Test(.enabled(if: have("mosquitto", "mosquitto_sub", "mosquitto_pub"))) func everyTransitionOfTheReplayArrives() throws {
        let fleet = try Fleet("mq-tr", topic: Self.topic)
        let (dir, log, broker, sub) = (fleet.directory, fleet.log, fleet.broker, fleet.sub)
        var daemon = try BridgeDurabilityTests.daemonAgain(dir)
        defer { daemon.stop() }
        let bridge = try startBridge(directory: dir, broker: broker, topic: Self.topic, config: "[publish]\nevents = [\"transition\"]\n")
        defer { bridge.stop() }
        try waitUntil("the bridge connected to both", detail: { bridge.stderr }) {
            let status = (try? String(contentsOfFile: "\(dir)/status.json", encoding: .utf8)) ?? ""
            return status.contains(#""broker":"connected","locationd":"connected""#)
        }
        // The demo's three stops: the start (inside from the first fix), the second, the last.
        let waypoints = [("alex", 52.520008, 13.404954, 150), ("office-1", 52.5163, 13.3777, 120), ("walk-end", 52.518608, 13.376198, 100)]
        let command = #"{"_type":"cmd","action":"setWaypoints","waypoints":["# + waypoints.map { rid, lat, lon, rad in
            #"{"_type":"waypoint","desc":"\#(rid) stop","rid":"\#(rid)","lat":\#(lat),"lon":\#(lon),"rad":\#(rad),"tst":1700000000}"#
        }.joined(separator: ",") + "]}"
        _ = try run(["/usr/bin/mosquitto_pub", "-h", "127.0.0.1", "-p", "\(broker.port)", "-q", "1", "-t", Self.topic + "/cmd", "-m", command])
        try waitUntil("the waypoints message", detail: { bridge.stderr }) { !sub.objects("waypoints").isEmpty }

        let geojson = "\(dir)/waypoints.geojson"
        try (#"{"type":"FeatureCollection","features":["# + waypoints.map { rid, lat, lon, rad in
            #"{"type":"Feature","geometry":{"type":"Point","coordinates":[\#(lon),\#(lat)]},"properties":{"id":"\#(rid)","radius":\#(rad)}}"#
        }.joined(separator: ",") + "]}").write(toFile: geojson, atomically: true, encoding: .utf8)
        let expected = try expectedEvents(log: log, events: "region", options: ["--regions", geojson])
            .filter { $0["event"] == .string("enter") || $0["event"] == .string("exit") }
        #expect(expected.count == 4)

        // The same database, now replaying: the regions are the bridge's (its uid and executable).
        daemon.kill(SIGTERM)
        _ = daemon.waitForExit()
        daemon = try startLocationd(directory: dir, log: log, extra: ["--speed", "0"])
        let transitions = { BridgeDurabilityTests.firstArrivals(sub).compactMap { try? JSONParser().parse($0.payload) }
            .filter { $0["_type"] == .string("transition") } }
        try waitUntil("every transition", timeout: 60, detail: { String(bridge.stderr.suffix(2000)) + sub.process.stdout.suffix(2000) }) {
            // The replay's end stops locationd: started again, it writes what was not acknowledged.
            if !daemon.isRunning { daemon = try BridgeDurabilityTests.daemonAgain(dir) }
            return transitions().count >= expected.count
        }
        let got = transitions()
        #expect(got.count == expected.count)
        for (t, want) in zip(got, expected) {
            #expect(t["event"] == (want["event"] == .string("enter") ? .string("enter") : .string("leave")), "\(t) / \(want)")
            #expect(t["rid"] == want["region"] && t["tst"] == Self.seconds(want["time"]).map(JSONValue.number), "\(t) / \(want)")
            #expect(t["lat"] == want["latitude"] && t["lon"] == want["longitude"], "\(t) / \(want)")
            if case .string(let rid)? = want["region"] { #expect(t["desc"] == .string("\(rid) stop")) }
            #expect(t["wtst"] == .number(1_700_000_000) && t["t"] == .string("c") && t["tid"] == .string("ar"))
        }
        #expect(sub.messages.filter { $0.topic == Self.topic + "/event" }.count >= expected.count)
    }

    /// Garbage on BASE/cmd is logged and ignored; the bridge goes on and answers the next
    /// `reportLocation` with `t:"r"`.
    @Test(.enabled(if: have("mosquitto", "mosquitto_sub", "mosquitto_pub"))) func badCommandsAreLoggedAndIgnored() throws {
        let fleet = try Fleet("mq-bad", topic: Self.topic)
        let (dir, log, broker, sub) = (fleet.directory, fleet.log, fleet.broker, fleet.sub)
        let daemon = try startLocationd(directory: dir, log: log, extra: ["--speed", "100"])
        defer { daemon.stop() }
        let bridge = try startBridge(directory: dir, broker: broker, topic: Self.topic, config: "[publish]\nminimum_interval = 600\n")
        defer { bridge.stop() }
        try waitUntil("a location", detail: { bridge.stderr }) { !sub.objects("location").isEmpty }
        let garbage = ["not json", "[1,2]", #"{"_type":"cmd"}"#, #"{"_type":"cmd","action":"dump"}"#,
                       #"{"_type":"cmd","action":"setWaypoints","waypoints":[{"desc":"x","lat":1,"lon":1,"rad":1}]}"#,
                       String(repeating: "{\"a\":", count: 100)]
        for g in garbage {
            _ = try run(["/usr/bin/mosquitto_pub", "-h", "127.0.0.1", "-p", "\(broker.port)", "-q", "1", "-t", Self.topic + "/cmd", "-m", g])
        }
        _ = try run(["/usr/bin/mosquitto_pub", "-h", "127.0.0.1", "-p", "\(broker.port)", "-q", "1", "-t", Self.topic + "/cmd", "-m", #"{"_type":"cmd","action":"reportLocation"}"#])
        try waitUntil("the reply to reportLocation", detail: { bridge.stderr }) {
            sub.objects("location").contains { $0["t"] == .string("r") }
        }
        #expect(bridge.isRunning)
        let logged = bridge.stderr
        // One line per message, as locationd's on stderr: time, level, logger, message.
        let line = try #require(logged.split(separator: "\n").first { $0.contains("ignored a message on \(Self.topic)/cmd: not JSON") })
        #expect(line.dropFirst("2026-05-04T08:33:01.123Z".count).hasPrefix(" warning locationd-mqtt: ignored a message"), "\(line)")
        #expect(logged.contains(#"unsupported action "dump""#))
        #expect(logged.contains("radius 1 is out of range"))
        #expect(logged.contains(#"_type is absent; expected "cmd""#) == false)  // {"_type":"cmd"} has its _type
        #expect(logged.contains("action is absent; expected a string"))
    }

    /// TLS with a test CA made here (openssl) and a username and password (mosquitto_passwd);
    /// the password comes from $CREDENTIALS_DIRECTORY as systemd's LoadCredential= gives it.
    @Test(.enabled(if: have("mosquitto", "mosquitto_sub", "mosquitto_passwd", "openssl"))) func tlsWithATestCAAndAPassword() throws {
        let dir = try makeDirectory("mq-tls")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for step in [
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=test CA", "-keyout", "\(dir)/ca.key", "-out", "\(dir)/ca.pem"],
            ["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", "\(dir)/server.key", "-out", "\(dir)/server.csr"],
        ] { let r = try run(step); #expect(r.status == 0, "\(r.err)") }
        try "subjectAltName=IP:127.0.0.1\n".write(toFile: "\(dir)/san.ext", atomically: true, encoding: .utf8)
        let sign = try run(["openssl", "x509", "-req", "-in", "\(dir)/server.csr", "-CA", "\(dir)/ca.pem", "-CAkey", "\(dir)/ca.key",
                            "-CAcreateserial", "-days", "2", "-extfile", "\(dir)/san.ext", "-out", "\(dir)/server.pem"])
        #expect(sign.status == 0, "\(sign.err)")
        let passwd = try run(["/usr/bin/mosquitto_passwd", "-c", "-b", "\(dir)/passwd", "car", "s3cret pass"])
        #expect(passwd.status == 0, "\(passwd.err)")
        // Started as root, mosquitto reads its files as the mosquitto user.
        for file in ["server.key", "passwd"] { chmod("\(dir)/\(file)", 0o644) }
        let broker = try Broker(directory: dir, extraConfig: """
            allow_anonymous false
            password_file \(dir)/passwd
            cafile \(dir)/ca.pem
            certfile \(dir)/server.pem
            keyfile \(dir)/server.key
            """)
        defer { broker.kill() }
        let sub = try Subscriber(broker: broker, base: Self.topic, directory: dir,
                                 extra: ["--cafile", "\(dir)/ca.pem", "-u", "car", "-P", "s3cret pass"])
        defer { sub.process.stop() }
        let log = try demoLog(in: dir)
        let daemon = try startLocationd(directory: dir, log: log, extra: ["--speed", "100"])
        defer { daemon.stop() }
        let credentials = "\(dir)/credentials"
        try FileManager.default.createDirectory(atPath: credentials, withIntermediateDirectories: true)
        try "s3cret pass\n".write(toFile: "\(credentials)/mqtt-password", atomically: true, encoding: .utf8)
        let bridge = try startBridge(directory: dir, broker: broker, topic: Self.topic, config: """
            [broker]
            username = "car"
            password_file = "mqtt-password"
            ca_file = "\(dir)/ca.pem"
            [publish]
            minimum_interval = 300
            """, environment: ["CREDENTIALS_DIRECTORY": credentials])
        defer { bridge.stop() }
        try waitUntil("locations over TLS", detail: { bridge.stderr }) { sub.objects("location").count >= 3 }

        // A wrong password is refused by the broker, and the bridge says so.
        try "wrong\n".write(toFile: "\(credentials)/mqtt-password", atomically: true, encoding: .utf8)
        let refused = try startBridge(directory: dir, broker: broker, topic: "owntracks/alice/other", config: """
            [broker]
            username = "car"
            password_file = "mqtt-password"
            ca_file = "\(dir)/ca.pem"
            """, name: "refused", environment: ["CREDENTIALS_DIRECTORY": credentials])
        defer { refused.stop() }
        try waitUntil("the refusal in the log", detail: { refused.stderr }) { refused.stderr.contains("the broker refused the connection") }
    }

    /// A bad configuration is refused at start with the file, the line and the key (exit 78);
    /// a bad command line with the flag (exit 64); nothing crashes.
    @Test func badConfigurationIsNamed() throws {
        let dir = try makeDirectory("mq-conf")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = "\(dir)/mqtt.toml"
        try "[broker]\naddress = \"localhost:1883\"\nkeepalive = 1\n".write(toFile: path, atomically: true, encoding: .utf8)
        let exe = binDirectory + "/locationd-mqtt"
        var r = try run([exe, "--config", path, "--topic", "owntracks/a/b"])
        #expect(r.status == 78)
        #expect(r.err == "locationd-mqtt: \(path):3: 'broker.keepalive' is 1; expected 5…65535 seconds\n")
        r = try run([exe, "--config", "\(dir)/none.toml", "--topic", "owntracks/a/b"])
        #expect(r.status == 78 && r.err.contains("none.toml: no such file"))
        r = try run([exe, "--config", "/dev/null", "--broker", "x:99999", "--topic", "owntracks/a/b"])
        #expect(r.status == 64 && r.err.contains("--broker 'x:99999': expected HOST, HOST:PORT"))
        r = try run([exe, "--config", "/dev/null"])
        #expect(r.status == 64 && r.err.contains("no topic"))
        r = try run([exe, "--config", "/dev/null", "--topic", "owntracks/#"])
        #expect(r.status == 64 && r.err.contains("wildcards"))
        try "[broker]\nusername = \"u\"\npassword_file = \"\(dir)/missing\"\n".write(toFile: path, atomically: true, encoding: .utf8)
        r = try run([exe, "--config", path, "--topic", "owntracks/a/b"])
        #expect(r.status == 78 && r.err.contains("missing: no such password file"))
        r = try run([exe, "--config", "/dev/null", "--topic", "owntracks/a/b", "--check-config"])
        #expect(r.status == 0 && r.out.contains("client id locationd-mqtt-a-b"))
        r = try run([exe, "--status", "--status-file", "\(dir)/none.json"])
        #expect(r.status == 3 && r.err.contains("not running"))
    }
}

/// The durability promise (docs/mqtt.md, "Durability"): the broker stopped and started 20 times
/// during a replay, the bridge killed with -9 every few of them, and locationd's replay ending
/// (it stops) and the daemon started again: every event locationd numbered reaches a
/// subscriber with a persistent session, in order, and a duplicate only ever repeats an
/// identity (`_seq`) already seen, with the same payload.
@Suite(.serialized, .timeLimit(.minutes(5))) struct BridgeDurabilityTests {
    static let topic = "owntracks/fleet/van7"

    struct Status {
        var text: String
        func number(_ key: String) -> UInt64? {
            guard case .number(let n)? = (try? JSONParser().parse(text))?[key] else { return nil }
            return UInt64(n)
        }
        func says(_ fragment: String) -> Bool { text.contains(fragment) }
    }

    /// locationd started again on the replay's database, reading nothing new (gpsd is not there).
    static func daemonAgain(_ dir: String, extra: [String] = []) throws -> Child {
        try Child([binDirectory + "/locationd", "--socket", "\(dir)/ld.sock", "--database", "\(dir)/ld.db", "--gpsd", "127.0.0.1:1"] + extra,
                  name: "locationd-2", directory: dir)
    }

    /// Each `_seq` once, in the order of its first arrival, with that payload; a duplicate must
    /// repeat the payload.
    static func firstArrivals(_ sub: Subscriber) -> [(seq: UInt64, payload: String)] {
        var payloadBySeq: [UInt64: String] = [:]
        var first: [(seq: UInt64, payload: String)] = []
        for m in sub.messages {
            guard case .number(let n)? = (try? JSONParser().parse(m.payload))?["_seq"] else { continue }
            let seq = UInt64(n)
            if let earlier = payloadBySeq[seq] {
                #expect(earlier == m.payload, "a duplicate with another payload: \(earlier) / \(m.payload)")
            } else {
                payloadBySeq[seq] = m.payload
                first.append((seq, m.payload))
            }
        }
        return first
    }

    /// An approximate program (docs/privacy.md) through the bridge: its policy rule, for the
    /// bridge's executable, makes everything the fleet sees a cell centre of locationd's grid,
    /// never a measured coordinate; and the events the bridge held when it was killed with -9,
    /// the broker away (so none acknowledged), come again from locationd's durable queue to the
    /// next bridge: every `_seq` arrives, first arrivals in order.
    @Test(.enabled(if: have("mosquitto", "mosquitto_sub", "mosquitto_pub"))) func anApproximateProgramLosesNothingAcrossABridgeKill() throws {
        let fleet = try Fleet("mq-approx", topic: Self.topic, persistent: true)
        let (dir, log, broker, sub) = (fleet.directory, fleet.log, fleet.broker, fleet.sub)
        let config = "\(dir)/locationd.toml"
        try """
            [policy.fleet]
            executable = "\(binDirectory)/locationd-mqtt"
            authorization = "always"
            accuracy = "approximate"
            """.write(toFile: config, atomically: true, encoding: .utf8)
        let daemonOptions = ["--config", config, "--privacy-seed", "42"]
        var daemon = try startLocationd(directory: dir, log: log, extra: daemonOptions + ["--speed", "120"])
        defer { daemon.stop() }
        var bridge = try startBridge(directory: dir, broker: broker, topic: Self.topic, name: "bridge-1")
        defer { bridge.stop() }
        let status = { Status(text: (try? String(contentsOfFile: "\(dir)/status.json", encoding: .utf8)) ?? "") }
        let highestAtSubscriber = { Self.firstArrivals(sub).map(\.seq).max() ?? 0 }

        try waitUntil("a first location at the subscriber", timeout: 60, detail: { bridge.stderr }) { !sub.objects("location").isEmpty }
        // The broker away: what the bridge receives now it cannot publish, so acknowledges none.
        try broker.stop()
        try waitUntil("an event the bridge holds for the broker", timeout: 60, detail: { status().text + bridge.stderr.suffix(2000) }) {
            (status().number("receivedSeq") ?? 0) > highestAtSubscriber()
        }
        let held = try #require(status().number("receivedSeq"))
        bridge.kill(SIGKILL)
        _ = bridge.waitForExit()
        try broker.start()
        bridge = try startBridge(directory: dir, broker: broker, topic: Self.topic, name: "bridge-2")

        // The replay's end stops locationd; started again on its database, it writes what the
        // bridge has not acknowledged.
        _ = daemon.waitForExit(timeout: 120)
        daemon = try Self.daemonAgain(dir, extra: daemonOptions)
        try waitUntil("the bridge to have everything acknowledged", timeout: 90, detail: { status().text + bridge.stderr.suffix(2000) }) {
            let s = status()
            guard s.says(#""locationd":"connected""#), let received = s.number("receivedSeq") else { return false }
            // Equal: the status file is written at the bridge's tick, after what it published.
            return s.number("queued") == 0 && s.number("inFlight") == 0 && s.number("acknowledgedSeq") == received
                && highestAtSubscriber() == received
        }
        let last = try #require(status().number("receivedSeq"))
        #expect(last > held, "events after the kill")
        // The restarted daemon goes on sending: events after `last` may have arrived since.
        let arrivals = Self.firstArrivals(sub)
        let seqs = arrivals.map(\.seq)
        #expect(seqs == Array(1...max(last, seqs.last ?? 0)), "every _seq, first arrivals in order")

        // Only cell centres: each published coordinate is the centre of its own cell of the
        // grid locationd uses (--privacy-seed 42), and none is one replay computes precisely.
        let grid = PrivacyGrid(secret: 42)
        let precise = Set(try expectedEvents(log: log, events: "location,visits").compactMap { e -> String? in
            guard case .number(let lat)? = e["latitude"], case .number(let lon)? = e["longitude"] else { return nil }
            return "\(lat),\(lon)"
        })
        let published = arrivals.compactMap { try? JSONParser().parse($0.payload) }
        #expect(published.filter { $0["_type"] == .string("location") }.count >= 2)
        for p in published {
            guard case .number(let lat)? = p["lat"], case .number(let lon)? = p["lon"] else {
                Issue.record("no lat/lon: \(p)")
                continue
            }
            let c = Coordinate(latitude: lat, longitude: lon)
            #expect(Geodesy.distance(c, grid.centre(of: grid.cell(of: c).cell)) < 0.5, "not a cell centre: \(p)")
            #expect(!precise.contains("\(lat),\(lon)"), "a precise coordinate: \(p)")
        }
    }

    @Test(.enabled(if: have("mosquitto", "mosquitto_sub", "mosquitto_pub"))) func everyNumberedEventArrivesThroughRestartsAndKills() throws {
        let fleet = try Fleet("mq-dur", topic: Self.topic, persistent: true)
        let (dir, log, broker, sub) = (fleet.directory, fleet.log, fleet.broker, fleet.sub)
        var daemon = try startLocationd(directory: dir, log: log, extra: ["--speed", "60"])
        defer { daemon.stop() }
        var bridges = [try startBridge(directory: dir, broker: broker, topic: Self.topic, name: "bridge-0")]
        defer { bridges.forEach { $0.stop() } }
        let status = { Status(text: (try? String(contentsOfFile: "\(dir)/status.json", encoding: .utf8)) ?? "") }
        var generator = SystemRandomNumberGenerator()
        var restartedDaemon = false

        for round in 1...20 {
            // Progress between faults: a few more messages at the subscriber, or the replay over.
            let before = sub.messages.count
            let more = Int.random(in: 5...40, using: &generator)
            try waitUntil("progress in round \(round)", timeout: 60, detail: { bridges.last!.stderr.suffix(3000).description }) {
                if restartedDaemon { return status().says(#""broker":"connected""#) }
                return sub.messages.count >= before + more || !daemon.isRunning
            }
            if !daemon.isRunning && !restartedDaemon {
                // The replay ended: what locationd numbered and the bridge did not acknowledge is
                // in its database; a daemon started again on it writes it again.
                daemon = try Self.daemonAgain(dir)
                restartedDaemon = true
            }
            try broker.restart()
            if round % 4 == 0 {
                bridges.last!.kill(SIGKILL)
                _ = bridges.last!.waitForExit()
                bridges.append(try startBridge(directory: dir, broker: broker, topic: Self.topic, name: "bridge-\(round)"))
            }
        }
        if !restartedDaemon {
            _ = daemon.waitForExit(timeout: 90)  // the replay's end
            daemon = try Self.daemonAgain(dir)
        }
        // Settled: locationd connected with nothing left for the bridge, every seq it received
        // acknowledged.
        try waitUntil("the bridge to have everything acknowledged", timeout: 90, detail: { status().text + bridges.last!.stderr.suffix(2000) }) {
            let s = status()
            guard !daemon.isRunning || s.says(#""locationd":"connected""#) else { return false }
            guard let received = s.number("receivedSeq"), received > 0 else { return false }
            return s.number("queued") == 0 && s.number("inFlight") == 0 && s.number("acknowledgedSeq") == received
                && sub.objects("location").count + sub.objects("visit").count >= Int(received)
        }
        let last = try #require(status().number("receivedSeq"))
        var payloadBySeq: [UInt64: String] = [:]
        var firstSeen: [UInt64] = []
        for m in sub.messages {
            guard case .number(let n)? = (try? JSONParser().parse(m.payload))?["_seq"] else { continue }
            let seq = UInt64(n)
            if let earlier = payloadBySeq[seq] {
                #expect(earlier == m.payload, "a duplicate with another payload: \(earlier) / \(m.payload)")
            } else {
                payloadBySeq[seq] = m.payload
                firstSeen.append(seq)
            }
        }
        #expect(Set(firstSeen) == Set(1...last), "missing: \(Set(1...last).subtracting(firstSeen).sorted().prefix(20))")
        let disorder = zip(firstSeen, firstSeen.dropFirst()).enumerated().first { $0.element.0 > $0.element.1 }.map { i, _ in
            Array(firstSeen[max(0, i - 5)..<min(firstSeen.count, i + 6)])
        }
        #expect(disorder == nil, "first arrivals out of locationd's order: \(disorder ?? [])")
        let tsts = firstSeen.compactMap { payloadBySeq[$0] }.compactMap { try? JSONParser().parse($0) }
            .filter { $0["_type"] == .string("location") }.compactMap { if case .number(let t)? = $0["tst"] { t } else { nil } }
        #expect(tsts == tsts.sorted(), "locations in time order")
        #expect(last > 100)
    }
}
