import Foundation
import LocationClient
import LocationCore
import LocationProtocol
#if canImport(Glibc)
import Glibc
#endif
import Testing

/// Fault tests (issue 7): the real daemon against a real gpsd that dies over and over, and
/// against hostile or broken clients. Each is bounded in time; none paces itself with sleeps.
@Suite(.serialized, .enabled(if: GPSDHarness.isAvailable, "gpsd is not installed (apt-get install gpsd)"))
struct FaultTests {
    /// gpsd killed (SIGKILL) and restarted `cycles` times while a subscriber watches: the daemon
    /// survives, reconnects within 2 s of each restart, and the subscriber sees
    /// `connected`, `fix`, the cycle's fixes, then `disconnected`, every time.
    @Test func gpsdKilledAndRestarted100Times() async throws {
        let cycles = ProcessInfo.processInfo.environment["FAULT_GPSD_CYCLES"].flatMap(Int.init) ?? 100
        let gpsd = try GPSDHarness(startGPSD: false)
        defer { gpsd.shutdown() }
        let daemon = try DaemonProcess(arguments: ["--gpsd", "\(gpsd.host):\(gpsd.portString)", "--log-level", "warning"])
        defer { daemon.stop() }
        let client = try await daemon.connect()
        defer { client.close() }
        var reader = MessageReader(client)
        try client.send(.subscribe(id: .number(1), options: SubscriptionOptions()))
        _ = try await reader.read { $0.states.count >= 1 }

        let clock = ContinuousClock()
        let began = clock.now
        var worst: Duration = .zero
        for cycle in 0..<cycles {
            // Three epochs of this cycle's own seconds: the fixes identify the cycle.
            let log = DaemonEndToEndTests.walk(count: 3, startSecond: 10 * cycle)
            gpsd.serve(bytes: log.bytes)
            try gpsd.start()
            let back = clock.now
            let seen = try await reader.read(timeout: 10) { messages in
                messages.fixes.contains { $0.time == log.fixes.last!.time }
            }
            let connectedAt = clock.now
            #expect(seen.states.prefix(2) == [.connected, .fix], "cycle \(cycle): \(seen.states)")
            #expect(seen.fixes.map(\.time) == Array(log.fixes.map(\.time).suffix(seen.fixes.count)),
                    "cycle \(cycle): fixes of another cycle")
            worst = max(worst, connectedAt - back)
            #expect(connectedAt - back < .seconds(2), "cycle \(cycle): reconnect and fixes took \(connectedAt - back)")
            gpsd.kill()
            let lost = try await reader.read(timeout: 10) { $0.states.contains(.disconnected) }
            #expect(lost.fixes.isEmpty, "cycle \(cycle): fixes after gpsd died")
            #expect(daemon.isRunning, "cycle \(cycle): the daemon died")
            if !daemon.isRunning { break }
        }
        #expect(daemon.isRunning)
        // The whole run stays bounded (≈ 0.12 s a cycle here: the backoff restarts at 0.1 s).
        #expect(clock.now - began < .seconds(60), "\(cycles) cycles took \(clock.now - began), worst reconnect \(worst)")
        print("gpsd kill/restart: \(cycles) cycles in \(clock.now - began), worst reconnect + fixes \(worst)")
    }
}
