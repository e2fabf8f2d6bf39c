import Foundation
import LocationClient
import LocationCore
import LocationProtocol
import TestSupport
import Testing

/// Receiver gating against a real gpsd: the daemon holds a gpsd watch only while a session (or
/// a subscription, or a program's regions) needs fixes; `status` says which.
@Suite(.serialized, .enabled(if: GPSDHarness.isAvailable, "gpsd is not installed (apt-get install gpsd)"), .timeLimit(.minutes(5)))
struct ReceiverGatingTests {
    /// Established TCP connections to `port` on this host (gpsd's client list as the kernel
    /// sees it), from /proc/net/tcp.
    static func clients(ofPort port: UInt16) -> Int {
        // Read to the end: procfs files report size 0, and a partial read misses sockets.
        guard let handle = FileHandle(forReadingAtPath: "/proc/net/tcp") else { return -1 }
        defer { try? handle.close() }
        let text = String(decoding: handle.readDataToEndOfFile(), as: UTF8.self)
        let hex = String(format: "%04X", port)
        return text.split(separator: "\n").dropFirst().filter { line in
            let f = line.split(separator: " ")
            return f.count > 3 && f[2].hasSuffix(":" + hex) && f[3] == "01"
        }.count
    }

    @Test func gpsdWatchedOnlyWhileASessionNeedsFixes() async throws {
        let gpsd = try GPSDHarness()
        defer { gpsd.shutdown() }
        let daemon = try DaemonProcess(arguments: ["--gpsd", "\(gpsd.host):\(gpsd.portString)"])
        defer { daemon.stop() }
        let client = try await daemon.connect()
        defer { client.close() }

        // Connected, but no session: the receiver is released, nobody is gpsd's client.
        let idle = try await client.status()
        #expect(idle.receiver == "released" && idle.sessions == 0)
        #expect(Self.clients(ofPort: gpsd.gpsdPort) == 0)
        #expect(gpsd.feedConnections == 0)

        // A session: the daemon connects and watches; gpsd opens the device (the feed).
        var messages = client.messages.makeAsyncIterator()
        try await client.startSession()
        let watching = try await client.status()
        #expect(watching.receiver == "watching" && watching.sessions == 1)
        #expect(watching.grant == "when-in-use precise (rule owner (built in: root and the daemon's user))")
        try await client.subscribe()
        // Served now, so no fix can pass before the subscription exists.
        gpsd.serve(bytes: DaemonEndToEndTests.walk(count: 5, startSecond: 0).bytes)
        while true { if case .location = try await messages.expectNext() { break } }
        // A location came through gpsd, so gpsd opened the device (connected to the feed).
        #expect(gpsd.feedConnections >= 1)

        // Session over: the watch is released and the connection to gpsd closed.
        try await client.endSession()
        #expect(try await client.status().receiver == "released")
        try #require(await waitUntil(timeout: 30) { Self.clients(ofPort: gpsd.gpsdPort) == 0 }, "the daemon did not leave gpsd")

        // And resumed by the next session.
        try await client.startSession()
        #expect(try await client.status().receiver == "watching")
        guard await waitUntil(timeout: 30, { Self.clients(ofPort: gpsd.gpsdPort) == 1 }) else {
            daemon.signal(SIGTERM)
            _ = daemon.waitForExit()
            Issue.record("the daemon did not watch gpsd again; gpsd running: \(gpsd.processIdentifier.map { "\($0)" } ?? "no"); \(daemon.stderrText().suffix(3000))")
            return
        }
    }
}
