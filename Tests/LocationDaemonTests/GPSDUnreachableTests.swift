import Foundation
import LocationClient
import TestSupport
import Testing

/// A gpsd the daemon cannot reach is a warning in its log naming host:port, the reason and that
/// it keeps retrying — once, not at every retry (docs/gpsd.md, "Reconnect and stop timing").
/// Nothing needs gpsd: the port is one nothing listens on, the host one that does not resolve.
@Suite(.serialized, .timeLimit(.minutes(5)))
struct GPSDUnreachableTests {
    /// Starts the daemon on `gpsd` at log level trace, starts a session and subscribes (so the
    /// receiver is wanted) and waits until its log shows `attempts` failed attempts; returns
    /// its stderr.
    static func log(gpsd: String, attempts: Int) async throws -> String {
        let daemon = try DaemonProcess(arguments: ["--gpsd", gpsd, "--log-level", "trace"])
        defer { daemon.stop() }
        let client = try await daemon.connect()
        defer { client.close() }
        _ = try await client.startSession()
        _ = try await client.subscribe()
        #expect(try await client.status().receiver == "watching")
        let failed = await waitUntil(timeout: 60) {
            daemon.stderrText().components(separatedBy: "gpsd connection attempt failed").count - 1 >= attempts
        }
        let text = daemon.stderrText()
        #expect(failed, "fewer than \(attempts) failed attempts logged: \(text.suffix(3000))")
        return text
    }

    static func warnings(in log: String) -> [Substring] {
        log.split(separator: "\n").filter { $0.contains(" warning locationd: ") && $0.contains("gpsd") }
    }

    @Test func aClosedPortIsWarnedOnceWithHostPortAndReason() async throws {
        let port = try GPSDHarness.freePort()
        let log = try await Self.log(gpsd: "127.0.0.1:\(port)", attempts: 4)
        let warnings = Self.warnings(in: log)
        #expect(warnings.count == 1, "\(warnings)")
        #expect(warnings.first?.hasSuffix(" warning locationd: cannot connect to gpsd at 127.0.0.1:\(port): connection refused: nothing listens on that port (is gpsd running? systemctl status gpsd.socket gpsd; or correct [gpsd] host/port or --gpsd); retrying with backoff (0.1 s doubling to 1 s between attempts), warning again only if the reason changes") == true,
                "\(warnings)")
        // Each retry is a trace line with the reason.
        #expect(log.contains("trace locationd: gpsd connection attempt failed attempt=2 gpsd=127.0.0.1:\(port) reason="), "\(log.suffix(3000))")
    }

    @Test func anUnresolvableHostIsWarnedOnceNamingIt() async throws {
        let log = try await Self.log(gpsd: "nosuchhost.invalid", attempts: 2)
        let warnings = Self.warnings(in: log)
        #expect(warnings.count == 1, "\(warnings)")
        // A resolver that does not answer within the connect timeout (2 s) makes it a timeout.
        let resolved = warnings.first?.contains(" warning locationd: cannot connect to gpsd at nosuchhost.invalid:2947: cannot resolve the host name 'nosuchhost.invalid' (") == true
        let timedOut = warnings.first?.contains(" warning locationd: cannot connect to gpsd at nosuchhost.invalid:2947: no connection within 2 s") == true
        #expect(resolved || timedOut, "\(warnings)")
    }
}
