import Foundation
import LocationClient
import LocationCore
import LocationProtocol

/// The real `locationd` executable as a child process, for end-to-end tests, started with
/// posix_spawn so that a test controls its arguments, environment, limits and descriptors. It is
/// built with the tests (same build folder as the test bundle). Its stderr goes to a file in
/// `directory` (a pipe nobody drains would block a daemon logging at debug level once 64 KiB are
/// written), readable while it runs.
final class DaemonProcess: @unchecked Sendable {
    struct Failure: Error, CustomStringConvertible { var description: String }

    let directory: URL
    let pid: pid_t
    var socketPath: String { directory.appendingPathComponent("locationd.sock").path }
    let stderrPath: String
    /// Whether `stop()` removes `directory` (the common daemon's), or only the deinit does (a
    /// spawned one's, whose folder a test may start another daemon in after stopping it).
    private let removesDirectoryOnStop: Bool
    private var exitStatus: Int32?

    static var executable: URL {
        URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
            .deletingLastPathComponent().appendingPathComponent("locationd")
    }

    static func makeDirectory() throws -> URL {
        // Short: sun_path holds at most 107 bytes.
        let dir = URL(fileURLWithPath: "/tmp/ld-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir
    }

    /// Whether ProtectHome=yes can be played (a mode-0000 tmpfs on /home in a mount namespace
    /// of the daemon's own, `unshare -m`): not when the built locationd is under /home, which
    /// the tmpfs would hide too (the exec failed, 127, instead of the daemon's message).
    static var canHideHome: Bool {
        access("/usr/bin/unshare", X_OK) == 0 && !executable.path.hasPrefix("/home/")
    }

    /// The common daemon: its socket, a debug log and its database (default: a fresh file) in
    /// `directory` (default: a fresh folder), plus `arguments`.
    /// `launcher`: a command the daemon runs under (e.g. setpriv, to run it as another user,
    /// who then needs to create its socket in the folder).
    convenience init(arguments: [String], database: String? = nil, directory reuse: URL? = nil, launcher: [String] = []) throws {
        let directory = try reuse ?? Self.makeDirectory()
        if !launcher.isEmpty { chmod(directory.path, 0o777) }
        let daemonArguments = ["--socket", directory.appendingPathComponent("locationd.sock").path, "--log-level", "debug",
                               "--database", database ?? directory.appendingPathComponent("locationd.db").path] + arguments
        // Its own name: a reused folder may hold an earlier daemon's log.
        try self.init(spawning: daemonArguments, environment: [:], directory: directory, wrapper: launcher,
                      stderrName: "stderr-\(UUID().uuidString.prefix(8)).log", removesDirectoryOnStop: true)
    }

    /// The daemon with exactly `arguments` (plus `--database` in `directory` unless given).
    /// - Parameters:
    ///   - passing: a listening socket handed over as fd 3 with LISTEN_FDS=1 and LISTEN_PID set
    ///     to the child's own pid (through `sh -c 'export LISTEN_PID=$$; exec …'`).
    ///   - openFiles: the child's RLIMIT_NOFILE (set by the shell before `exec`, so the test
    ///     process keeps its own hard limit); both at most the test process's hard limit.
    ///   - wrapper, prelude: a command the daemon (or the shell) runs under (`unshare -m`,
    ///     `setpriv`), and shell commands run before `exec` (mounts in that namespace).
    init(spawning arguments: [String], environment: [String: String], directory: URL? = nil, passing fd: CInt? = nil,
         openFiles: (soft: UInt64, hard: UInt64)? = nil, wrapper: [String] = [], prelude: String = "",
         stderrName: String = "stderr.log", removesDirectoryOnStop: Bool = false) throws {
        let exe = Self.executable.path
        guard FileManager.default.isExecutableFile(atPath: exe) else {
            throw Failure(description: "locationd not built at \(exe); run swift build first")
        }
        if let directory { try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true) }
        self.directory = try directory ?? Self.makeDirectory()
        self.removesDirectoryOnStop = removesDirectoryOnStop
        stderrPath = self.directory.appendingPathComponent(stderrName).path
        // Never the system's /var/lib/locationd: each daemon keeps its state in its own folder.
        let arguments = arguments.contains("--database") ? arguments
            : arguments + ["--database", self.directory.appendingPathComponent("locationd.db").path]
        var env = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("LISTEN_") && $0.key != "NOTIFY_SOCKET" && !$0.key.hasPrefix("WATCHDOG_") && $0.key != "JOURNAL_STREAM" && $0.key != "INVOCATION_ID" }
        for (k, v) in environment { env[k] = v }
        var script = prelude
        if let openFiles {
            // Soft first: a hard limit below the current soft one is refused.
            script += "ulimit -S -n \(openFiles.soft) && ulimit -H -n \(openFiles.hard) || exit 99; "
        }
        if fd != nil {
            env["LISTEN_FDS"] = "1"
            script += "export LISTEN_PID=$$; "
        }
        let argv = script.isEmpty ? wrapper + [exe] + arguments
            : wrapper + ["/bin/sh", "-c", script + "exec \"$0\" \"$@\"", exe] + arguments
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, stderrPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        if let fd {
            // dup2 onto 3 clears close-on-exec; a descriptor already at 3 is moved away first.
            let source = fd == 3 ? dup(fd) : fd
            posix_spawn_file_actions_adddup2(&actions, source, 3)
        }
        let cArgs = argv.map { strdup($0) } + [nil]
        let cEnv = env.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { cArgs.forEach { free($0) }; cEnv.forEach { free($0) } }
        var child: pid_t = 0
        let rc = posix_spawn(&child, argv[0], &actions, nil, cArgs, cEnv)
        guard rc == 0 else { throw Failure(description: "posix_spawn \(argv[0]): \(String(cString: strerror(rc)))") }
        pid = child
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(at: directory)
    }

    /// Connects a client, retrying while the daemon creates its socket.
    func connect(timeout: Double = 10) async throws -> LocationClient {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            do { return try await LocationClient.connect(path: socketPath) } catch {
                guard isRunning, Date() < deadline else {
                    throw Failure(description: "cannot connect to \(socketPath): \(error); stderr: \(stderrText())")
                }
                try await Task.sleep(for: .milliseconds(20))  // polling for startup, not synchronisation
            }
        }
    }

    /// The program this test process is to a daemon on `database` (uid + executable), asked of
    /// one started and stopped for it: the owner of rows a test writes into that store.
    static func programOfThisProcess(database: String) async throws -> ProgramID {
        let daemon = try DaemonProcess(arguments: ["--gpsd", "127.0.0.1:1"], database: database)
        defer { daemon.stop() }
        let probe = try await daemon.connect()
        defer { probe.close() }
        guard let identity = try await probe.status().identity else {
            throw Failure(description: "status names no identity; stderr: \(daemon.stderrText())")
        }
        return ProgramID(identity)
    }

    var isRunning: Bool { reap() == nil }

    func signal(_ sig: Int32) { if isRunning { kill(pid, sig) } }

    /// Its exit status once it has exited (128 + N for signal N), reaping it; nil while it runs.
    private func reap() -> Int32? {
        if let exitStatus { return exitStatus }
        var status: Int32 = 0
        guard waitpid(pid, &status, WNOHANG) == pid else { return nil }
        exitStatus = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        return exitStatus
    }

    /// Waits for the exit; the exit status, or nil on timeout (a failure guard, not pacing).
    func waitForExit(timeout: Double = 10) -> Int32? {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let status = reap() { return status }
            usleep(10_000)
        }
        return reap()
    }

    /// What the daemon wrote to stderr so far ("" once its folder is removed).
    func stderrText() -> String {
        (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? ""
    }

    func stop() {
        if isRunning {
            kill(pid, SIGKILL)
            _ = waitForExit()
        }
        if removesDirectoryOnStop { try? FileManager.default.removeItem(at: directory) }
    }
}

/// Reads a client's messages with a deadline that only guards against a hang (a failure), never
/// paces the test: on timeout a watchdog closes the client, which ends the stream.
struct MessageReader {
    let client: LocationClient
    var iterator: AsyncThrowingStream<ServerMessage, any Error>.AsyncIterator

    init(_ client: LocationClient) {
        self.client = client
        iterator = client.messages.makeAsyncIterator()
    }

    /// A watchdog that closes the client (ending the stream) once `timeout` seconds have passed;
    /// cancel it when done. Its value is nil when it was cancelled first.
    private func closing(after timeout: Double) -> Task<Void, any Error> {
        let client = self.client
        return Task {
            try await Task.sleep(for: .milliseconds(Int(timeout * 1000)))
            client.close()
        }
    }

    /// Reads messages until `done` returns true for the list so far; throws on timeout or end.
    mutating func read(timeout: Double = 20, until done: ([ServerMessage]) -> Bool) async throws -> [ServerMessage] {
        var seen: [ServerMessage] = []
        let watchdog = closing(after: timeout)
        defer { watchdog.cancel() }
        while !done(seen) {
            guard let message = try await iterator.next() else {
                throw DaemonProcess.Failure(description: "stream ended (timeout \(timeout) s or closed) after \(seen.count) messages: \(seen.suffix(5))")
            }
            seen.append(message)
        }
        return seen
    }

    /// Reads messages until the stream ends; whether the daemon closed the connection or the
    /// deadline passed first (the watchdog closed it).
    mutating func readToEnd(timeout: Double = 20) async throws -> (messages: [ServerMessage], end: StreamEnd) {
        var seen: [ServerMessage] = []
        let watchdog = closing(after: timeout)
        defer { watchdog.cancel() }
        while let message = try await iterator.next() { seen.append(message) }
        watchdog.cancel()
        // Cancelled while it slept: the stream ended before the deadline.
        let fired = (try? await watchdog.value) != nil
        return (seen, fired ? .timedOut : .closed)
    }
}

extension Array where Element == ServerMessage {
    var fixes: [Fix] { compactMap { if case .location(let f, _) = $0 { f } else { nil } } }
    var states: [SourceState] { compactMap { if case .status(let s, _) = $0 { s } else { nil } } }
}
