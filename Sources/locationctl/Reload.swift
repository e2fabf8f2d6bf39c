import ArgumentParser
import LocationCore
import LocationProtocol
#if canImport(Glibc)
import Glibc
#endif

/// `locationctl reload --pid PID`: the unit's `ExecReload=`. SIGHUP alone (`kill -HUP`) returns
/// before the daemon has reloaded, and systemd 252 ends the reload job when `ExecReload=` exits
/// (docs/systemd.md, "Reload"); this sends SIGHUP and waits for the daemon's record of a reload
/// that began after it (`ReloadRecord`), then exits 0 when it applied, 1 with the daemon's
/// reason when it was refused.
struct Reload: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Reload locationd (SIGHUP) and wait until the reload has finished: exit 0 when it applied, 1 with the reason when the file was refused (locationd then keeps its current configuration).",
        discussion: """
            The unit's ExecReload=: systemctl reload locationd then returns once the new \
            configuration is in force, and fails when it was refused. locationd records how each \
            reload ended in the file 'reload' of its runtime directory, which it makes when it \
            starts; a record of a reload that began before the signal was sent is not this one's, \
            and without that file (or with another user's in its place) nothing is signalled \
            (docs/systemd.md, "Reload").
            """)

    @Option(help: "locationd's process id (ExecReload=: --pid $MAINPID).") var pid: Int32
    @Option(name: .customLong("runtime-directory"),
            help: "Where locationd records its reloads (default: $RUNTIME_DIRECTORY, else the directory of $LOCATIOND_SOCKET or /run/locationd/locationd.sock).")
    var runtimeDirectory: String?
    @Option(help: "Give up after this many seconds (keep it below systemd's TimeoutStartSec=, 90 s unless the unit sets it).") var timeout: Double = 60

    var directory: String {
        runtimeDirectory ?? ReloadRecord.directory(runtimeDirectory: getenv("RUNTIME_DIRECTORY").map { String(cString: $0) },
                                                   socketPath: SocketFlag.defaultPath)
    }

    func validate() throws {
        // 0 and negative numbers would signal process groups, -1 every process we may signal.
        guard pid > 0 else { throw ValidationError("--pid \(pid) is not a process id; give locationd's (ExecReload=: --pid $MAINPID)") }
        guard timeout > 0, timeout <= 86_400 else { throw ValidationError("--timeout \(numberText(timeout)) is out of range; expected more than 0 and at most 86400 seconds") }
    }

    func run() throws {
        let directory = self.directory
        let path = ReloadRecord.path(in: directory)
        // Watched before the signal: a record written at once is not missed, and a directory
        // that cannot be watched fails before anything is reloaded.
        let watch = inotify_init1(Int32(IN_CLOEXEC | IN_NONBLOCK))
        guard watch >= 0 else { throw RuntimeError("cannot watch \(directory) (inotify_init1): \(String(cString: strerror(errno))); no signal sent") }
        defer { close(watch) }
        // IN_MODIFY: a record the daemon could not replace is written into the file in place.
        guard inotify_add_watch(watch, directory, UInt32(IN_MOVED_TO | IN_CLOSE_WRITE | IN_MODIFY)) >= 0 else {
            throw RuntimeError("cannot watch \(directory) for locationd's reload record: \(String(cString: strerror(errno))); no signal sent. --runtime-directory names the directory locationd runs in (its RuntimeDirectory=, or its socket's directory)")
        }
        func cannotSignal(_ e: Int32) -> RuntimeError {
            RuntimeError("cannot send SIGHUP to pid \(pid): \(String(cString: strerror(e))) (errno \(e)); is locationd running with that pid? (systemctl show -p MainPID locationd)")
        }
        guard kill(pid, 0) == 0 else { throw cannotSignal(errno) }
        if let problem = Self.unanswerable(path, in: directory, pid: pid) { throw RuntimeError("\(problem); no signal sent") }
        let asked = ReloadRecord.now()
        guard kill(pid, SIGHUP) == 0 else { throw cannotSignal(errno) }
        let deadline = asked + UInt64(timeout * 1_000_000)
        while true {
            if let text = readTextFile(path), let record = ReloadRecord(line: text), record.start >= asked {
                switch record.outcome {
                case .ok: return
                case .failed(let why): throw RuntimeError("locationd (pid \(pid)) refused the reload and keeps its current configuration: \(why)")
                }
            }
            let now = ReloadRecord.now()
            guard now < deadline else {
                throw RuntimeError("locationd (pid \(pid)) did not record a finished reload in \(path) within \(Self.seconds(timeout)) s (--timeout); is pid \(pid) locationd, and is \(directory) its runtime directory (--runtime-directory)? Its log says more (journalctl -u locationd)")
            }
            // Woken by the record's rename; at least once a second to see whether the daemon is gone.
            var pfd = pollfd(fd: watch, events: Int16(POLLIN), revents: 0)
            let n = poll(&pfd, 1, Int32(min(deadline - now, 1_000_000) / 1000) + 1)
            if n < 0 && errno != EINTR { throw RuntimeError("cannot wait for locationd's reload record in \(directory) (poll: \(String(cString: strerror(errno)))); the reload may still finish: see journalctl -u locationd") }
            if n > 0 { Self.drain(watch) }
            if kill(pid, 0) != 0 && errno == ESRCH {
                // It may have finished and then exited: the record decides.
                if let text = readTextFile(path), let record = ReloadRecord(line: text), record.start >= asked { continue }
                throw RuntimeError("pid \(pid) exited before its reload finished (no record in \(path)); its log says why (journalctl -u locationd)")
            }
        }
    }

    /// Why the daemon could not answer a reload through `path`, or nil. It makes the file at
    /// start and keeps it, writing into it in place when it cannot replace it; a file that is not
    /// there, not a file, or not the daemon's user's (in a directory others can write to, where
    /// the daemon could not replace it) means every reload would be waited out to --timeout.
    static func unanswerable(_ path: String, in directory: String, pid: Int32) -> String? {
        var st = stat()
        guard lstat(path, &st) == 0 else {
            let e = errno
            return "locationd (pid \(pid)) has no reload record at \(path) (\(String(cString: strerror(e))), errno \(e)): it makes one when it starts serving, so it could not write in \(directory) (its log says why: journalctl -u locationd; make the directory writable by its user and restart it), or the file was removed since it started (restart it to make the file again: systemctl restart locationd), or \(directory) is not its runtime directory (--runtime-directory)"
        }
        guard st.st_mode & S_IFMT == S_IFREG else {
            let what = st.st_mode & S_IFMT == S_IFDIR ? "a directory (\(String(cString: strerror(EISDIR))), errno \(EISDIR))" : "not a regular file"
            return "\(path), where locationd records its reloads, is \(what), so it cannot record one: remove it and restart locationd"
        }
        if let uid = Self.effectiveUID(of: pid), uid != st.st_uid {
            return "\(path) belongs to uid \(st.st_uid), not to locationd's user (uid \(uid), pid \(pid)), so it is not a record locationd made (it cannot replace another user's file in a directory others can write to, and a reload would be waited out to --timeout): remove it and restart locationd, or give locationd a runtime directory of its own (RuntimeDirectory=, or --socket in a directory of its own)"
        }
        return nil
    }

    /// The effective uid of `pid` (/proc/PID/status, which says it even for a process /proc/PID
    /// itself shows as root's: one that is not dumpable); nil when it cannot be read.
    static func effectiveUID(of pid: Int32) -> uid_t? {
        guard let status = readTextFile("/proc/\(pid)/status"),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("Uid:") }) else { return nil }
        let ids = line.dropFirst(4).split(whereSeparator: { $0 == " " || $0 == "\t" })
        return ids.count > 1 ? uid_t(ids[1]) : nil
    }

    /// Reads the queued inotify events (which file changed does not matter: the record is read again).
    static func drain(_ fd: Int32) {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while buffer.withUnsafeMutableBytes({ read(fd, $0.baseAddress, $0.count) }) > 0 {}
    }

    static func seconds(_ value: Double) -> String {
        numberText(value)
    }
}
