import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A datagram socket bound to a fresh path: stands in for systemd's notify socket or for the
/// journal. `receive` waits with `poll` and a deadline that only guards against a hang.
/// With `timestamps`, the kernel stamps each datagram with when it was queued (SO_TIMESTAMP),
/// which `receiveTimestamped` returns: a test that reads late still sees when each was sent.
/// (Off by default: the stamp is a control message of its own, which a receive sized for one
/// passed descriptor would not have room for.)
final class DatagramSocket: @unchecked Sendable {
    let path: String
    let fd: CInt

    init(path: String, timestamps: Bool = false) throws {
        self.path = path
        unlink(path)
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw DaemonProcess.Failure(description: "socket: \(errno)") }
        var one: Int32 = 1
        guard !timestamps || setsockopt(fd, SOL_SOCKET, SO_TIMESTAMP, &one, socklen_t(MemoryLayout<Int32>.size)) == 0 else {
            let e = errno
            close(fd)
            throw DaemonProcess.Failure(description: "SO_TIMESTAMP: \(String(cString: strerror(e)))")
        }
        let rc = withSockaddr(path) { bind(fd, $0, $1) }
        guard rc == 0 else { throw DaemonProcess.Failure(description: "bind \(path): \(String(cString: strerror(errno)))") }
    }

    deinit { close(fd); unlink(path) }

    /// The next datagram, or nil when none arrives within `timeout` seconds.
    func receive(timeout: Double) -> [UInt8]? {
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            let ms = Int32(max(0, deadline.timeIntervalSinceNow) * 1000)
            let n = poll(&pfd, 1, ms)
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return nil }
            var buffer = [UInt8](repeating: 0, count: 256 * 1024)
            let got = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard got >= 0 else { return nil }
            return Array(buffer[0..<got])
        }
    }

    func receiveText(timeout: Double) -> String? { receive(timeout: timeout).map { String(decoding: $0, as: UTF8.self) } }

    /// The next datagram as text and when the kernel queued it (SCM_TIMESTAMP, seconds since the
    /// epoch), or nil when none arrives within `timeout` seconds. Needs `timestamps`.
    func receiveTimestamped(timeout: Double) throws -> (text: String, time: Double)? {
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            let n = poll(&pfd, 1, Int32(max(0, deadline.timeIntervalSinceNow) * 1000))
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return nil }
            break
        }
        var buffer = [UInt8](repeating: 0, count: 256 * 1024)
        // A cmsghdr (length, level, type) then the timeval, each 8-byte aligned (CMSG_* do not
        // import into Swift).
        let control = UnsafeMutableRawBufferPointer.allocate(byteCount: 128, alignment: 8)
        defer { control.deallocate() }
        var stamp: Double?
        let got: Int = buffer.withUnsafeMutableBytes { data in
            var iov = iovec(iov_base: data.baseAddress, iov_len: data.count)
            return withUnsafeMutablePointer(to: &iov) { iovPointer in
                var message = msghdr()
                message.msg_iov = iovPointer
                message.msg_iovlen = 1
                message.msg_control = control.baseAddress
                message.msg_controllen = control.count
                let n = recvmsg(fd, &message, 0)
                guard n >= 0 else { return -1 }
                var offset = 0
                let header = MemoryLayout<Int>.size + 2 * MemoryLayout<Int32>.size
                while offset + header <= Int(message.msg_controllen) {
                    let length = control.load(fromByteOffset: offset, as: Int.self)
                    let level = control.load(fromByteOffset: offset + MemoryLayout<Int>.size, as: Int32.self)
                    let type = control.load(fromByteOffset: offset + MemoryLayout<Int>.size + 4, as: Int32.self)
                    if level == SOL_SOCKET && type == SCM_TIMESTAMP && length >= header + MemoryLayout<timeval>.size {
                        let tv = control.load(fromByteOffset: offset + header, as: timeval.self)
                        stamp = Double(tv.tv_sec) + Double(tv.tv_usec) / 1e6
                    }
                    guard length > 0 else { break }
                    offset += (length + 7) & ~7
                }
                return n
            }
        }
        guard got >= 0 else { throw DaemonProcess.Failure(description: "recvmsg: \(String(cString: strerror(errno)))") }
        guard let stamp else { throw DaemonProcess.Failure(description: "a datagram without SCM_TIMESTAMP") }
        return (String(decoding: buffer[0..<got], as: UTF8.self), stamp)
    }
}

/// The real `locationd` started with posix_spawn, so a test controls its environment and can
/// pass it a descriptor as fd 3 (socket activation). stderr goes to a file in `directory`.
final class SpawnedDaemon: @unchecked Sendable {
    let directory: URL
    let pid: pid_t
    private var exitStatus: Int32?

    var socketPath: String { directory.appendingPathComponent("locationd.sock").path }
    var stderrPath: String { directory.appendingPathComponent("stderr.log").path }

    /// Whether ProtectHome=yes can be played (a mode-0000 tmpfs on /home in a mount namespace
    /// of the daemon's own, `unshare -m`): not when the built locationd is under /home, which
    /// the tmpfs would hide too (the exec failed, 127, instead of the daemon's message).
    static var canHideHome: Bool {
        access("/usr/bin/unshare", X_OK) == 0 && !DaemonProcess.executable.path.hasPrefix("/home/")
    }

    static func makeDirectory() throws -> URL {
        // Short: sun_path holds at most 107 bytes.
        let dir = URL(fileURLWithPath: "/tmp/ld-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir
    }

    /// - Parameters:
    ///   - passing: a listening socket handed over as fd 3 with LISTEN_FDS=1 and LISTEN_PID set
    ///     to the child's own pid (through `sh -c 'export LISTEN_PID=$$; exec …'`).
    ///   - openFiles: the child's RLIMIT_NOFILE (set by the shell before `exec`, so the test
    ///     process keeps its own hard limit); both at most the test process's hard limit.
    ///   - wrapper, prelude: a command the shell runs under (`unshare -m`), and shell commands
    ///     run before `exec` (mounts in that namespace).
    init(arguments: [String], environment: [String: String], directory: URL? = nil, passing fd: CInt? = nil,
         openFiles: (soft: UInt64, hard: UInt64)? = nil, wrapper: [String] = [], prelude: String = "") throws {
        self.directory = try directory ?? Self.makeDirectory()
        // Never the system's /var/lib/locationd: each daemon keeps its state in its own folder.
        let arguments = arguments.contains("--database") ? arguments
            : arguments + ["--database", self.directory.appendingPathComponent("locationd.db").path]
        let exe = DaemonProcess.executable.path
        var argv: [String]
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
        if script.isEmpty && wrapper.isEmpty {
            argv = [exe] + arguments
        } else {
            argv = wrapper + ["/bin/sh", "-c", script + "exec \"$0\" \"$@\"", exe] + arguments
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, self.directory.appendingPathComponent("stderr.log").path,
                                         O_WRONLY | O_CREAT | O_TRUNC, 0o644)
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
        guard rc == 0 else { throw DaemonProcess.Failure(description: "posix_spawn: \(String(cString: strerror(rc)))") }
        pid = child
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(at: directory)
    }

    func signal(_ sig: Int32) { if exitStatus == nil { kill(pid, sig) } }

    /// Waits for the exit; the exit status, or nil on timeout (a failure guard, not pacing).
    func waitForExit(timeout: Double = 10) -> Int32? {
        if let exitStatus { return exitStatus }
        let deadline = Date().addingTimeInterval(timeout)
        var status: Int32 = 0
        while Date() < deadline {
            let r = waitpid(pid, &status, WNOHANG)
            if r == pid {
                exitStatus = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
                return exitStatus
            }
            usleep(10_000)
        }
        return nil
    }

    func stop() {
        guard exitStatus == nil else { return }
        kill(pid, SIGKILL)
        _ = waitForExit()
    }

    var stderrText: String { (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? "" }
}

/// journald played by a datagram socket the test reads. libsystemd sends to
/// /run/systemd/journal/socket, so the daemon runs in a mount namespace of its own
/// (`unshare -m`) with `directory/run` mounted over /run, and with `JOURNAL_STREAM` naming its
/// stderr, as systemd sets it. Root only.
struct StandInJournal {
    static var isAvailable: Bool { getuid() == 0 && access("/usr/bin/unshare", X_OK) == 0 }

    let socket: DatagramSocket
    let directory: URL

    init(directory: URL) throws {
        self.directory = directory
        let run = directory.appendingPathComponent("run/systemd/journal")
        try FileManager.default.createDirectory(at: run, withIntermediateDirectories: true)
        socket = try DatagramSocket(path: run.appendingPathComponent("socket").path)
    }

    /// The daemon with `arguments`, logging to this journal.
    func spawn(arguments: [String], environment: [String: String] = [:]) throws -> SpawnedDaemon {
        // The file the daemon's stderr goes to (truncated, not replaced, at spawn): its device and inode.
        let stderrPath = directory.appendingPathComponent("stderr.log").path
        guard FileManager.default.createFile(atPath: stderrPath, contents: nil) else {
            throw DaemonProcess.Failure(description: "cannot create \(stderrPath)")
        }
        var st = stat()
        guard stat(stderrPath, &st) == 0 else { throw DaemonProcess.Failure(description: "stat \(stderrPath): \(errno)") }
        return try SpawnedDaemon(arguments: arguments,
                                 environment: environment.merging(["JOURNAL_STREAM": "\(st.st_dev):\(st.st_ino)"]) { mine, _ in mine },
                                 directory: directory, wrapper: ["/usr/bin/unshare", "-m"],
                                 prelude: "mount --bind '\(directory.path)/run' /run || exit 98; ")
    }

    /// The next entry's fields, or nil when none comes within `timeout` seconds.
    func receive(timeout: Double) throws -> [String: String]? {
        try socket.receive(timeout: timeout).map(JournalTests.parse)
    }
}
