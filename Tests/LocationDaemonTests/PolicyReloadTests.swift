import Foundation
import LocationClient
import LocationCore
import LocationProtocol
import Testing

/// SIGHUP and the policy, through the real daemon (READY=1 on the notify socket marks the end
/// of each reload): a bad policy keeps the old one; a good one applies to the open session
/// (a `changed` event) and to new connections.
@Suite struct PolicyReloadTests {
    @Test func reloadKeepsOldPolicyWhenBadAndAppliesGoodOneToOpenSessions() async throws {
        let dir = try SpawnedDaemon.makeDirectory()
        let notify = try DatagramSocket(path: dir.appendingPathComponent("notify.sock").path)
        let config = dir.appendingPathComponent("locationd.toml")
        let me = getuid()
        try "[policy.me]\nuser = \(me)\nauthorization = \"always\"\naccuracy = \"approximate\"\n".write(to: config, atomically: true, encoding: .utf8)
        let daemon = try SpawnedDaemon(
            arguments: ["--config", config.path, "--socket", dir.appendingPathComponent("locationd.sock").path, "--gpsd", "127.0.0.1:1"],
            environment: ["NOTIFY_SOCKET": notify.path], directory: dir)
        defer { daemon.stop() }
        _ = try SystemdTests.read(notify) { SystemdTests.lines($0).contains("READY=1") }
        let client = try await LocationClient.connect(path: daemon.socketPath)
        defer { client.close() }
        var messages = client.messages.makeAsyncIterator()
        #expect(try await client.startSession(.always).accuracy == .approximate)

        // A bad policy: the reload fails, the old policy stays.
        try "[policy.me]\nuser = \(me)\nauthorization = \"alway\"\n".write(to: config, atomically: true, encoding: .utf8)
        daemon.signal(SIGHUP)
        _ = try SystemdTests.read(notify) { SystemdTests.lines($0).contains("READY=1") }
        #expect(try await client.status().grant == "always approximate (rule me)")
        #expect(daemon.stderrText.contains("reload failed; keeping the current configuration: \(config.path):3: unknown authorization 'alway'; expected denied, when-in-use or always"))

        // A good one: the open session changes at once, and new connections get it too.
        try "[policy.me]\nuser = \(me)\nauthorization = \"when-in-use\"\naccuracy = \"precise\"\n".write(to: config, atomically: true, encoding: .utf8)
        daemon.signal(SIGHUP)
        guard case .session(let changed) = try await messages.expectNext() else { Issue.record("no session event"); return }
        #expect(changed.state == .changed && changed.authorization == .whenInUse && changed.accuracy == .precise)
        _ = try SystemdTests.read(notify) { SystemdTests.lines($0).contains("READY=1") }
        let other = try await LocationClient.connect(path: daemon.socketPath)
        defer { other.close() }
        #expect(try await other.startSession(.always).authorization == .whenInUse)
    }
}
