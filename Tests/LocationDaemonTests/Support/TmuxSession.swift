import Foundation
import Glibc

/// A terminal program (cgps) run in a private tmux server of its own (`-S` socket in a fresh
/// folder, no user config), read with `capture-pane`. Every tmux command is run with a time
/// limit and its output to a file, never a pipe: the server daemonizes from `new-session`, and
/// a pipe it inherited would never reach EOF. `stop()` (also from deinit) ends the server with
/// `kill-server`, then SIGKILL by its pid if it is still there.
final class TmuxSession: @unchecked Sendable {
    struct Failure: Error, CustomStringConvertible { var description: String }

    static let executable = "/usr/bin/tmux"
    static var available: Bool { FileManager.default.isExecutableFile(atPath: executable) }

    let directory: URL
    private var socket: String { directory.appendingPathComponent("tmux.sock").path }
    private var serverPID: pid_t?
    private var stopped = false

    /// Starts `command` (run by /bin/sh) in a detached `width`×`height` session. The pane stays
    /// when the command exits, so its last words can be read.
    init(_ command: String, width: Int = 120, height: Int = 40) throws {
        directory = URL(fileURLWithPath: "/tmp/ld-tmux-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let config = directory.appendingPathComponent("tmux.conf")
        try "set -g remain-on-exit on\n".write(to: config, atomically: true, encoding: .utf8)
        let started = try run(["-f", config.path, "new-session", "-d", "-x", "\(width)", "-y", "\(height)", command])
        guard started.status == 0 else {
            stop()
            throw Failure(description: "tmux new-session: \(started.status) \(started.out)")
        }
        serverPID = pid_t(try run(["display-message", "-p", "#{pid}"]).out.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    deinit { stop() }

    /// The pane's text now, one line per row.
    func capture() throws -> String {
        let r = try run(["capture-pane", "-p"])
        guard r.status == 0 else { throw Failure(description: "tmux capture-pane: \(r.status) \(r.out)") }
        return r.out
    }

    /// Types `keys` (tmux key names) into the pane.
    func send(keys: String...) throws {
        let r = try run(["send-keys"] + keys)
        guard r.status == 0 else { throw Failure(description: "tmux send-keys: \(r.status) \(r.out)") }
    }

    /// Whether the pane's program has exited (the pane stays: remain-on-exit).
    func paneExited() throws -> Bool {
        try run(["display-message", "-p", "#{pane_dead}"]).out.trimmingCharacters(in: .whitespacesAndNewlines) == "1"
    }

    func stop() {
        guard !stopped else { return }
        stopped = true
        _ = try? run(["kill-server"])
        if let serverPID, kill(serverPID, 0) == 0 { kill(serverPID, SIGKILL) }
        try? FileManager.default.removeItem(at: directory)
    }

    /// `tmux -S SOCKET ARGS` with TERM set (CI has no terminal), stdout and stderr to a file and
    /// no other descriptor of the test's: the server tmux forks keeps what it inherits, so
    /// Foundation's Process, which waits for a descriptor of its own to close, would wait for
    /// the server's end. Killed after `timeout` seconds.
    /// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34), which its headers declare only
    /// with _GNU_SOURCE.
    private static let addCloseFrom: @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32 = {
        guard let symbol = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np") else { fatalError("glibc without closefrom for posix_spawn") }
        return unsafeBitCast(symbol, to: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32).self)
    }()

    private func run(_ arguments: [String], timeout: Double = 10) throws -> (status: Int32, out: String) {
        let output = directory.appendingPathComponent("out-\(UUID().uuidString.prefix(8))").path
        defer { unlink(output) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        guard Self.addCloseFrom(&actions, 3) == 0 else { throw Failure(description: "posix_spawn_file_actions_addclosefrom_np") }
        var env = ProcessInfo.processInfo.environment
        env["TERM"] = "xterm-256color"
        env.removeValue(forKey: "TMUX")
        let argv = [Self.executable, "-S", socket] + arguments
        let cArgs = argv.map { strdup($0) } + [nil]
        let cEnv = env.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { cArgs.forEach { free($0) }; cEnv.forEach { free($0) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, Self.executable, &actions, nil, cArgs, cEnv)
        guard rc == 0 else { throw Failure(description: "posix_spawn tmux: \(String(cString: strerror(rc)))") }
        var status: Int32 = 0
        let deadline = ContinuousClock.now + .seconds(timeout)
        while waitpid(pid, &status, WNOHANG) == 0 {
            if ContinuousClock.now >= deadline {
                kill(pid, SIGKILL)
                waitpid(pid, &status, 0)
                break
            }
            usleep(2_000)  // polling a child's exit, not pacing
        }
        let exit = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        return (exit, (try? String(contentsOfFile: output, encoding: .utf8)) ?? "")
    }
}
