import Foundation
import LocationClient
@testable import LocationDaemon
import LocationProtocol
import TestSupport
import Testing

/// `locationctl reload`, the unit's `ExecReload=`, against the real daemon: a `reload` request
/// on its socket, answered once the reload has finished (systemd 252 ends a reload job when
/// `ExecReload=` exits, and `kill -HUP` exited before the daemon had begun): 0 when the file
/// applied, 1 with the daemon's reason when it was refused; only root and the daemon's user may
/// ask.
@Suite(.timeLimit(.minutes(5))) struct ReloadCommandTests {
    static func reload(_ daemon: DaemonProcess, _ extra: [String] = []) throws -> (status: Int32, out: String, err: String) {
        try LocationCtlReplayTests.run(["reload", "--socket", daemon.socketPath] + extra)
    }

    /// The notifications already queued on `socket` (nothing waits for more).
    static func queued(_ socket: DatagramSocket) -> [String] {
        var all: [String] = []
        while let m = socket.receiveText(timeout: 0) { all.append(m) }
        return all
    }

    @Test func returnsOnceTheReloadIsInForceAndFailsWithTheReasonWhenRefused() async throws {
        let dir = try DaemonProcess.makeDirectory()
        let notify = try DatagramSocket(path: dir.appendingPathComponent("notify.sock").path)
        let config = dir.appendingPathComponent("locationd.toml")
        func policy(_ rule: String) throws {
            try "[policy.me]\nuser = \(getuid())\n\(rule)".write(to: config, atomically: true, encoding: .utf8)
        }
        try policy("authorization = \"always\"\naccuracy = \"approximate\"\n")
        let daemon = try DaemonProcess(
            spawning: ["--config", config.path, "--socket", dir.appendingPathComponent("locationd.sock").path, "--gpsd", "127.0.0.1:1"],
            environment: ["NOTIFY_SOCKET": notify.path], directory: dir)
        defer { daemon.stop() }
        _ = try SystemdTests.read(notify) { SystemdTests.lines($0).contains("READY=1") }
        let client = try await LocationClient.connect(path: daemon.socketPath)
        defer { client.close() }
        #expect(try await client.startSession(.always).accuracy == .approximate)

        // A good file: in force by the time locationctl returns. The daemon has logged it, sent
        // RELOADING=1 (with MONOTONIC_USEC=) and READY=1, and a new session gets the new rule.
        try policy("authorization = \"when-in-use\"\naccuracy = \"precise\"\n")
        let applied = try Self.reload(daemon)
        #expect(applied.status == 0 && applied.out.isEmpty && applied.err.isEmpty, "\(applied)")
        #expect(daemon.stderrText().contains("reload: policy applied"), "\(daemon.stderrText())")
        let sent = Self.queued(notify)
        let reloading = try #require(sent.firstIndex { SystemdTests.lines($0).contains("RELOADING=1") }, "\(sent)")
        #expect(SystemdTests.lines(sent[reloading]).contains { $0.hasPrefix("MONOTONIC_USEC=") }, "\(sent[reloading])")
        #expect(sent[(reloading + 1)...].contains { SystemdTests.lines($0).contains("READY=1") }, "\(sent)")
        let second = try await LocationClient.connect(path: daemon.socketPath)
        defer { second.close() }
        #expect(try await second.startSession(.always).authorization == .whenInUse)

        // A broken file: exit 1 with the daemon's error (file, line, value, fix), and the daemon
        // runs on with the policy it had.
        try policy("authorization = \"alway\"\n")
        let refused = try Self.reload(daemon)
        #expect(refused.status == 1, "\(refused)")
        #expect(refused.err.contains("locationd refused the reload and keeps its current configuration: \(config.path):3: unknown authorization 'alway'; expected denied, when-in-use or always"),
                "\(refused.err)")
        #expect(daemon.stderrText().contains("reload failed; keeping the current configuration: \(config.path):3: unknown authorization 'alway'"))
        let third = try await LocationClient.connect(path: daemon.socketPath)
        defer { third.close() }
        #expect(try await third.startSession(.always).authorization == .whenInUse)
        #expect(try await client.status().grant == "when-in-use precise (rule me)")

        // Several at once (systemd runs one, a script may run more): each is answered by a
        // reload of its own, all applied.
        try policy("authorization = \"always\"\naccuracy = \"precise\"\n")
        let waiters = try (0..<4).map { _ in
            let p = Process()
            p.executableURL = LocationCtlReplayTests.locationctl
            p.arguments = ["reload", "--socket", daemon.socketPath]
            let err = Pipe()
            p.standardError = err
            try p.run()
            return (p, err)
        }
        for (p, err) in waiters {
            p.waitUntilExit()
            #expect(p.terminationStatus == 0, "\(String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self))")
        }
        let fourth = try await LocationClient.connect(path: daemon.socketPath)
        defer { fourth.close() }
        #expect(try await fourth.startSession(.always).authorization == .always)
    }

    /// A rule naming an executable that does not exist is taken, and the log says so at start
    /// and at each reload that still names it (a typo matched no one, silently).
    @Test func aMissingExecutableIsLoggedAtStartAndReload() throws {
        let dir = try DaemonProcess.makeDirectory()
        let notify = try DatagramSocket(path: dir.appendingPathComponent("notify.sock").path)
        let config = dir.appendingPathComponent("locationd.toml")
        let missing = dir.appendingPathComponent("navti").path
        func rule(_ line: String) throws {
            try "[policy.nav]\n\(line)executable = \"\(missing)\"\nauthorization = \"always\"\n".write(to: config, atomically: true, encoding: .utf8)
        }
        try rule("")
        let daemon = try DaemonProcess(
            spawning: ["--config", config.path, "--socket", dir.appendingPathComponent("locationd.sock").path, "--gpsd", "127.0.0.1:1"],
            environment: ["NOTIFY_SOCKET": notify.path], directory: dir)
        defer { daemon.stop() }
        _ = try SystemdTests.read(notify) { SystemdTests.lines($0).contains("READY=1") }
        let warning = "'policy.nav.executable' is \"\(missing)\", which does not exist: rule 'nav' matches no program until one is installed at that path"
        #expect(daemon.stderrText().contains("\(config.path):2: \(warning)"), "\(daemon.stderrText())")

        try rule("accuracy = \"precise\"\n")
        let reloaded = try Self.reload(daemon)
        #expect(reloaded.status == 0, "\(reloaded)")
        #expect(daemon.stderrText().contains("reload: \(config.path):3: \(warning)"), "\(daemon.stderrText())")
    }

    /// The reload held open: the config file is a FIFO, so the daemon's reload waits in open(2)
    /// until the test writes the new file. After RELOADING=1 locationctl must go on waiting (its
    /// stderr pipe stays open); once the file is written it exits 0, with the new level already
    /// in force.
    @Test func waitsWhileTheDaemonIsStillReloading() throws {
        let dir = try DaemonProcess.makeDirectory()
        let notify = try DatagramSocket(path: dir.appendingPathComponent("notify.sock").path)
        let config = dir.appendingPathComponent("locationd.toml")
        #expect(mkfifo(config.path, 0o600) == 0)
        /// Blocks until the daemon opens the file, then gives it `text` and the end.
        func feed(_ text: String) {
            let fd = open(config.path, O_WRONLY | O_CLOEXEC)
            let bytes = Array(text.utf8)
            #expect(fd >= 0 && write(fd, bytes, bytes.count) == bytes.count)
            close(fd)
        }
        let daemon = try DaemonProcess(
            spawning: ["--config", config.path, "--socket", dir.appendingPathComponent("locationd.sock").path, "--gpsd", "127.0.0.1:1"],
            environment: ["NOTIFY_SOCKET": notify.path], directory: dir)
        defer { daemon.stop() }
        feed("[log]\nlevel = \"info\"\n")
        _ = try SystemdTests.read(notify) { SystemdTests.lines($0).contains("READY=1") }

        let ctl = Process()
        ctl.executableURL = LocationCtlReplayTests.locationctl
        ctl.arguments = ["reload", "--socket", daemon.socketPath]
        let err = Pipe()
        ctl.standardError = err
        try ctl.run()
        defer { if ctl.isRunning { ctl.terminate() } }
        _ = try SystemdTests.read(notify) { SystemdTests.lines($0).contains("RELOADING=1") }
        // That it does not return can only be watched for a while: half a second, while one that
        // does not wait (kill -HUP) exits within milliseconds. Nothing waits on this to go on.
        var pfd = pollfd(fd: err.fileHandleForReading.fileDescriptor, events: Int16(POLLIN), revents: 0)
        #expect(poll(&pfd, 1, 500) == 0, "locationctl returned while the daemon was still reloading")
        feed("[log]\nlevel = \"debug\"\n")
        let said = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        ctl.waitUntilExit()
        #expect(ctl.terminationStatus == 0, "\(said)")
        #expect(daemon.stderrText().contains(#"reload: applied key=log.level new="debug" old="info""#), "\(daemon.stderrText())")
    }

    /// A reload is an administrator's action: another user (nobody, via setpriv) who may
    /// connect gets `notPermitted`, and nothing is reloaded.
    @Test(.enabled(if: getuid() == 0, "needs root: runs a client as nobody (setpriv)"))
    func onlyRootAndTheDaemonsUserMayReload() async throws {
        let dir = try DaemonProcess.makeDirectory()
        let notify = try DatagramSocket(path: dir.appendingPathComponent("notify.sock").path)
        let daemon = try DaemonProcess(
            spawning: ["--socket", dir.appendingPathComponent("locationd.sock").path, "--gpsd", "127.0.0.1:1"],
            environment: ["NOTIFY_SOCKET": notify.path], directory: dir)
        defer { daemon.stop() }
        _ = try SystemdTests.read(notify) { SystemdTests.lines($0).contains("READY=1") }
        chmod(daemon.socketPath, 0o666)  // nobody may connect; the request is what is refused
        chmod(dir.path, 0o755)
        let reply = try OtherUserTests.requestAsNobody(socket: daemon.socketPath, request: #"{"type":"reload","id":1}"#)
        #expect(reply.contains(#""type":"error","id":1,"code":"notPermitted","message":"reload is for root and the daemon's user only""#), "\(reply)")
        #expect(!Self.queued(notify).contains { SystemdTests.lines($0).contains("RELOADING=1") })
        #expect(daemon.stderrText().contains("reload request refused: not root or the daemon's user"), "\(daemon.stderrText())")
    }

    /// The unit's `ExecReload=` runs as the daemon's user: a daemon run as `daemon` takes a
    /// reload from `locationctl reload` run as `daemon` too.
    @Test(.enabled("user 'daemon' cannot run the built locationd (a parent folder is not searchable by others)") {
        getuid() == 0 && (try? OtherUserTests.daemonUserCanRunLocationd()) == true
    })
    func theDaemonsOwnUserMayReload() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("locationd-reload-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let config = dir.appendingPathComponent("locationd.toml")
        try "[log]\nprecise_coordinates = false\n".write(to: config, atomically: true, encoding: .utf8)
        chmod(config.path, 0o644)
        let asDaemon = ["--reuid=daemon", "--regid=daemon", "--clear-groups"]
        let daemon = try DaemonProcess(arguments: ["--config", config.path, "--gpsd", "127.0.0.1:1"], directory: dir,
                                       launcher: ["/usr/bin/setpriv"] + asDaemon)
        defer { daemon.stop() }
        try await daemon.connect().close()
        try "[log]\nprecise_coordinates = true\n".write(to: config, atomically: true, encoding: .utf8)
        chmod(config.path, 0o644)
        let result = try runToExit(URL(fileURLWithPath: "/usr/bin/setpriv"),
                                   asDaemon + [LocationCtlReplayTests.locationctl.path, "reload", "--socket", daemon.socketPath])
        #expect(result.status == 0, "\(result)")
        #expect(daemon.stderrText().contains("reload: applied key=log.precise_coordinates new=true old=false"), "\(daemon.stderrText())")
    }

    /// No daemon at the socket fails at once, naming the socket.
    @Test func noDaemonIsAClearFailure() throws {
        let dir = try DaemonProcess.makeDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let missing = dir.appendingPathComponent("none.sock").path
        let result = try LocationCtlReplayTests.run(["reload", "--socket", missing])
        #expect(result.status == 1)
        #expect(result.err.contains("cannot connect to locationd at \(missing)"), "\(result.err)")
    }
}
