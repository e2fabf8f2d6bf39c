import Foundation
import LocationClient
import LocationCore
import LocationProtocol
@testable import LocationDaemon
import TestSupport
import Testing

/// SIGHUP and the policy, through the real daemon (READY=1 on the notify socket marks the end
/// of each reload): a bad policy keeps the old one; a good one applies to the open session
/// (a `changed` event) and to new connections.
@Suite(.timeLimit(.minutes(5))) struct PolicyReloadTests {
    @Test func reloadKeepsOldPolicyWhenBadAndAppliesGoodOneToOpenSessions() async throws {
        let dir = try DaemonProcess.makeDirectory()
        let notify = try DatagramSocket(path: dir.appendingPathComponent("notify.sock").path)
        let config = dir.appendingPathComponent("locationd.toml")
        let me = getuid()
        try "[policy.me]\nuser = \(me)\nauthorization = \"always\"\naccuracy = \"approximate\"\n".write(to: config, atomically: true, encoding: .utf8)
        let daemon = try DaemonProcess(
            spawning: ["--config", config.path, "--socket", dir.appendingPathComponent("locationd.sock").path, "--gpsd", "127.0.0.1:1"],
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
        #expect(daemon.stderrText().contains("reload failed; keeping the current configuration: \(config.path):3: unknown authorization 'alway'; expected denied, when-in-use or always"))

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

    /// docs/privacy.md, "Programs that are away", through the real daemon and its database: a
    /// reload that takes `always` away ends the program's background monitoring and suspends its
    /// regions (the receiver is released: nothing needs fixes); giving it back resumes the
    /// regions; a restart under a revoking policy suspends them before anything is served.
    @Test func reloadAndRestartDecideWhatAProgramThatIsAwayKeeps() async throws {
        let dir = try DaemonProcess.makeDirectory()
        let notify = try DatagramSocket(path: dir.appendingPathComponent("notify.sock").path)
        let config = dir.appendingPathComponent("locationd.toml")
        func policy(_ authorization: String) throws {
            try "[policy.me]\nuser = \(getuid())\nauthorization = \"\(authorization)\"\naccuracy = \"precise\"\n"
                .write(to: config, atomically: true, encoding: .utf8)
        }
        func start() throws -> DaemonProcess {
            let daemon = try DaemonProcess(
                spawning: ["--config", config.path, "--socket", dir.appendingPathComponent("locationd.sock").path,
                            "--database", dir.appendingPathComponent("locationd.db").path, "--gpsd", "127.0.0.1:1"],
                environment: ["NOTIFY_SOCKET": notify.path], directory: dir)
            _ = try SystemdTests.read(notify) { SystemdTests.lines($0).contains("READY=1") }
            return daemon
        }
        func reload(_ daemon: DaemonProcess, to authorization: String) throws {
            try policy(authorization)
            daemon.signal(SIGHUP)
            _ = try SystemdTests.read(notify) { SystemdTests.lines($0).contains("READY=1") }
        }
        /// The daemon's view, asked by a connection of the same program without a session.
        func status(_ daemon: DaemonProcess) async throws
            -> (receiver: String?, background: Int?, regions: Int?, suspended: Bool?) {
            let watcher = try await LocationClient.connect(path: daemon.socketPath)
            defer { watcher.close() }
            let s = try await watcher.status()
            return (s.receiver, s.backgroundMonitors, s.regions, s.regionsSuspended)
        }

        try policy("always")
        // Each DaemonProcess removes the shared directory when released: both live to the end.
        let daemon = try start()
        defer { daemon.stop() }
        do {
            let program = try await LocationClient.connect(path: daemon.socketPath)
            try await program.startSession(.always)
            // The session recorded the process's own identity (groups included) for the program.
            let me = PeerIdentity.resolve(PeerCredentials(pid: getpid(), uid: getuid(), gid: getgid())).program
            let recorded = try ProgramIdentities(database: Database(path: dir.appendingPathComponent("locationd.db").path)).recorded(me)
            var groups = [gid_t](repeating: 0, count: 256)
            let n = getgroups(Int32(groups.count), &groups)
            #expect(recorded?.uid == getuid() && recorded?.groups == Set(groups.prefix(Int(n)) + [getgid()]).sorted())
            _ = try await program.request { .regionsAdd(id: $0, regions: [Region(id: "home", center: Coordinate(latitude: 52.5, longitude: 13.4), radius: 100)]) }
            _ = try await program.subscribe(SubscriptionOptions(events: [.visits]))
            program.close()  // away, its session not ended: monitoring continues
        }
        var away = try await status(daemon)
        guard try await waitUntil(timeout: 20, { away = try await status(daemon); return away.background == 1 }) else {
            Issue.record("never handed over: \(away)")
            return
        }
        #expect(away.receiver == "watching" && away.regions == 1 && away.suspended == false)

        try reload(daemon, to: "when-in-use")
        away = try await status(daemon)
        #expect(away.background == 0 && away.receiver == "released")
        #expect(away.regions == 1 && away.suspended == true, "status tells the program its regions are suspended")
        #expect(daemon.stderrText().contains("policy: background monitoring ended"))
        #expect(daemon.stderrText().contains("policy: regions suspended"))

        try reload(daemon, to: "always")
        away = try await status(daemon)
        #expect(away.background == 0 && away.receiver == "watching", "regions resumed; the ended monitor stays ended")
        #expect(away.regions == 1 && away.suspended == false)
        #expect(daemon.stderrText().contains("policy: regions resumed"))

        daemon.stop()
        try policy("when-in-use")
        let restarted = try start()
        defer { restarted.stop() }
        let afterRestart = try await status(restarted)
        #expect(afterRestart.receiver == "released" && afterRestart.regions == 1 && afterRestart.suspended == true, "\(afterRestart)")
        #expect(restarted.stderrText().contains("policy: regions suspended"))
    }
}
