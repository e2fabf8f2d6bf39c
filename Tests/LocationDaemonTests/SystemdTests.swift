import Foundation
import LocationClient
import LocationCore
@testable import LocationDaemon
import Logging
import Synchronization
@testable import SystemdLogging
import TestSupport
import TOMLConfig
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The real `locationd` under a stand-in service manager: a datagram socket as NOTIFY_SOCKET
/// (libsystemd's sd_notify sends there), a socket passed as fd 3 (socket activation), a
/// datagram socket standing in for journald (`StandInJournal`).
@Suite(.serialized, .timeLimit(.minutes(5))) struct SystemdTests {
    /// Reads notifications until one satisfies `match`; all of them, in order.
    static func read(_ socket: DatagramSocket, timeout: Double = 10, until match: (String) -> Bool) throws -> [String] {
        var seen: [String] = []
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            guard let m = socket.receiveText(timeout: max(0, deadline.timeIntervalSinceNow)) else {
                throw DaemonProcess.Failure(description: "no matching notification within \(timeout) s; got \(seen)")
            }
            seen.append(m)
            if match(m) { return seen }
        }
    }

    static func lines(_ m: String) -> [String] { m.split(separator: "\n").map(String.init) }

    /// The daemon (no gpsd) with `config` as its config file and NOTIFY_SOCKET on a datagram
    /// socket, plus `environment`.
    static func spawn(config: String, environment: [String: String]) throws -> (daemon: DaemonProcess, notify: DatagramSocket, config: URL) {
        let dir = try DaemonProcess.makeDirectory()
        let notify = try DatagramSocket(path: dir.appendingPathComponent("notify.sock").path, timestamps: true)
        let file = dir.appendingPathComponent("locationd.toml")
        try config.write(to: file, atomically: true, encoding: .utf8)
        let daemon = try DaemonProcess(
            spawning: ["--config", file.path, "--socket", dir.appendingPathComponent("locationd.sock").path, "--gpsd", "127.0.0.1:1"],
            environment: environment.merging(["NOTIFY_SOCKET": notify.path]) { mine, _ in mine }, directory: dir)
        return (daemon, notify, file)
    }

    /// A peer's value with a newline (an executable path may hold one) cannot forge a log line
    /// of its own on stderr: control characters are escaped.
    @Test func stderrLogLinesStayOneLine() {
        let line = String(decoding: StderrLogHandler.oneLine("connection opened exe=/tmp/x\n2026-01-01T00:00:00.000Z info locationd: forged\r\u{1}\tend"), as: UTF8.self)
        #expect(line == #"connection opened exe=/tmp/x\n2026-01-01T00:00:00.000Z info locationd: forged\r\x01"# + "\tend")
        #expect(!line.contains("\n"))
    }

    /// WATCHDOG=1 every half WatchdogSec, not on every 500 ms status tick (which woke PID 1 twice
    /// a second with WatchdogSec=10s); never less often than asked.
    @Test func watchdogPingsAtItsIntervalNotEveryStatusTick() {
        for (ping, tick, every) in [(UInt64(5_000_000), UInt64(500_000), 10), (100_000, 100_000, 1), (750_000, 500_000, 1), (1_000_000, 500_000, 2)] {
            let s = ServiceSupervisor.schedule(ping: ping)
            #expect(s.tickMicroseconds == tick && s.ticksPerPing == every, "ping \(ping)")
            #expect(UInt64(s.ticksPerPing) * s.tickMicroseconds <= ping)
        }
        #expect(ServiceSupervisor.schedule(ping: nil).tickMicroseconds == 500_000)
    }

    @Test func notifyReadyAfterSocketWatchdogStatusReloadStopping() async throws {
        let (daemon, notify, config) = try Self.spawn(config: "[log]\nlevel = \"info\"\n", environment: ["WATCHDOG_USEC": "200000"])
        defer { daemon.stop() }

        // READY=1 comes once the socket accepts connections: connect at once, no retry.
        let untilReady = try Self.read(notify) { Self.lines($0).contains("READY=1") }
        #expect(untilReady.count == 1, "nothing before READY=1: \(untilReady)")
        let ready = untilReady.last!
        #expect(ready.contains("MAINPID=\(daemon.pid)"))
        #expect(ready.contains("STATUS=gpsd 127.0.0.1:1: not connected; 0 subscribers"))
        let client = try await LocationClient.connect(path: daemon.socketPath)
        defer { client.close() }
        #expect(!client.hello.version.isEmpty)

        // WATCHDOG=1 every half WATCHDOG_USEC (100 ms), timed by when each ping was queued on
        // the socket (SCM_TIMESTAMP), not when the test read it: pings a busy test reads
        // together were still sent apart.
        var pings: [Double] = []
        while pings.count < 5 {
            guard let (m, time) = try notify.receiveTimestamped(timeout: 10) else {
                throw DaemonProcess.Failure(description: "only \(pings.count) WATCHDOG=1 within 10 s")
            }
            if Self.lines(m).contains("WATCHDOG=1") { pings.append(time) }
        }
        let span = pings.last! - pings.first!
        #expect(span > 0.2 && span < 2.0, "4 intervals of 100 ms took \(span) s")

        // STATUS= follows the subscriber count.
        try await client.startSession(.always)
        _ = try await client.subscribe()
        _ = try Self.read(notify) { $0.contains("STATUS=gpsd 127.0.0.1:1: not connected; 1 subscriber") }

        // SIGHUP: RELOADING=1, the file re-read, READY=1 again; the level applies live, the port
        // is reported as needing a restart.
        try "[log]\nlevel = \"debug\"\n[gpsd]\nport = 2948\n[socket]\nflood_burst = 50\n".write(to: config, atomically: true, encoding: .utf8)
        daemon.signal(SIGHUP)
        let reload = try Self.read(notify) { Self.lines($0).contains("READY=1") }
        let reloading = try #require(reload.first { Self.lines($0).contains("RELOADING=1") })
        #expect(reloading.contains("MONOTONIC_USEC="))
        let log = daemon.stderrText()
        #expect(log.contains("reload: applied key=log.level new=\"debug\" old=\"info\""), "\(log)")
        #expect(log.contains("applies after a restart"), "\(log)")
        #expect(log.contains("key=socket.flood_burst new=50 old=200"), "\(log)")
        #expect(!log.contains("gpsd.port"), "the flag --gpsd still wins: \(log)")
        // The command line still wins over the file: the daemon keeps 127.0.0.1:1 regardless.

        // SIGTERM: STOPPING=1, then a clean exit.
        daemon.signal(SIGTERM)
        _ = try Self.read(notify) { Self.lines($0).contains("STOPPING=1") }
        #expect(daemon.waitForExit() == 0, "\(daemon.stderrText())")
        #expect(!FileManager.default.fileExists(atPath: daemon.socketPath))
    }

    @Test func watchdogPingsStopWhenTheEventLoopStalls() throws {
        let dir = try DaemonProcess.makeDirectory()
        let notify = try DatagramSocket(path: dir.appendingPathComponent("notify.sock").path)
        let daemon = try DaemonProcess(
            spawning: ["--socket", dir.appendingPathComponent("locationd.sock").path, "--gpsd", "127.0.0.1:1"],
            environment: ["NOTIFY_SOCKET": notify.path, "WATCHDOG_USEC": "200000", "LOCATIOND_TEST_STALL_ON": "SIGUSR2"],
            directory: dir)
        defer { daemon.stop() }
        _ = try Self.read(notify) { Self.lines($0).contains("READY=1") }
        var pings = 0
        _ = try Self.read(notify) { m in
            if Self.lines(m).contains("WATCHDOG=1") { pings += 1 }
            return pings >= 2
        }
        daemon.signal(SIGUSR2)
        // The hook announces the stall from the loop itself, then blocks it: pings sent before
        // the announcement may still be read, none after.
        _ = try Self.read(notify) { $0.contains("STATUS=stalled by test hook") }
        // Ten ping intervals (100 ms each) of silence: the watchdog would fire.
        let after = notify.receiveText(timeout: 1.0)
        #expect(after == nil, "a notification after the stall: \(after ?? "")")
        #expect(daemon.waitForExit(timeout: 0) == nil, "still running, just stuck")
    }

    /// daemon.shutdown_timeout bounds the stop: with the event loop stuck (the test hook), the
    /// hub never reports it has processed its input, and the daemon gives up and says so.
    @Test func aShutdownThatCannotFinishEndsAfterShutdownTimeout() throws {
        let (daemon, notify, _) = try Self.spawn(config: "[daemon]\nshutdown_timeout = 0.5\n",
                                                 environment: ["LOCATIOND_TEST_STALL_ON": "SIGUSR2"])
        defer { daemon.stop() }
        _ = try Self.read(notify) { Self.lines($0).contains("READY=1") }
        daemon.signal(SIGUSR2)
        _ = try Self.read(notify) { $0.contains("STATUS=stalled by test hook") }
        // Timed from before the signal: the daemon's 0.5 s cannot start earlier, however late
        // the test reads STOPPING=1.
        let stopping = Date()
        daemon.signal(SIGTERM)
        _ = try Self.read(notify) { Self.lines($0).contains("STOPPING=1") }
        #expect(daemon.waitForExit(timeout: 10) == 1, "\(daemon.stderrText())")
        let took = Date().timeIntervalSince(stopping)
        #expect(took > 0.4 && took < 5, "the stop was abandoned after \(took) s; shutdown_timeout is 0.5 s")
        #expect(daemon.stderrText().contains("shutdown did not finish within 0.5 s (daemon.shutdown_timeout); exiting"),
                "\(daemon.stderrText())")
    }

    @Test func socketActivationServesThePassedSocket() async throws {
        let dir = try DaemonProcess.makeDirectory()
        let notify = try DatagramSocket(path: dir.appendingPathComponent("notify.sock").path)
        let activated = dir.appendingPathComponent("activated.sock").path
        let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        try #require(listener >= 0)
        try #require(withSockaddr(activated) { bind(listener, $0, $1) } == 0)
        try #require(listen(listener, 16) == 0)
        let daemon = try DaemonProcess(
            spawning: ["--socket", dir.appendingPathComponent("locationd.sock").path, "--gpsd", "127.0.0.1:1"],
            environment: ["NOTIFY_SOCKET": notify.path], directory: dir, passing: listener)
        close(listener)  // the child holds its copy
        defer { daemon.stop() }
        _ = try Self.read(notify) { Self.lines($0).contains("READY=1") }

        let client = try await LocationClient.connect(path: activated)
        defer { client.close() }
        #expect(!client.hello.version.isEmpty)
        let status = try await client.status()
        #expect(status.subscribers == 0)
        // The configured path was not bound: the passed socket replaced it.
        #expect(!FileManager.default.fileExists(atPath: daemon.socketPath))
        #expect(daemon.stderrText().contains("listening on an inherited socket fd=3"))
        // The stop names what was served, not the configured path it never bound.
        client.close()
        daemon.signal(SIGTERM)
        #expect(daemon.waitForExit(timeout: 10) == 0, "\(daemon.stderrText())")
        #expect(daemon.stderrText().contains("stopped listening fd=3"), "\(daemon.stderrText())")
        #expect(!daemon.stderrText().contains(daemon.socketPath), "\(daemon.stderrText())")
    }

    /// The daemon held in its start at a known point: its privacy secret is a FIFO, which it
    /// reads after opening the database, waiting there for the test to write it. Returns the
    /// daemon and the FIFO's write end, open once the daemon has opened the read end.
    static func heldInItsStart() async throws -> (daemon: DaemonProcess, fifo: Int32) {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("locationd-test-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let secret = dir.appendingPathComponent("privacy-secret").path
        #expect(mkfifo(secret, 0o600) == 0)
        let daemon = try DaemonProcess(arguments: ["--gpsd", "127.0.0.1:1"], directory: dir)
        // The write end opens once the daemon has opened the read end (ENXIO until then).
        var fd: Int32 = -1
        let deadline = Date().addingTimeInterval(10)
        while fd < 0 && daemon.isRunning && Date() < deadline {
            fd = open(secret, O_WRONLY | O_NONBLOCK | O_CLOEXEC)
            if fd < 0 { try await Task.sleep(for: .milliseconds(5)) }  // polling for startup, not synchronisation
        }
        guard fd >= 0 else {
            defer { daemon.stop() }
            throw DaemonProcess.Failure(description: "the daemon never opened its privacy secret: \(daemon.stderrText())")
        }
        return (daemon, fd)
    }

    /// A SIGHUP while the daemon is still starting (opening and restoring its database, seconds
    /// with many regions) is a reload once it runs. It killed the daemon (SIGHUP's default
    /// action, on the main thread, which does not block it).
    @Test func aSIGHUPWhileStartingIsAReloadOnceRunning() async throws {
        let (daemon, fd) = try await Self.heldInItsStart()
        defer { daemon.stop() }
        daemon.signal(SIGHUP)  // blocked reading the secret: the start has not finished
        let text = Array("00000000000000ab\n".utf8)
        #expect(write(fd, text, text.count) == text.count)
        close(fd)
        let client = try await daemon.connect()
        client.close()
        let deadline = Date().addingTimeInterval(10)
        var log = daemon.stderrText()
        while !log.contains("reloaded") && daemon.isRunning && Date() < deadline {
            try await Task.sleep(for: .milliseconds(20))  // polling for the log line, not synchronisation
            log = daemon.stderrText()
        }
        #expect(daemon.isRunning)
        #expect(log.contains("reloaded"), "\(log)")
    }

    /// A SIGTERM while the daemon is still starting ends it at once, status 0: nothing is
    /// served yet. Caught and held back for the running service, a start stuck on its database
    /// (here: a secret nobody writes) waited for TimeoutStopSec='s SIGKILL.
    @Test func aSIGTERMWhileStartingEndsTheStartAtOnce() async throws {
        let (daemon, fd) = try await Self.heldInItsStart()
        defer { daemon.stop(); close(fd) }
        daemon.signal(SIGTERM)
        #expect(daemon.waitForExit(timeout: 5) == 0, "\(daemon.stderrText())")
        #expect(daemon.stderrText().contains("stopped while starting (signal 15): nothing was served yet"), "\(daemon.stderrText())")
    }

    /// Under systemd (INVOCATION_ID set), a replay log in a home directory or /tmp, which the
    /// unit's ProtectHome=/PrivateTmp= hide from the daemon, is not just "no such file": the
    /// message says why and what to do. INVOCATION_ID alone is no sign (a shell inherits it from
    /// a terminal run as a service; another unit may not hide /home): with /home visible, the
    /// plain reason, as when run by hand. ProtectHome=yes is played by a mode-0000 tmpfs on
    /// /home in a mount namespace of the daemon's own (root only).
    @Test(.enabled(if: getuid() == 0 && DaemonProcess.canHideHome)) func aReplayLogTheUnitHidesSaysWhy() throws {
        let log = "/home/nobody-\(UUID().uuidString.prefix(8))/drive.nmea"
        let hint = "no such file, as the daemon sees it: the unit's ProtectHome=yes hides /home from locationd; copy the log to /var/lib/locationd (the unit's state directory) and name that"
        let invocation = ["INVOCATION_ID": "0123456789abcdef0123456789abcdef"]
        let protectHome = "mount -t tmpfs -o mode=000 tmpfs /home || exit 98; "
        for (environment, prelude, expected) in [(invocation, protectHome, hint), (invocation, "", "no such file; give the path"),
                                                 ([:], protectHome, "no such file; give the path"), ([:], "", "no such file; give the path")] {
            let dir = try DaemonProcess.makeDirectory()
            let daemon = try DaemonProcess(spawning: ["--replay", log, "--socket", dir.appendingPathComponent("s").path],
                                           environment: environment, directory: dir, wrapper: ["/usr/bin/unshare", "-m"], prelude: prelude)
            defer { daemon.stop() }
            #expect(daemon.waitForExit() == 64, "\(daemon.stderrText())")
            #expect(daemon.stderrText().contains("--replay '\(log)': cannot open it for reading: \(expected)"), "\(prelude) \(environment): \(daemon.stderrText())")
        }
    }

    /// A replay log named through a symbolic link (or a linked directory) into a home directory
    /// is hidden the same way under the unit: the message names where it leads and why, not
    /// just "no such file" for a path outside /home.
    @Test(.enabled(if: getuid() == 0 && DaemonProcess.canHideHome)) func aReplayLogLinkedIntoAHiddenDirectorySaysWhy() throws {
        let target = "/home/nobody-\(UUID().uuidString.prefix(8))/drive.nmea"
        // The links outside /tmp, which the unit hides itself (that is said first).
        let links = "/dev/shm/ld-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: links, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(atPath: links) }
        let link = links + "/drive.nmea"
        let linkedDirectory = links + "/logs"
        #expect(symlink(target, link) == 0)
        #expect(symlink((target as NSString).deletingLastPathComponent, linkedDirectory) == 0)
        for log in [link, linkedDirectory + "/drive.nmea"] {
            let dir = try DaemonProcess.makeDirectory()
            let daemon = try DaemonProcess(spawning: ["--replay", log, "--socket", dir.appendingPathComponent("s").path],
                                           environment: ["INVOCATION_ID": "0123456789abcdef0123456789abcdef"], directory: dir,
                                           wrapper: ["/usr/bin/unshare", "-m"], prelude: "mount -t tmpfs -o mode=000 tmpfs /home || exit 98; ")
            defer { daemon.stop() }
            #expect(daemon.waitForExit() == 64)
            #expect(daemon.stderrText().contains("--replay '\(log)': cannot open it for reading: no such file, as the daemon sees it: it leads to \(target), and the unit's ProtectHome=yes hides /home from locationd; copy the log to /var/lib/locationd (the unit's state directory) and name that"), "\(daemon.stderrText())")
        }
    }

    /// A refused config file (exit 78) or command line (64) does not fix itself, so the unit does
    /// not restart the daemon for them. `Restart=on-failure` alone would, every `RestartSec=2s`
    /// for good: the start limit (5 starts per 10 s, a window that begins again once it has
    /// passed) is never reached 2 s apart, and the journal would fill with the same error.
    @Test func theUnitDoesNotRestartAfterAConfigOrUsageError() throws {
        let unit = try String(contentsOf: ConfigTests.repo.appendingPathComponent("systemd/locationd.service"), encoding: .utf8)
        let prevented = unit.split(separator: "\n").filter { $0.hasPrefix("RestartPreventExitStatus=") }
            .flatMap { $0.dropFirst("RestartPreventExitStatus=".count).split(separator: " ").map(String.init) }
        #expect(unit.contains("\nRestart=on-failure\n"))
        #expect(Set(prevented).isSuperset(of: ["64", "78"]), "\(prevented)")
    }

    /// A config file refused at start (exit 78) is reported before logging is set up, on
    /// stderr: when stderr is the journal's stream (JOURNAL_STREAM names it) the line carries the
    /// `<3>` prefix journald reads as its priority (sd-daemon(3)). It had none, so the journal
    /// stored why the daemon would not start at priority 6 (info), hidden from `journalctl -p err`.
    @Test func aConfigErrorAtStartIsAnErrorInTheJournal() throws {
        let dir = try DaemonProcess.makeDirectory()
        let config = dir.appendingPathComponent("locationd.toml").path
        try "[gpsd]\nhots = \"x\"\n".write(toFile: config, atomically: true, encoding: .utf8)
        // The file the daemon's stderr goes to (truncated, not replaced, at spawn): its device and inode.
        let stderrPath = dir.appendingPathComponent("stderr.log").path
        #expect(FileManager.default.createFile(atPath: stderrPath, contents: nil))
        var st = stat()
        #expect(stat(stderrPath, &st) == 0)
        let daemon = try DaemonProcess(
            spawning: ["--config", config, "--socket", dir.appendingPathComponent("locationd.sock").path, "--gpsd", "127.0.0.1:1"],
            environment: ["JOURNAL_STREAM": "\(st.st_dev):\(st.st_ino)"], directory: dir)
        defer { daemon.stop() }
        #expect(daemon.waitForExit() == 78)
        #expect(daemon.stderrText() == "<3>locationd: \(config):2: unknown key 'gpsd.hots'; expected one of host, port, device\n")
    }

    @Test(.enabled(if: StandInJournal.isAvailable, "needs root and unshare: a stand-in journald at /run/systemd/journal/socket in a mount namespace"))
    func daemonLogsToTheJournal() throws {
        let journal = try StandInJournal(directory: try DaemonProcess.makeDirectory())
        let daemon = try journal.spawn(arguments: ["--socket", journal.directory.appendingPathComponent("locationd.sock").path, "--gpsd", "127.0.0.1:1"])
        defer { daemon.stop() }
        var entries: [[String: String]] = []
        while !entries.contains(where: { $0["MESSAGE"]?.hasPrefix("serving") == true }) {
            entries.append(try #require(try journal.receive(timeout: 10), "no journal entry; stderr: \(daemon.stderrText())"))
        }
        let serving = entries.last!
        #expect(serving["SYSLOG_IDENTIFIER"] == "locationd")
        #expect(serving["PRIORITY"] == "6")
        #expect(serving["LOCATIOND_SOCKET"] == daemon.socketPath)
        #expect(serving["LOCATIOND_SOURCE"] == "gpsd 127.0.0.1:1")
        #expect(serving["CODE_FILE"]?.hasSuffix("Daemon.swift") == true)
        #expect(serving["CODE_FUNC"] == "run(wakes:wake:)")
        #expect(daemon.stderrText().isEmpty, "nothing on stderr while the journal takes it")
        // The last entries of a stop are sent before the process exits.
        daemon.signal(SIGTERM)
        #expect(daemon.waitForExit() == 0)
        var messages: [String] = []
        while let entry = try journal.receive(timeout: 0) { messages.append(entry["MESSAGE"] ?? "") }
        #expect(messages.last?.hasPrefix("stopped") == true, "\(messages)")
    }

    /// A journald that stops reading (busy, stopped or hung) does not stop the daemon: it serves,
    /// pings the watchdog and answers while nothing of its log is taken, drops what does not fit
    /// its queue, and says how many once the journal reads again. (libsystemd's
    /// sd_journal_sendv waits for as long as the journal's socket is full.)
    @Test(.enabled(if: StandInJournal.isAvailable, "needs root and unshare: a stand-in journald at /run/systemd/journal/socket in a mount namespace"))
    func aJournalThatStopsReadingDoesNotStopTheDaemon() async throws {
        let journal = try StandInJournal(directory: try DaemonProcess.makeDirectory())
        let notify = try DatagramSocket(path: journal.directory.appendingPathComponent("notify.sock").path)
        let daemon = try journal.spawn(arguments: ["--socket", journal.directory.appendingPathComponent("locationd.sock").path,
                                                   "--gpsd", "127.0.0.1:1", "--log-level", "debug"],
                                       environment: ["NOTIFY_SOCKET": notify.path, "WATCHDOG_USEC": "1000000"])
        defer { daemon.stop() }
        _ = try Self.read(notify) { Self.lines($0).contains("READY=1") }
        // Each connection logs a few lines: far more than the journal's socket and the writer's
        // queue hold together.
        for _ in 0..<(2 * JournalWriter.capacity) {
            let client = try await LocationClient.connect(path: daemon.socketPath)
            _ = try await client.status()
            client.close()
        }
        _ = try Self.read(notify) { Self.lines($0).contains("WATCHDOG=1") }
        // The journal reads again: what waited comes, then, before the next entry logged, the
        // count (a connection logs one, should the daemon have logged nothing since).
        var read = 0
        var report: [String: String]?
        while report == nil, let entry = try journal.receive(timeout: 0.5) {
            read += 1
            if entry["LOCATIOND_DROPPED"] != nil { report = entry }
        }
        if report == nil {
            let late = try await LocationClient.connect(path: daemon.socketPath)
            late.close()
        }
        while report == nil, let entry = try journal.receive(timeout: 10) {
            read += 1
            if entry["LOCATIOND_DROPPED"] != nil { report = entry }
        }
        let dropped = try #require(Int(report?["LOCATIOND_DROPPED"] ?? ""), "no count of dropped entries after \(read)")
        #expect(dropped > 0)
        #expect(report?["MESSAGE"] == "\(dropped) log messages were dropped while the journal was full (journald busy, stopped or hung)")
        #expect(report?["PRIORITY"] == "4")
        #expect(daemon.waitForExit(timeout: 0) == nil, "still running")
    }
}

@Suite(.timeLimit(.minutes(5))) struct JournalTests {
    /// Entries as the writer hands them over, standing in for journald.
    final class Delivered: Sendable {
        let entries = Mutex<[[String: String]]>([])
        /// Signalled at each entry taken.
        let taken = DispatchSemaphore(value: 0)
        /// While set, `deliver` waits (a journald that stopped reading).
        let stuck = DispatchSemaphore(value: 0)
        let blocking: Bool

        init(blocking: Bool = false) { self.blocking = blocking }

        func deliver(_ fields: [(String, String)]) -> Bool {
            if blocking { stuck.wait(); stuck.signal() }
            entries.withLock { $0.append(Dictionary(fields, uniquingKeysWith: { _, last in last })) }
            taken.signal()
            return true
        }

        func next() throws -> [String: String] {
            guard taken.wait(timeout: .now() + 10) == .success else { throw DaemonProcess.Failure(description: "no entry within 10 s") }
            return entries.withLock { $0.removeFirst() }
        }
    }

    @Test func handlerWritesStructuredFields() throws {
        let journal = Delivered()
        let writer = JournalWriter(identifier: "locationd", deliver: journal.deliver)
        let control = LogControl(level: .info)
        var logger = Logger(label: "locationd.test") { JournalLogHandler(label: $0, control: control, writer: writer) }
        logger[metadataKey: "peer_uid"] = "1000"

        logger.warning("slow reader\nclosed", metadata: ["subscriber": "7", "write-buffer": "65536"])
        let f = try journal.next()
        #expect(f["MESSAGE"] == "slow reader\nclosed peer_uid=1000 subscriber=7 write-buffer=65536")
        #expect(f["PRIORITY"] == "4")
        #expect(f["SYSLOG_IDENTIFIER"] == "locationd")
        #expect(f["CODE_FILE"]?.hasSuffix("SystemdTests.swift") == true)
        #expect(Int(f["CODE_LINE"] ?? "") ?? 0 > 0)
        #expect(f["CODE_FUNC"] == "handlerWritesStructuredFields()")
        #expect(f["LOCATIOND_LOGGER"] == "locationd.test")
        #expect(f["LOCATIOND_PEER_UID"] == "1000")
        #expect(f["LOCATIOND_SUBSCRIBER"] == "7")
        #expect(f["LOCATIOND_WRITE_BUFFER"] == "65536")

        // The level is shared and changes live (a reload); below it nothing is sent.
        logger.debug("hidden")
        control.level = .debug
        logger.debug("shown")
        let next = try journal.next()
        #expect(next["MESSAGE"] == "shown peer_uid=1000")
        #expect(next["PRIORITY"] == "7")
    }

    /// A journal that takes nothing: a log call never waits for it. `capacity` entries wait,
    /// the rest are dropped and counted, and once the journal takes entries again the count comes
    /// right before the first entry logged after the drops.
    @Test func aStuckJournalHoldsNoLoggerAndTheDroppedAreCounted() throws {
        let journal = Delivered(blocking: true)
        let writer = JournalWriter(identifier: "locationd", deliver: journal.deliver)
        let extra = 5
        for i in 0..<(JournalWriter.capacity + extra) {
            writer.submit([("MESSAGE", "m\(i)")]) { Issue.record("undelivered m\(i)") }
        }
        journal.stuck.signal()  // journald reads again
        let waited = try (0..<JournalWriter.capacity).map { _ in try journal.next()["MESSAGE"] }
        #expect(waited == (0..<JournalWriter.capacity).map { "m\($0)" })
        writer.submit([("MESSAGE", "after")]) { Issue.record("undelivered") }
        let report = try journal.next()
        #expect(report["LOCATIOND_DROPPED"] == "\(extra)")
        #expect(report["MESSAGE"] == "\(extra) log messages were dropped while the journal was full (journald busy, stopped or hung)")
        #expect(try journal.next()["MESSAGE"] == "after")
    }

    /// An entry the journal refuses (none there) goes to the fallback (stderr in the daemon).
    @Test func anEntryTheJournalRefusesGoesToTheFallback() {
        let writer = JournalWriter(identifier: "locationd", deliver: { _ in false })
        let fellBack = DispatchSemaphore(value: 0)
        writer.submit([("MESSAGE", "x")]) { fellBack.signal() }
        #expect(fellBack.wait(timeout: .now() + 10) == .success)
    }

    @Test func priorities() {
        #expect(JournalLogHandler.priority(.critical) == 2)
        #expect(JournalLogHandler.priority(.error) == 3)
        #expect(JournalLogHandler.priority(.notice) == 5)
        #expect(JournalLogHandler.priority(.trace) == 7)
    }

    @Test func journalStreamMatchesStderrOnly() {
        var st = stat()
        #expect(fstat(STDERR_FILENO, &st) == 0)
        #expect(JournalWriter.stderrIsJournal(environment: "\(st.st_dev):\(st.st_ino)"))
        #expect(!JournalWriter.stderrIsJournal(environment: "\(st.st_dev):\(st.st_ino &+ 1)"))
        #expect(!JournalWriter.stderrIsJournal(environment: nil))
        #expect(!JournalWriter.stderrIsJournal(environment: "garbage"))
    }

    @Test func coordinatesAreRoundedUnlessPrecise() {
        let control = LogControl()
        let c = Coordinate(latitude: 52.519912, longitude: -13.404801)
        #expect(control.describe(latitude: c.latitude, longitude: c.longitude) == "52.52,-13.40 (rounded to 0.01°)")
        control.preciseCoordinates = true
        #expect(control.describe(latitude: c.latitude, longitude: c.longitude) == "52.519912,-13.404801")
    }
}
