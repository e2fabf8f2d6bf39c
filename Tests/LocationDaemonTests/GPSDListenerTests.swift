import Foundation
import Glibc
import GPSDProtocol
import LocationCore
import NMEA
import TestSupport
import Testing

/// A program nobody here wrote, run to its exit.
func runTool(_ path: String, _ arguments: [String], environment: [String: String?] = [:],
             timeout: Double = 30) throws -> (status: Int32, out: String, err: String) {
    try runToExit(URL(fileURLWithPath: path), arguments, environment: environment, timeout: timeout)
}

/// locationd replaying a corpus log and serving gpsd's protocol on a free loopback port.
struct GPSDListenerDaemon {
    static let log = "bundg_zeus_9"
    static var available: Bool { GPSDHarness.corpusLog(log) != nil }

    let daemon: DaemonProcess
    let port: UInt16

    /// `policy`: [policy.NAME] tables for the config file. `speed`: the replay's.
    init(policy: String = "", speed: String = "20", extra: [String] = []) async throws {
        let log = try #require(GPSDHarness.corpusLog(Self.log))
        port = try GPSDHarness.freePort()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("locationd-gpsd-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let config = directory.appendingPathComponent("locationd.toml")
        try policy.write(to: config, atomically: true, encoding: .utf8)
        daemon = try DaemonProcess(arguments: ["--config", config.path, "--replay", log.path, "--speed", speed, "--privacy-seed", "7",
                                               "--gpsd-listen", "127.0.0.1:\(port)"] + extra, directory: directory)
        let port = self.port, daemon = self.daemon
        let listening = await waitUntil(timeout: 20) { !daemon.isRunning || GPSDHarness.canConnect(port: port) }
        try #require(listening && daemon.isRunning, "the listener did not open: \(daemon.stderrText())")
    }

    /// The fixes the replay reports, in order: the log through the project's decoder.
    static func replayedFixes() throws -> [Fix] {
        let bytes = try [UInt8](Data(contentsOf: try #require(GPSDHarness.corpusLog(log))))
        var decoder = NMEADecoder()
        var fixes: [Fix] = []
        decoder.feed(bytes) { if let f = $0.fix { fixes.append(f) } }
        decoder.finish { if let f = $0.fix { fixes.append(f) } }
        return fixes
    }

    /// The JSON objects among gpspipe's lines.
    static func objects(_ text: String) -> [[String: Any]] {
        text.split(whereSeparator: \.isNewline).compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }
}

/// Existing gpsd clients, unmodified, against locationd's gpsd-protocol listener.
@Suite(.serialized, .enabled(if: GPSDListenerDaemon.available, "gpsd corpus not found at ../shared/corpus/gpsd"),
       .timeLimit(.minutes(3)))
struct GPSDListenerTests {
    @Test("gpspipe -w: VERSION, DEVICES, WATCH, then the replay's fixes as gpsd's TPVs")
    func gpspipe() async throws {
        let listener = try await GPSDListenerDaemon()
        defer { listener.daemon.stop() }
        let run = try runTool("/usr/bin/gpspipe", ["-w", "-n", "25", "127.0.0.1:\(listener.port)"])
        #expect(run.status == 0, "\(run.err)")
        let lines = run.out.split(whereSeparator: \.isNewline).map(String.init)
        #expect(lines.prefix(3).map { GPSDListenerDaemon.objects($0).first?["class"] as? String } == ["VERSION", "DEVICES", "WATCH"])
        let device = "replay \(try #require(GPSDHarness.corpusLog(GPSDListenerDaemon.log)).path)"
        let expected = try GPSDListenerDaemon.replayedFixes().map { String(decoding: GPSDReport.tpv($0, device: device).dropLast(2), as: UTF8.self) }
        let tpvs = lines.filter { $0.hasPrefix("{\"class\":\"TPV\"") }
        #expect(tpvs.count == 22)
        #expect(tpvs == Array(expected.prefix(tpvs.count)), "\(tpvs.prefix(2)) vs \(expected.prefix(2))")
    }

    @Test("cgps under tmux: its screen shows a replayed fix's time, latitude and longitude; q quits it",
          .enabled(if: TmuxSession.available && FileManager.default.isExecutableFile(atPath: "/usr/bin/cgps"), "needs tmux and cgps (gpsd-tools)"))
    func cgps() async throws {
        // At the log's own pace: the replay (and cgps's connection) outlasts the test.
        let listener = try await GPSDListenerDaemon(speed: "1")
        defer { listener.daemon.stop() }
        let tmux = try TmuxSession("/usr/bin/cgps -s 127.0.0.1:\(listener.port)")
        defer { tmux.stop() }
        // Two captures alike: a screen not caught halfway through a redraw.
        var screen = "", previous = ""
        let shown = await waitUntil(timeout: 30) {
            previous = screen
            screen = (try? tmux.capture()) ?? ""
            return Self.cgpsFix(screen) != nil && screen == previous
        }
        try #require(shown, "cgps shows no fix:\n\(screen)\n\(listener.daemon.stderrText().suffix(2000))")
        let (time, latitude, longitude) = try #require(Self.cgpsFix(screen))
        let device = "replay \(try #require(GPSDHarness.corpusLog(GPSDListenerDaemon.log)).path)"
        let reports = try GPSDListenerDaemon.replayedFixes().compactMap {
            GPSDListenerDaemon.objects(String(decoding: GPSDReport.tpv($0, device: device), as: UTF8.self)).first
        }
        // cgps prints degrees with 8 decimals and the hemisphere ("52.84788167 N").
        let match = reports.first { ($0["time"] as? String) == time }
        #expect(match != nil, "\(time) is none of the replay's times:\n\(screen)")
        if let match {
            #expect(String(format: "%.8f", match["lat"] as? Double ?? .nan) == String(format: "%.8f", latitude), "\(screen)")
            #expect(String(format: "%.8f", match["lon"] as? Double ?? .nan) == String(format: "%.8f", longitude), "\(screen)")
        }
        // Its keys work as on gpsd: q quits.
        #expect(try !tmux.paneExited())
        try tmux.send(keys: "q")
        #expect(await waitUntil(timeout: 10) { (try? tmux.paneExited()) == true }, "cgps did not quit on q")
    }

    /// cgps's fix panel: "Time:  2018-08-20T09:47:37.000Z (0)", "Latitude:  52.85015667 N",
    /// "Longitude:  5.31362000 E"; nil while it shows "n/a".
    static func cgpsFix(_ screen: String) -> (time: String, latitude: Double, longitude: Double)? {
        func fields(after label: String) -> [Substring]? {
            guard let line = screen.split(whereSeparator: \.isNewline).first(where: { $0.contains(label) }),
                  let r = line.range(of: label) else { return nil }
            return line[r.upperBound...].split(separator: " ")
        }
        func degrees(_ label: String, _ positive: Character, _ negative: Character) -> Double? {
            guard let f = fields(after: label), f.count >= 2, let value = Double(f[0]), let hemisphere = f[1].first,
                  hemisphere == positive || hemisphere == negative else { return nil }
            return hemisphere == positive ? value : -value
        }
        guard let time = fields(after: "Time:")?.first, time.hasSuffix("Z"),
              let latitude = degrees("Latitude:", "N", "S"), let longitude = degrees("Longitude:", "E", "W") else { return nil }
        return (String(time), latitude, longitude)
    }

    @Test("Python's gps module, WATCH_ENABLE | WATCH_JSON: the replay's times and positions")
    func pythonGPS() async throws {
        let listener = try await GPSDListenerDaemon()
        defer { listener.daemon.stop() }
        let script = """
            import gps, json
            s = gps.gps(host="127.0.0.1", port=\(listener.port), mode=gps.WATCH_ENABLE | gps.WATCH_JSON)
            out = []
            while len(out) < 20:
                r = s.next()
                if r["class"] == "TPV" and r.get("mode", 0) >= 2:
                    out.append([r["time"], r["lat"], r["lon"], r["mode"]])
            print(json.dumps(out))
            """
        let run = try runTool("/usr/bin/python3", ["-c", script])
        #expect(run.status == 0, "\(run.err)")
        let read = try #require(try JSONSerialization.jsonObject(with: Data(run.out.utf8)) as? [[Any]])
        let fixes = try GPSDListenerDaemon.replayedFixes()
        try #require(read.count == 20 && fixes.count >= 20)
        for (r, f) in zip(read, fixes) {
            let report = GPSDListenerDaemon.objects(String(decoding: GPSDReport.tpv(f, device: "d"), as: UTF8.self)).first
            #expect(r[0] as? String == report?["time"] as? String)
            #expect(abs((r[1] as? Double ?? 0) - f.coordinate.latitude) < 1e-9 && abs((r[2] as? Double ?? 0) - f.coordinate.longitude) < 1e-9)
            #expect(r[3] as? Int == Int(f.mode.rawValue))
        }
    }

    @Test("An approximate program over TCP gets only mode 2 cell centres; a denied one ERROR and close")
    func policyOverTCP() async throws {
        let python = URL(fileURLWithPath: "/usr/bin/python3").resolvingSymlinksInPath().path
        let policy = """
            [policy.python]
            executable = "\(python)"
            authorization = "when-in-use"
            accuracy = "approximate"

            [policy.gpspipe]
            executable = "/usr/bin/gpspipe"
            authorization = "denied"
            accuracy = "approximate"
            """
        let listener = try await GPSDListenerDaemon(policy: policy, speed: "0")
        defer { listener.daemon.stop() }

        let denied = try runTool("/usr/bin/gpspipe", ["-w", "-n", "5", "127.0.0.1:\(listener.port)"])
        let objects = GPSDListenerDaemon.objects(denied.out)
        #expect(objects.map { $0["class"] as? String } == ["VERSION", "ERROR"], "\(denied.out)")
        #expect((objects.last?["message"] as? String)?.contains("policy rule 'gpspipe'") == true, "\(denied.out)")

        // Raw reads to the end: the replay (as fast as it goes) ends, the daemon exits, EOF.
        let script = """
            import socket, json
            s = socket.create_connection(("127.0.0.1", \(listener.port)))
            s.sendall(b'?WATCH={"enable":true,"json":true};')
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
            print(json.dumps([json.loads(l) for l in data.decode().splitlines() if '"TPV"' in l]))
            """
        let run = try runTool("/usr/bin/python3", ["-c", script], timeout: 60)
        #expect(run.status == 0, "\(run.err)")
        let tpvs = try #require(try JSONSerialization.jsonObject(with: Data(run.out.utf8)) as? [[String: Any]])
        #expect(!tpvs.isEmpty)
        let fixes = try GPSDListenerDaemon.replayedFixes()
        for t in tpvs {
            #expect(t["mode"] as? Int == 2)
            #expect(Set(t.keys).isSubset(of: ["class", "device", "mode", "time", "lat", "lon", "eph"]), "\(t.keys)")
            let lat = t["lat"] as? Double ?? 0, lon = t["lon"] as? Double ?? 0
            #expect(!fixes.contains { abs($0.coordinate.latitude - lat) < 1e-7 && abs($0.coordinate.longitude - lon) < 1e-7 },
                    "a replayed position, not a cell centre")
            let nearest = fixes.map { Geodesy.distance($0.coordinate, Coordinate(latitude: lat, longitude: lon)) }.min() ?? .infinity
            #expect(nearest < 5_000, "cell centre \(nearest) m from the fixes")
        }
        // At the approximate rate: at publication epochs, 600 s of fix time apart (docs/privacy.md,
        // "Publication epochs"); the log's 148 s cross one epoch's start (09:50).
        let iso = ISO8601DateFormatter()
        iso.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let times = tpvs.compactMap { ($0["time"] as? String).flatMap(iso.date(from:)) }
        #expect(times.count == tpvs.count && times.count == 2, "\(tpvs)")
        #expect(times.allSatisfy { Int($0.timeIntervalSince1970) % 600 == 0 }, "\(times)")
        #expect(zip(times, times.dropFirst()).allSatisfy { $1.timeIntervalSince($0) >= 600 }, "\(times)")
    }
}

/// 1,000 gpsd-protocol clients on one connection to a real gpsd (which alone refuses past 64),
/// in the fault tests' style: raw sockets polled from one thread, bounded in time and memory.
@Suite(.serialized, .timeLimit(.minutes(5)),
       .enabled(if: GPSDHarness.isAvailable && GPSDListenerDaemon.available, "needs gpsd and the gpsd corpus"))
struct ThousandGPSDClientsTests {
    @Test("1,000 clients each get the fixes, from one gpsd connection; memory reported")
    func thousandClients() async throws {
        let gpsd = try GPSDHarness()
        defer { gpsd.shutdown() }
        let port = try GPSDHarness.freePort()
        let daemon = try DaemonProcess(arguments: ["--gpsd", "\(gpsd.host):\(gpsd.portString)", "--log-level", "warning",
                                                   "--gpsd-listen", "127.0.0.1:\(port)"])
        defer { daemon.stop() }
        try #require(await waitUntil(timeout: 20) { !daemon.isRunning || GPSDHarness.canConnect(port: port) } && daemon.isRunning,
                     "the daemon exited: \(daemon.stderrText())")
        let pid = daemon.pid
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        try #require(limit.rlim_cur >= 2048 || limit.rlim_max >= 2048, "RLIMIT_NOFILE too low for 1,000 connections")
        if limit.rlim_cur < 2048 { limit.rlim_cur = min(limit.rlim_max, 4096); setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) }

        let clients = 1000
        var fds: [Int32] = []
        defer { fds.forEach { _ = Glibc.close($0) } }
        let baseline = residentKiB(pid)
        for i in 0..<clients {
            let fd = try Self.connect(port: port)
            fds.append(fd)
            let watch = Array("?WATCH={\"enable\":true,\"json\":true};".utf8)
            try #require(send(fd, watch, watch.count, Int32(MSG_NOSIGNAL)) == watch.count, "client \(i): send")
        }
        // Every client subscribed (its WATCH answered) before gpsd has anything to say.
        var text = [[UInt8]](repeating: [], count: clients)
        let watched = Self.read(fds, into: &text, timeout: 60) { $0.count(of: "\"class\":\"WATCH\"") >= 1 }
        #expect(watched == clients, "\(watched) of \(clients) WATCHes answered")
        try gpsd.serve(log: try #require(GPSDHarness.corpusLog(GPSDListenerDaemon.log)))
        var peak = baseline
        let served = Self.read(fds, into: &text, timeout: 60, sample: { peak = max(peak, residentKiB(pid)) }) {
            $0.count(of: "\"class\":\"TPV\"") >= 1
        }
        #expect(served == clients, "\(served) of \(clients) clients got a TPV")
        let gpsdConnections = try runTool("/usr/bin/ss", ["-Htn", "state", "established", "( dport = :\(gpsd.gpsdPort) )"])
            .out.split(whereSeparator: \.isNewline).count
        #expect(gpsdConnections == 1, "connections to gpsd: \(gpsdConnections)")
        #expect(daemon.isRunning)
        #expect(peak < baseline + 64 * 1024, "VmRSS \(baseline) → peak \(peak) KiB")
        let tpvs = text.map { $0.count(of: "\"class\":\"TPV\"") }
        print("1000 gpsd clients: VmRSS \(baseline) → peak \(peak) KiB; TPVs per client \(tpvs.min()!)…\(tpvs.max()!); gpsd connections \(gpsdConnections)")
    }

    static func connect(port: UInt16) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = port.bigEndian
        let ok = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        guard fd >= 0, ok else { throw DaemonProcess.Failure(description: "connect 127.0.0.1:\(port): \(errno)") }
        return fd
    }

    /// Reads what the clients are sent until `done` holds for each one's text (or `timeout`
    /// seconds, a failure guard); returns for how many it holds.
    static func read(_ fds: [Int32], into text: inout [[UInt8]], timeout: Double, sample: () -> Void = {},
                     until done: ([UInt8]) -> Bool) -> Int {
        var polls = fds.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        let deadline = ContinuousClock.now + .seconds(timeout)
        var met = text.map(done)
        while met.contains(false) && ContinuousClock.now < deadline {
            _ = poll(&polls, nfds_t(polls.count), 100)
            for i in polls.indices where polls[i].revents != 0 {
                let n = chunk.withUnsafeMutableBytes { recv(polls[i].fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
                if n > 0 {
                    text[i] += chunk[0..<n]
                    if !met[i] { met[i] = done(text[i]) }
                }
                polls[i].revents = 0
            }
            sample()
        }
        return met.filter { $0 }.count
    }
}

extension Array where Element == UInt8 {
    func count(of needle: String) -> Int {
        let n = Array(needle.utf8)
        guard count >= n.count else { return 0 }
        var found = 0, i = 0
        while i <= count - n.count {
            if self[i] == n[0] && self[i..<(i + n.count)].elementsEqual(n) { found += 1; i += n.count } else { i += 1 }
        }
        return found
    }
}
