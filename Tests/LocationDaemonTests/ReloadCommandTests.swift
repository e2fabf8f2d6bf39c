import Foundation
import LocationClient
@testable import LocationDaemon
import LocationProtocol
import Testing

/// `locationctl reload --pid PID`, the unit's `ExecReload=`, against the real daemon: it returns
/// only once the reload has finished (systemd 252 ends a reload job when `ExecReload=` exits,
/// and `kill -HUP` exited before the daemon had begun), 0 when the file applied and 1 with the
/// daemon's reason when it was refused; a missing process or record is a clear failure.
@Suite(.timeLimit(.minutes(5))) struct ReloadCommandTests {
    static func reload(_ pid: pid_t, _ runtime: URL?, _ extra: [String] = [], environment: [String: String?] = [:]) throws
        -> (status: Int32, out: String, err: String) {
        try LocationCtlReplayTests.run(["reload", "--pid", "\(pid)"] + (runtime.map { ["--runtime-directory", $0.path] } ?? []) + extra,
                                       environment: environment)
    }

    /// The notifications already queued on `socket` (nothing waits for more).
    static func queued(_ socket: DatagramSocket) -> [String] {
        var all: [String] = []
        while let m = socket.receiveText(timeout: 0) { all.append(m) }
        return all
    }

    @Test func returnsOnceTheReloadIsInForceAndFailsWithTheReasonWhenRefused() async throws {
        let dir = try SpawnedDaemon.makeDirectory()
        let runtime = dir.appendingPathComponent("run")
        try FileManager.default.createDirectory(at: runtime, withIntermediateDirectories: true)
        let notify = try DatagramSocket(path: dir.appendingPathComponent("notify.sock").path)
        let config = dir.appendingPathComponent("locationd.toml")
        func policy(_ rule: String) throws {
            try "[policy.me]\nuser = \(getuid())\n\(rule)".write(to: config, atomically: true, encoding: .utf8)
        }
        try policy("authorization = \"always\"\naccuracy = \"approximate\"\n")
        let daemon = try SpawnedDaemon(
            arguments: ["--config", config.path, "--socket", dir.appendingPathComponent("locationd.sock").path, "--gpsd", "127.0.0.1:1"],
            environment: ["NOTIFY_SOCKET": notify.path, "RUNTIME_DIRECTORY": runtime.path], directory: dir)
        defer { daemon.stop() }
        _ = try SystemdTests.read(notify) { SystemdTests.lines($0).contains("READY=1") }
        let client = try await LocationClient.connect(path: daemon.socketPath)
        defer { client.close() }
        #expect(try await client.startSession(.always).accuracy == .approximate)

        // A good file: in force by the time locationctl returns. The daemon has logged it, sent
        // RELOADING=1 (with the record's start) and READY=1, and a new session gets the new rule.
        try policy("authorization = \"when-in-use\"\naccuracy = \"precise\"\n")
        let applied = try Self.reload(daemon.pid, runtime)
        #expect(applied.status == 0 && applied.out.isEmpty && applied.err.isEmpty, "\(applied)")
        #expect(daemon.stderrText.contains("reload: policy applied"), "\(daemon.stderrText)")
        let sent = Self.queued(notify)
        let reloading = try #require(sent.firstIndex { SystemdTests.lines($0).contains("RELOADING=1") }, "\(sent)")
        #expect(sent[(reloading + 1)...].contains { SystemdTests.lines($0).contains("READY=1") }, "\(sent)")
        let record = try #require(ReloadRecord(line: String(contentsOf: runtime.appendingPathComponent("reload"), encoding: .utf8)))
        #expect(record.outcome == .ok)
        #expect(SystemdTests.lines(sent[reloading]).contains("MONOTONIC_USEC=\(record.start)"), "\(sent[reloading]) vs \(record)")
        let second = try await LocationClient.connect(path: daemon.socketPath)
        defer { second.close() }
        #expect(try await second.startSession(.always).authorization == .whenInUse)

        // A broken file: exit 1 with the daemon's error (file, line, value, fix), and the daemon
        // runs on with the policy it had. The earlier "ok" record began before this signal.
        try policy("authorization = \"alway\"\n")
        let refused = try Self.reload(daemon.pid, runtime)
        #expect(refused.status == 1, "\(refused)")
        #expect(refused.err.contains("locationd (pid \(daemon.pid)) refused the reload and keeps its current configuration: \(config.path):3: unknown authorization 'alway'; expected denied, when-in-use or always"),
                "\(refused.err)")
        #expect(daemon.stderrText.contains("reload failed; keeping the current configuration: \(config.path):3: unknown authorization 'alway'"))
        let third = try await LocationClient.connect(path: daemon.socketPath)
        defer { third.close() }
        #expect(try await third.startSession(.always).authorization == .whenInUse)
        #expect(try await client.status().grant == "when-in-use precise (rule me)")

        // Several at once (systemd runs one, a script may run more): signals merged into one
        // reload answer every waiter that sent one before it began.
        try policy("authorization = \"always\"\naccuracy = \"precise\"\n")
        let waiters = try (0..<4).map { _ in
            let p = Process()
            p.executableURL = LocationCtlReplayTests.locationctl
            p.arguments = ["reload", "--pid", "\(daemon.pid)", "--runtime-directory", runtime.path]
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
        let dir = try SpawnedDaemon.makeDirectory()
        let notify = try DatagramSocket(path: dir.appendingPathComponent("notify.sock").path)
        let config = dir.appendingPathComponent("locationd.toml")
        let missing = dir.appendingPathComponent("navti").path
        func rule(_ line: String) throws {
            try "[policy.nav]\n\(line)executable = \"\(missing)\"\nauthorization = \"always\"\n".write(to: config, atomically: true, encoding: .utf8)
        }
        try rule("")
        let daemon = try SpawnedDaemon(
            arguments: ["--config", config.path, "--socket", dir.appendingPathComponent("locationd.sock").path, "--gpsd", "127.0.0.1:1"],
            environment: ["NOTIFY_SOCKET": notify.path, "RUNTIME_DIRECTORY": dir.path], directory: dir)
        defer { daemon.stop() }
        _ = try SystemdTests.read(notify) { SystemdTests.lines($0).contains("READY=1") }
        let warning = "'policy.nav.executable' is \"\(missing)\", which does not exist: rule 'nav' matches no program until one is installed at that path"
        #expect(daemon.stderrText.contains("\(config.path):2: \(warning)"), "\(daemon.stderrText)")

        try rule("accuracy = \"precise\"\n")
        let reloaded = try Self.reload(daemon.pid, dir)
        #expect(reloaded.status == 0, "\(reloaded)")
        #expect(daemon.stderrText.contains("reload: \(config.path):3: \(warning)"), "\(daemon.stderrText)")
    }

    /// The reload held open: the config file is a FIFO, so the daemon's reload waits in open(2)
    /// until the test writes the new file. After RELOADING=1 locationctl must go on waiting (its
    /// stderr pipe stays open); once the file is written it exits 0, with the new level already
    /// in force.
    @Test func waitsWhileTheDaemonIsStillReloading() throws {
        let dir = try SpawnedDaemon.makeDirectory()
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
        let daemon = try SpawnedDaemon(
            arguments: ["--config", config.path, "--socket", dir.appendingPathComponent("locationd.sock").path, "--gpsd", "127.0.0.1:1"],
            environment: ["NOTIFY_SOCKET": notify.path, "RUNTIME_DIRECTORY": dir.path], directory: dir)
        defer { daemon.stop() }
        feed("[log]\nlevel = \"info\"\n")
        _ = try SystemdTests.read(notify) { SystemdTests.lines($0).contains("READY=1") }

        let ctl = Process()
        ctl.executableURL = LocationCtlReplayTests.locationctl
        ctl.arguments = ["reload", "--pid", "\(daemon.pid)", "--runtime-directory", dir.path]
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
        #expect(daemon.stderrText.contains(#"reload: applied key=log.level new="debug" old="info""#), "\(daemon.stderrText)")
    }

    /// Without `RUNTIME_DIRECTORY` (started by hand) both sides use the socket's directory, and
    /// a record left there by an earlier daemon is replaced at start by `0 ok`: its start time,
    /// from a monotonic clock that begins again at boot, could look later than a new reload's.
    @Test func withoutARuntimeDirectoryTheRecordIsNextToTheSocket() throws {
        let dir = try SpawnedDaemon.makeDirectory()
        let notify = try DatagramSocket(path: dir.appendingPathComponent("notify.sock").path)
        let record = dir.appendingPathComponent("reload")
        try "\(UInt64.max / 2) ok\n".write(to: record, atomically: true, encoding: .utf8)
        let daemon = try SpawnedDaemon(
            arguments: ["--socket", dir.appendingPathComponent("locationd.sock").path, "--gpsd", "127.0.0.1:1"],
            environment: ["NOTIFY_SOCKET": notify.path], directory: dir)
        defer { daemon.stop() }
        _ = try SystemdTests.read(notify) { SystemdTests.lines($0).contains("READY=1") }
        #expect(try String(contentsOf: record, encoding: .utf8) == "0 ok\n", "the stale record is still there")

        let result = try Self.reload(daemon.pid, nil, environment: ["LOCATIOND_SOCKET": daemon.socketPath, "RUNTIME_DIRECTORY": nil])
        #expect(result.status == 0, "\(result)")
        #expect(Self.queued(notify).contains { SystemdTests.lines($0).contains("RELOADING=1") })
        let written = try #require(ReloadRecord(line: String(contentsOf: record, encoding: .utf8)))
        #expect(written.outcome == .ok && written.start < UInt64.max / 2)
    }

    @Test func aMissingProcessOrRecordIsAClearFailure() throws {
        let dir = try SpawnedDaemon.makeDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }

        // Above pid_max: no process can have it.
        let pidMax = try #require(Int32(String(contentsOfFile: "/proc/sys/kernel/pid_max", encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)))
        let gone = try Self.reload(pidMax + 1, dir)
        #expect(gone.status == 1)
        #expect(gone.err.contains("cannot send SIGHUP to pid \(pidMax + 1): No such process (errno \(ESRCH))"), "\(gone.err)")

        // A process that ignores SIGHUP and records nothing (it says when its trap is set), with
        // an older record in the directory: that is no answer, and the wait ends at --timeout.
        let deaf = Process()
        deaf.executableURL = URL(fileURLWithPath: "/bin/sh")
        deaf.arguments = ["-c", "trap '' HUP; echo trapped; exec sleep 600"]
        let out = Pipe()
        deaf.standardOutput = out
        try deaf.run()
        defer { kill(deaf.processIdentifier, SIGKILL); deaf.waitUntilExit() }
        var said = [UInt8](repeating: 0, count: 8)
        #expect(read(out.fileHandleForReading.fileDescriptor, &said, said.count) == 8 && said == Array("trapped\n".utf8))
        try "1 ok\n".write(to: dir.appendingPathComponent("reload"), atomically: true, encoding: .utf8)
        let silent = try Self.reload(deaf.processIdentifier, dir, ["--timeout", "1"])
        #expect(silent.status == 1)
        #expect(silent.err.contains("locationd (pid \(deaf.processIdentifier)) did not record a finished reload in \(dir.path)/reload within 1 s (--timeout)"),
                "\(silent.err)")

        // A directory that is not there: nothing is signalled.
        let nowhere = try Self.reload(deaf.processIdentifier, dir.appendingPathComponent("missing"))
        #expect(nowhere.status == 1)
        #expect(nowhere.err.contains("cannot watch \(dir.path)/missing for locationd's reload record: No such file or directory; no signal sent"),
                "\(nowhere.err)")

        let zero = try Self.reload(0, dir)
        #expect(zero.status == 64 && zero.err.contains("--pid 0 is not a process id"), "\(zero.err)")
        let forever = try Self.reload(deaf.processIdentifier, dir, ["--timeout", "1e30"])
        #expect(forever.status == 64 && forever.err.contains("--timeout 1e+30 is out of range; expected more than 0 and at most 86400 seconds"), "\(forever.err)")
    }

    @Test func recordLinesAndTheDirectory() {
        #expect(ReloadRecord(start: 42, outcome: .ok).line == "42 ok\n")
        let failed = ReloadRecord(start: 7, outcome: .failed("/etc/l.toml:3: bad\nsecond line"))
        #expect(failed.line == "7 failed /etc/l.toml:3: bad second line\n")
        #expect(ReloadRecord(line: failed.line) == ReloadRecord(start: 7, outcome: .failed("/etc/l.toml:3: bad second line")))
        #expect(ReloadRecord(line: "42 ok\n") == ReloadRecord(start: 42, outcome: .ok))
        for bad in ["", "ok", "-1 ok", "42", "42 okay", "42 ok extra", "x failed why", "#2 ok"] { #expect(ReloadRecord(line: bad + "\n") == nil, "\(bad)") }
        // What a reader can see while the daemon rewrites the file in place: the new line not
        // yet ended, or ended with an older, longer record's tail still behind it.
        for partial in ["42 ok", "42 failed /etc/l.toml:3: b", "42 ok\nled /etc/l.toml:3: bad\n", "42 failed x\nx\n"] {
            #expect(ReloadRecord(line: partial) == nil, "\(partial)")
        }

        #expect(ReloadRecord.directory(runtimeDirectory: "/run/locationd", socketPath: "/tmp/s.sock") == "/run/locationd")
        #expect(ReloadRecord.directory(runtimeDirectory: "/run/a:/run/b", socketPath: "/tmp/s.sock") == "/run/a")
        #expect(ReloadRecord.directory(runtimeDirectory: nil, socketPath: "/run/locationd/locationd.sock") == "/run/locationd")
        #expect(ReloadRecord.directory(runtimeDirectory: "", socketPath: "/s.sock") == "/")
        #expect(ReloadRecord.directory(runtimeDirectory: nil, socketPath: "s.sock") == ".")
        #expect(ReloadRecord.path(in: "/run/locationd") == "/run/locationd/reload")
    }

    /// A record written into the file in place (it could not be replaced), seen by a reader at
    /// every byte of every step: the old record, no record, or the new one, never the new line's start with the
    /// old one's tail (written over the old line from its start, `48407108512 ok` could be read
    /// half way through writing a refusal over an `ok`).
    @Test(arguments: [("48407064428 ok\n", "48407108512 failed /etc/l.toml:3: bad\n"),
                      ("48407064428 failed /etc/l.toml:3: bad\n", "48407108512 ok\n"),
                      ("0 ok\n", "48407108512 ok\n"), ("9 ok\n", "1 ok\n")])
    func anInPlaceRewriteIsNeverReadAsAMix(old: String, new: String) throws {
        let want = try #require(ReloadRecord(line: new)), before = try #require(ReloadRecord(line: old))
        var file = Array(old.utf8)
        var seen: Set<String> = []
        for step in ReloadRecordFile.inPlaceSteps(Array(new.utf8)) {
            switch step {
            case .write(let offset, let bytes):
                for done in 0...bytes.count {
                    var state = file
                    if state.count < offset + done { state += [UInt8](repeating: 0, count: offset + done - state.count) }
                    state.replaceSubrange(offset..<(offset + done), with: bytes[..<done])
                    let text = String(decoding: state, as: UTF8.self)
                    if let read = ReloadRecord(line: text) { #expect(read == want || read == before, "\(text.debugDescription) read as \(read)") }
                    seen.insert(text)
                    if done == bytes.count { file = state }
                }
            case .truncate(let length):
                file = Array(file.prefix(length))
            }
        }
        #expect(String(decoding: file, as: UTF8.self) == new)
        #expect(seen.count > 2)
    }

    /// The record's temporary file is a new one: a symlink planted at the name it had
    /// (`reload.PID.tmp`, in a directory others can write to) made the daemon truncate and
    /// overwrite the link's target.
    @Test func theRecordNeverWritesThroughAPlantedLink() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("reload-link-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let victim = dir.appendingPathComponent("victim")
        try "precious\n".write(to: victim, atomically: true, encoding: .utf8)
        let planted = ReloadRecord.path(in: dir.path) + ".\(getpid()).tmp"
        try FileManager.default.createSymbolicLink(atPath: planted, withDestinationPath: victim.path)

        let file = ReloadRecordFile(directory: dir.path)
        #expect(file.write(ReloadRecord(start: 42, outcome: .ok)) == .replaced)
        #expect(try String(contentsOf: victim, encoding: .utf8) == "precious\n")
        #expect(try String(contentsOfFile: file.path, encoding: .utf8) == "42 ok\n")
        var st = stat()
        #expect(lstat(file.path, &st) == 0 && st.st_mode & S_IFMT == S_IFREG && st.st_mode & 0o777 == 0o644)
        // Nothing else is left in the directory: the temporary file became the record.
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted() == ["reload", "reload.\(getpid()).tmp", "victim"])
    }

    /// A directory where the record goes: the daemon cannot make it (rename: Is a directory),
    /// and locationctl reload waited out its whole --timeout, then blamed the pid or the
    /// directory. It fails at once, naming the path, the errno and the fix, and signals nothing.
    @Test func aRecordTheDaemonCannotMakeFailsAtOnceWithoutSignalling() throws {
        let dir = try SpawnedDaemon.makeDirectory()
        let runtime = dir.appendingPathComponent("run")
        let record = runtime.appendingPathComponent("reload")
        try FileManager.default.createDirectory(at: record, withIntermediateDirectories: true)
        let notify = try DatagramSocket(path: dir.appendingPathComponent("notify.sock").path)
        let daemon = try SpawnedDaemon(
            arguments: ["--socket", dir.appendingPathComponent("locationd.sock").path, "--gpsd", "127.0.0.1:1"],
            environment: ["NOTIFY_SOCKET": notify.path, "RUNTIME_DIRECTORY": runtime.path], directory: dir)
        defer { daemon.stop() }
        _ = try SystemdTests.read(notify) { SystemdTests.lines($0).contains("READY=1") }
        #expect(daemon.stderrText.contains("cannot make the reload record: cannot rename \(record.path)."), "\(daemon.stderrText)")
        #expect(daemon.stderrText.contains(" to \(record.path): Is a directory; locationctl reload (ExecReload=) refuses to signal without it"),
                "\(daemon.stderrText)")

        let result = try Self.reload(daemon.pid, runtime, ["--timeout", "20"])
        #expect(result.status == 1, "\(result)")
        #expect(result.err.contains("\(record.path), where locationd records its reloads, is a directory (Is a directory, errno \(EISDIR)), so it cannot record one: remove it and restart locationd; no signal sent"),
                "\(result.err)")
        #expect(!Self.queued(notify).contains { SystemdTests.lines($0).contains("RELOADING=1") }, "signalled anyway")
        #expect(try FileManager.default.contentsOfDirectory(atPath: runtime.path) == ["reload"], "a temporary file was left")

        // A directory the daemon never wrote in (another one, or one it could not): no record, no signal.
        let elsewhere = dir.appendingPathComponent("elsewhere")
        try FileManager.default.createDirectory(at: elsewhere, withIntermediateDirectories: true)
        let wrong = try Self.reload(daemon.pid, elsewhere, ["--timeout", "20"])
        #expect(wrong.status == 1, "\(wrong)")
        #expect(wrong.err.contains("locationd (pid \(daemon.pid)) has no reload record at \(elsewhere.path)/reload (No such file or directory, errno \(ENOENT))"), "\(wrong.err)")
        #expect(wrong.err.contains("or \(elsewhere.path) is not its runtime directory (--runtime-directory); no signal sent"), "\(wrong.err)")

        // The same refusal names the other cause, a record removed while the daemon ran, and the
        // restart that makes it again.
        #expect(wrong.err.contains("or the file was removed since it started (restart it to make the file again: systemctl restart locationd)"), "\(wrong.err)")
    }

    /// The runtime directory stops being writable by the daemon after it started (as a full
    /// /run would, where a new file cannot be written): the record cannot be replaced, and
    /// locationctl reload waited out its --timeout. The daemon writes the outcome into the file
    /// it made at start, and locationctl gets it at once: ok, and a refusal with its reason.
    /// (`lockedBeforeStart`: the directory was not writable at start either, and an earlier
    /// run's record of the daemon's user was there, stale: taken over, `0 ok` written in place.)
    @Test(.enabled("user 'daemon' cannot run the built locationd (a parent folder is not searchable by others)") {
        try OtherUserTests.daemonUserCanRunLocationd()
    }, arguments: [false, true])
    func aRecordThatCannotBeReplacedIsWrittenInPlace(lockedBeforeStart: Bool) throws {
        let dir = try SpawnedDaemon.makeDirectory()
        chmod(dir.path, 0o777)  // its socket
        let runtime = dir.appendingPathComponent("run")
        try FileManager.default.createDirectory(at: runtime, withIntermediateDirectories: true)
        let user = try ReadOnlyDatabaseTests.daemonUser()
        let record = runtime.appendingPathComponent("reload")
        if lockedBeforeStart {
            try "\(UInt64.max / 2) ok\n".write(to: record, atomically: true, encoding: .utf8)
            #expect(chown(record.path, user.uid, user.gid) == 0)
        } else {
            #expect(chown(runtime.path, user.uid, user.gid) == 0)
        }
        let notify = try DatagramSocket(path: dir.appendingPathComponent("notify.sock").path)
        chmod(notify.path, 0o666)
        let config = dir.appendingPathComponent("locationd.toml")
        try "[log]\nlevel = \"info\"\n".write(to: config, atomically: true, encoding: .utf8)
        chmod(config.path, 0o644)
        let daemon = try SpawnedDaemon(
            arguments: ["--config", config.path, "--socket", dir.appendingPathComponent("locationd.sock").path,
                        "--database", "none", "--gpsd", "127.0.0.1:1"],
            environment: ["NOTIFY_SOCKET": notify.path, "RUNTIME_DIRECTORY": runtime.path], directory: dir,
            wrapper: ReadOnlyDatabaseTests.asDaemonUser)
        defer { daemon.stop() }
        _ = try SystemdTests.read(notify) { SystemdTests.lines($0).contains("READY=1") }
        #expect(try String(contentsOf: record, encoding: .utf8) == "0 ok\n")
        if lockedBeforeStart {
            #expect(daemon.stderrText.contains("cannot replace the reload record: cannot create a file in the directory of \(record.path): Permission denied; took over \(record.path)"),
                    "\(daemon.stderrText)")
        } else {
            #expect(chmod(runtime.path, 0o555) == 0)
        }

        try "[log]\nlevel = \"debug\"\n".write(to: config, atomically: true, encoding: .utf8)
        chmod(config.path, 0o644)
        let applied = try Self.reload(daemon.pid, runtime, ["--timeout", "20"])
        #expect(applied.status == 0, "\(applied)")
        #expect(daemon.stderrText.contains(#"reload: applied key=log.level new="debug" old="info""#), "\(daemon.stderrText)")
        #expect(daemon.stderrText.contains("cannot replace the reload record: cannot create a file in the directory of \(record.path): Permission denied; wrote the outcome into \(record.path) in place instead"),
                "\(daemon.stderrText)")

        try "[log]\nlevel = \"loud\"\n".write(to: config, atomically: true, encoding: .utf8)
        chmod(config.path, 0o644)
        let refused = try Self.reload(daemon.pid, runtime, ["--timeout", "20"])
        #expect(refused.status == 1, "\(refused)")
        #expect(refused.err.contains("locationd (pid \(daemon.pid)) refused the reload and keeps its current configuration: \(config.path):2:"), "\(refused.err)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: runtime.path) == ["reload"])
        chmod(runtime.path, 0o755)  // for the folder's removal
    }

    /// A daemon started by hand with its socket in a directory everyone may write to (the sticky
    /// /tmp), where another user's file is at the record's path: the daemon cannot replace it,
    /// and locationctl reload, reading that file, waited out its --timeout. It refuses at once,
    /// naming the file, both uids and the fix.
    @Test(.enabled("user 'daemon' cannot run the built locationd (a parent folder is not searchable by others)") {
        try OtherUserTests.daemonUserCanRunLocationd()
    })
    func anotherUsersFileAtTheRecordsPathFailsAtOnce() throws {
        let dir = try SpawnedDaemon.makeDirectory()
        chmod(dir.path, 0o1777)
        let record = dir.appendingPathComponent("reload")
        try "1 ok\n".write(to: record, atomically: true, encoding: .utf8)
        let notify = try DatagramSocket(path: dir.appendingPathComponent("notify.sock").path)
        chmod(notify.path, 0o666)
        let daemon = try SpawnedDaemon(
            arguments: ["--socket", dir.appendingPathComponent("locationd.sock").path, "--database", "none", "--gpsd", "127.0.0.1:1"],
            environment: ["NOTIFY_SOCKET": notify.path], directory: dir, wrapper: ReadOnlyDatabaseTests.asDaemonUser)
        defer { daemon.stop() }
        _ = try SystemdTests.read(notify) { SystemdTests.lines($0).contains("READY=1") }
        #expect(daemon.stderrText.contains("cannot make the reload record: cannot rename \(record.path)."), "\(daemon.stderrText)")
        #expect(try String(contentsOf: record, encoding: .utf8) == "1 ok\n")

        let user = try ReadOnlyDatabaseTests.daemonUser()
        let result = try Self.reload(daemon.pid, dir, ["--timeout", "20"])
        #expect(result.status == 1, "\(result)")
        #expect(result.err.contains("\(record.path) belongs to uid \(getuid()), not to locationd's user (uid \(user.uid), pid \(daemon.pid)), so it is not a record locationd made"),
                "\(result.err)")
        #expect(result.err.contains("remove it and restart locationd, or give locationd a runtime directory of its own (RuntimeDirectory=, or --socket in a directory of its own); no signal sent"),
                "\(result.err)")
        #expect(!Self.queued(notify).contains { SystemdTests.lines($0).contains("RELOADING=1") }, "signalled anyway")
    }
}
