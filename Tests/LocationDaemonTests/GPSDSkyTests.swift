import Foundation
import GPSDProtocol
@testable import LocationDaemon
import LocationCore
import TestSupport
import Testing

/// SKY reports: what gpsd 3.22 wrote for the corpus logs (the `.chk` files), decoded by the
/// daemon's libgps decoder and written again by `GPSDReport.sky`, is the same line.
@Suite struct GPSDSkyTests {
    static func decode(_ decoder: GPSDLineDecoder, _ line: String) -> GPSDMessage {
        var bytes = Array(line.utf8)
        return bytes.withUnsafeMutableBytes { decoder.decode(UnsafeRawBufferPointer($0)) }
    }

    @Test("Every SKY of gpsd 3.22 in the corpus, decoded and written again, is gpsd's line",
          .enabled(if: GPSDListenerDaemon.available, "gpsd corpus not found at ../shared/corpus/gpsd"))
    func corpusSkyReportsRoundTrip() throws {
        let files = try FileManager.default.contentsOfDirectory(atPath: GPSDHarness.corpusDirectory.path).filter { $0.hasSuffix(".log.chk") }.sorted()
        var compared = 0, logs = 0, mismatches: [String] = []
        for file in files {
            let text = try String(contentsOf: GPSDHarness.corpusDirectory.appendingPathComponent(file), encoding: .utf8)
            let decoder = GPSDLineDecoder()
            var found = false
            for line in text.split(whereSeparator: \.isNewline) where line.hasPrefix("{\"class\":\"SKY\"") {
                guard case .sky(let sky, _) = Self.decode(decoder, String(line)) else {
                    mismatches.append("\(file): not decoded as SKY: \(line)")
                    continue
                }
                let written = String(decoding: GPSDReport.sky(sky, device: ""), as: UTF8.self)
                if written != line + "\r\n", mismatches.count < 5 { mismatches.append("\(file):\n  gpsd \(line)\n  here \(written)") }
                compared += 1
                found = true
            }
            if found { logs += 1 }
        }
        #expect(mismatches.isEmpty, "\(mismatches.joined(separator: "\n"))")
        #expect(compared > 1000 && logs > 40, "\(compared) SKY reports from \(logs) logs")
    }

    @Test("A SKY of another receiver than the fixes' is told apart")
    func skyOfTheFixesReceiver() {
        let decoder = GPSDLineDecoder()
        _ = Self.decode(decoder, #"{"class":"TPV","device":"/dev/ttyACM0","mode":2,"time":"2026-05-01T12:00:00.000Z","lat":1.0,"lon":2.0}"#)
        let same = Self.decode(decoder, #"{"class":"SKY","device":"/dev/ttyACM0","nSat":1,"uSat":1,"satellites":[{"PRN":7,"el":10.0,"az":333.0,"ss":39.0,"used":true}]}"#)
        let other = Self.decode(decoder, #"{"class":"SKY","device":"/dev/ttyUSB1","nSat":0,"uSat":0}"#)
        guard case .sky(let sky, true) = same, case .sky(let empty, false) = other else {
            Issue.record("\(same) \(other)")
            return
        }
        #expect(sky.satellites == [GPSDSky.Satellite(prn: 7, elevation: 10, azimuth: 333, signalToNoise: 39, used: true)])
        #expect(sky.dop == GPSDSky.DOP())
        // Nothing of the report before is left over.
        #expect(empty.satellites.isEmpty)
    }
}

/// Satellites through a real gpsd fed a corpus log: gpsd's SKY reports reach the programs that
/// see fixes precisely, and no others.
@Suite(.serialized, .timeLimit(.minutes(3)),
       .enabled(if: GPSDHarness.isAvailable && GPSDListenerDaemon.available, "needs gpsd and the gpsd corpus"))
struct GPSDSkyEndToEndTests {
    @Test("A precise client gets gpsd's SKY reports (and POLL's sky), an approximate one none")
    func skyForPreciseProgramsOnly() async throws {
        let gpsd = try GPSDHarness()
        defer { gpsd.shutdown() }
        let port = try GPSDHarness.freePort()
        let dir = try DaemonProcess.makeDirectory()
        let python = URL(fileURLWithPath: "/usr/bin/python3").resolvingSymlinksInPath().path
        let config = dir.appendingPathComponent("locationd.toml")
        try "[policy.python]\nexecutable = \"\(python)\"\nauthorization = \"when-in-use\"\naccuracy = \"approximate\"\n"
            .write(to: config, atomically: true, encoding: .utf8)
        let daemon = try DaemonProcess(arguments: ["--config", config.path, "--gpsd", "\(gpsd.host):\(gpsd.portString)",
                                                   "--gpsd-listen", "127.0.0.1:\(port)"], directory: dir)
        defer { daemon.stop() }
        try #require(await waitUntil(timeout: 20) { !daemon.isRunning || GPSDHarness.canConnect(port: port) }, "\(daemon.stderrText())" as Comment)

        // The approximate program: Python reading to the end of the connection.
        let script = """
            import socket, sys
            s = socket.create_connection(("127.0.0.1", \(port)))
            s.sendall(b'?WATCH={"enable":true,"json":true};')
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                sys.stdout.buffer.write(chunk)
                sys.stdout.flush()
            """
        let approximateOutput = dir.appendingPathComponent("python.out")
        let approximate = try GeoClueNMEATests.Background(python, ["-c", script], log: approximateOutput)
        defer { approximate.stop() }
        func approximateText() -> String { (try? String(contentsOf: approximateOutput, encoding: .utf8)) ?? "" }
        try #require(await waitUntil(timeout: 20) { approximateText().contains("\"class\":\"WATCH\"") }, "\(approximateText())")

        // The precise program: this test (the daemon's own user, the built-in owner rule).
        let precise = RawStream(try ThousandGPSDClientsTests.connect(port: port))
        let watch = Array("?WATCH={\"enable\":true,\"json\":true};".utf8)
        try #require(send(precise.fd, watch, watch.count, Int32(MSG_NOSIGNAL)) == watch.count)
        try #require(precise.read { $0.contains("\"class\":\"WATCH\"") }, "\(precise.text)")

        let log = try #require(GPSDHarness.corpusLog(GPSDListenerDaemon.log))
        try gpsd.serve(log: log)
        let chk = try String(contentsOf: URL(fileURLWithPath: log.path + ".chk"), encoding: .utf8)
            .split(whereSeparator: \.isNewline).filter { $0.hasPrefix("{\"class\":\"SKY\"") }.map(String.init)
        func lines(_ text: String, _ cls: String) -> [String] {
            text.split(whereSeparator: \.isNewline).map { $0.hasSuffix("\r") ? String($0.dropLast()) : String($0) }
                .filter { $0.hasPrefix("{\"class\":\"\(cls)\"") }
        }
        try #require(precise.read(timeout: 30) { lines($0, "TPV").count >= 1 }, "no TPV: \(precise.text)")
        let device = try #require(GPSDListenerDaemon.objects(precise.text).first { $0["class"] as? String == "TPV" }?["device"] as? String)
        let expected = chk.map { "{\"class\":\"SKY\",\"device\":\"\(device)\"," + $0.dropFirst("{\"class\":\"SKY\",".count) }
        #expect(precise.read(timeout: 30) { lines($0, "SKY").count >= expected.count - 1 && lines($0, "SKY").last == expected.last }, "\(lines(precise.text, "SKY").count) of \(chk.count) SKYs")
        let skies = lines(precise.text, "SKY")
        // gpsd's first may come before the receiver's first TPV (whose device it is not yet known to be).
        #expect(skies.count >= expected.count - 1 && skies == Array(expected.suffix(skies.count)),
                "\(skies.count) SKYs: \(zip(skies, expected.suffix(skies.count)).first { $0 != $1 }.map { "\($0)\nvs \($1)" } ?? "")")

        let before = precise.drain()
        let poll = Array("?POLL;".utf8)
        try #require(send(precise.fd, poll, poll.count, Int32(MSG_NOSIGNAL)) == poll.count)
        #expect(precise.read { _ in lines(precise.text(from: before), "POLL").count == 1 })
        let answer = try #require(GPSDListenerDaemon.objects(precise.text(from: before)).first { $0["class"] as? String == "POLL" })
        let pollSky = try #require((answer["sky"] as? [[String: Any]])?.first)
        #expect(pollSky["nSat"] as? Int == GPSDListenerDaemon.objects(skies.last ?? "").first?["nSat"] as? Int)

        // The end of the daemon ends Python's connection: everything it was sent is written.
        daemon.signal(SIGTERM)
        #expect(await waitUntil(timeout: 20) { !approximate.process.isRunning })
        let seen = GPSDListenerDaemon.objects(approximateText())
        #expect(seen.contains { $0["class"] as? String == "TPV" && $0["mode"] as? Int == 2 }, "\(approximateText())")
        #expect(!seen.contains { $0["class"] as? String == "SKY" }, "an approximate program got a SKY")
        #expect(seen.filter { $0["class"] as? String == "TPV" }.allSatisfy { $0["mode"] as? Int == 2 })
    }

    @Test("cgps lists the receiver's satellites", .enabled(if: TmuxSession.available && FileManager.default.isExecutableFile(atPath: "/usr/bin/cgps"), "needs tmux and cgps (gpsd-tools)"))
    func cgpsShowsTheSatellites() async throws {
        let gpsd = try GPSDHarness()
        defer { gpsd.shutdown() }
        let port = try GPSDHarness.freePort()
        let daemon = try DaemonProcess(arguments: ["--gpsd", "\(gpsd.host):\(gpsd.portString)", "--gpsd-listen", "127.0.0.1:\(port)"])
        defer { daemon.stop() }
        try #require(await waitUntil(timeout: 20) { !daemon.isRunning || GPSDHarness.canConnect(port: port) } && daemon.isRunning,
                     "the daemon exited: \(daemon.stderrText())")
        // cgps is the one subscriber: gpsd reads the log once cgps watches (receiver gating).
        let log = try #require(GPSDHarness.corpusLog(GPSDListenerDaemon.log))
        try gpsd.serve(log: log)
        let tmux = try TmuxSession("/usr/bin/cgps -s 127.0.0.1:\(port)")
        defer { tmux.stop() }
        let last = try #require(try String(contentsOf: URL(fileURLWithPath: log.path + ".chk"), encoding: .utf8)
            .split(whereSeparator: \.isNewline).last { $0.hasPrefix("{\"class\":\"SKY\"") }.flatMap { GPSDListenerDaemon.objects(String($0)).first })
        let seen = try #require(last["nSat"] as? Int), used = try #require(last["uSat"] as? Int)
        let satellites = try #require(last["satellites"] as? [[String: Any]])
        // cgps's header: "Seen 12/Used 12"; a row per satellite: "GP  7    7  10.0  333.0  39.0  Y".
        let header = String(format: "Seen %2d/Used %2d", seen, used)
        var screen = ""
        let shown = await waitUntil(timeout: 30) {
            screen = (try? tmux.capture()) ?? ""
            return screen.contains(header)
        }
        #expect(shown, "no \(header):\n\(screen)")
        let rows = screen.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { $0.hasSuffix(" Y x") || $0.hasSuffix(" N x") }
        #expect(rows.count >= min(satellites.count, 10), "\(screen)")
    }
}
