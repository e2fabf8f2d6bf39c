import Foundation
import Glibc
import LocationCore
import TestSupport
import Testing

/// GeoClue 2.6 (Debian's geoclue-2.0 and its demos) reading locationd's NMEA socket, on a private
/// D-Bus system bus this test starts: where-am-i prints the replayed fixes.
@Suite(.serialized, .timeLimit(.minutes(2)),
       .enabled(if: GeoClue.available, "needs geoclue-2.0, geoclue-2-demo, dbus-daemon and the gpsd corpus"))
struct GeoClueNMEATests {
    static let geoclue = GeoClue.daemon
    static let demos = GeoClue.demos

    /// A background process of the test, stopped by its pid.
    final class Background {
        let process = Process()
        init(_ path: String, _ arguments: [String], environment: [String: String?] = [:], log: URL) throws {
            process.executableURL = URL(fileURLWithPath: path)
            process.arguments = arguments
            var env = ProcessInfo.processInfo.environment
            for (name, value) in environment { env[name] = value }
            process.environment = env
            _ = FileManager.default.createFile(atPath: log.path, contents: nil)
            let handle = try FileHandle(forWritingTo: log)
            process.standardOutput = handle
            process.standardError = handle
            try process.run()
        }
        func stop() {
            if process.isRunning { kill(process.processIdentifier, SIGKILL); process.waitUntilExit() }
        }
    }

    @Test("where-am-i prints the replayed fixes to NMEA's precision")
    func whereAmI() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("locationd-geoclue-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let busSocket = dir.appendingPathComponent("system_bus_socket").path
        try """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <type>system</type>
              <listen>unix:path=\(busSocket)</listen>
              <auth>EXTERNAL</auth>
              <policy context="default">
                <allow user="*"/><allow own="*"/>
                <allow send_type="method_call"/><allow send_type="signal"/>
                <allow send_type="method_return"/><allow send_type="error"/>
                <allow receive_type="method_call"/><allow receive_type="signal"/>
                <allow receive_type="method_return"/><allow receive_type="error"/>
              </policy>
            </busconfig>
            """.write(to: dir.appendingPathComponent("bus.conf"), atomically: true, encoding: .utf8)
        let bus = try Background("/usr/bin/dbus-daemon", ["--config-file=\(dir.path)/bus.conf", "--nofork"],
                                 log: dir.appendingPathComponent("bus.log"))
        defer { bus.stop() }
        try #require(await waitUntil(timeout: 10) { FileManager.default.fileExists(atPath: busSocket) }, "no private bus")
        let env: [String: String?] = ["DBUS_SYSTEM_BUS_ADDRESS": "unix:path=\(busSocket)"]

        let nmea = dir.appendingPathComponent("nmea.sock").path
        let log = try #require(GPSDHarness.corpusLog(GPSDListenerDaemon.log))
        let daemon = try DaemonProcess(arguments: ["--replay", log.path, "--speed", "2", "--privacy-seed", "7", "--nmea-socket", nmea])
        defer { daemon.stop() }
        try #require(await waitUntil(timeout: 20) { FileManager.default.fileExists(atPath: nmea) || !daemon.isRunning },
                     "no NMEA socket: \(daemon.stderrText())")

        let geoclue = try Background(Self.geoclue, ["-t", "0", "--nmea-socket=\(nmea)"], environment: env,
                                     log: dir.appendingPathComponent("geoclue.log"))
        defer { geoclue.stop() }
        let owned = await waitUntil(timeout: 10) {
            let r = try? runTool("/usr/bin/dbus-send", ["--system", "--print-reply", "--dest=org.freedesktop.DBus", "/org/freedesktop/DBus",
                                                        "org.freedesktop.DBus.NameHasOwner", "string:org.freedesktop.GeoClue2"],
                                 environment: env, timeout: 5)
            return r?.out.contains("boolean true") == true
        }
        try #require(owned, "GeoClue did not come up on the private bus")
        let agent = try Background(Self.demos + "/agent", [], environment: env, log: dir.appendingPathComponent("agent.log"))
        defer { agent.stop() }

        let run = try runTool(Self.demos + "/where-am-i", ["-t", "8"], environment: env, timeout: 30)
        let printed = Self.locations(run.out)
        #expect(printed.count >= 2, "where-am-i printed: \(run.out) \(run.err)")
        let fixes = try GPSDListenerDaemon.replayedFixes()
        for p in printed {
            #expect(fixes.contains { abs($0.coordinate.latitude - p.latitude) <= 1e-6 && abs($0.coordinate.longitude - p.longitude) <= 1e-6 },
                    "\(p) is none of the replay's fixes")
        }
    }

    /// "Latitude:    52.850140°" / "Longitude:   5.313582°" pairs of where-am-i's output.
    static func locations(_ text: String) -> [Coordinate] {
        func value(_ line: Substring) -> Double? {
            Double(line.split(separator: ":", maxSplits: 1).last?.trimmingCharacters(in: .whitespaces).replacingOccurrences(of: "°", with: "") ?? "")
        }
        var out: [Coordinate] = []
        var latitude: Double?
        for line in text.split(whereSeparator: \.isNewline) {
            if line.hasPrefix("Latitude:") { latitude = value(line) }
            if line.hasPrefix("Longitude:"), let lat = latitude, let lon = value(line) { out.append(Coordinate(latitude: lat, longitude: lon)) }
        }
        return out
    }
}

enum GeoClue {
    static let daemon = "/usr/libexec/geoclue"
    static let demos = "/usr/libexec/geoclue-2.0/demos"
    static var available: Bool {
        [daemon, demos + "/agent", demos + "/where-am-i", "/usr/bin/dbus-daemon", "/usr/bin/dbus-send"]
            .allSatisfy(FileManager.default.isExecutableFile(atPath:)) && GPSDListenerDaemon.available
    }
}
