import Glibc

/// The executable half of a program's identity (`PeerIdentity.program`).
enum ProgramIdentity {
    static func executable(pid: Int32) -> String? {
        var buffer = [CChar](repeating: 0, count: 4097)
        let n = readlink("/proc/\(pid)/exe", &buffer, 4096)
        guard n > 0 else { return nil }
        return path(ofLink: String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self))
    }

    /// Whether `pid` runs the file at `path` in the system's view of the filesystem: stat of the
    /// `/proc/PID/exe` link reaches the file the process runs, wherever it was mounted.
    static func isFile(_ path: String, runBy pid: Int32) -> Bool {
        var running = stat(), named = stat()
        guard stat("/proc/\(pid)/exe", &running) == 0, stat(systemRoot + path, &named) == 0 else { return false }
        return running.st_dev == named.st_dev && running.st_ino == named.st_ino
    }

    /// Why `isFile(path, runBy: pid)` is false, for the log.
    static func whyNotFile(_ path: String, runBy pid: Int32) -> String {
        var st = stat()
        if stat(systemRoot + path, &st) != 0 {
            let e = errno
            return e == EACCES
                ? "locationd may not look up \(path) (\(String(cString: strerror(e))): a directory on the way is closed to its user; name the program by user or group instead, or open the directory to others: chmod o+x)"
                : "\(path) cannot be looked up (\(String(cString: strerror(e))))"
        }
        return "it is not the file at \(path) (replaced since it started, or run in a mount namespace of its own; restart it after an upgrade)"
    }

    /// Where a rule's path is looked up: under PID 1's root, the system's view, which the shipped
    /// unit's `ProtectHome=` and `PrivateTmp=` do not change (in the daemon's own, a program under
    /// /home could never match); the daemon's own view when /proc/1/root is closed to it (no
    /// `CAP_SYS_PTRACE`, or an init it may not trace).
    static let systemRoot: String = {
        var st = stat()
        return stat("/proc/1/root/", &st) == 0 ? "/proc/1/root" : ""
    }()

    /// The kernel marks the link of a process whose executable was replaced since it started
    /// (a package upgrade) with " (deleted)": the program is still the one of that path, and its
    /// regions and queue must not change with the upgrade (a rule naming the path only narrows
    /// what it gets until it restarts: `PeerIdentity.executableVerified`).
    static func path(ofLink link: String) -> String {
        link.hasSuffix(" (deleted)") ? String(link.dropLast(10)) : link
    }

    /// `CAP_SYS_PTRACE`: reading another user's `/proc/PID/exe` needs it (the kernel's
    /// ptrace-read check), and so does seeing that process at all under `ProtectProc=invisible`.
    static let sysPtrace = 19

    /// Whether this process may read the executables of other users' processes: its effective
    /// capabilities (`CapEff` in /proc/self/status) include `CAP_SYS_PTRACE`. Root without it
    /// (an empty bounding set) may not either.
    static func canIdentifyOtherUsers(status: String? = try? DaemonOptions.readFile("/proc/self/status")) -> Bool {
        // On the bytes: it runs once at start, and String's splitting and trimming would make
        // pages of code resident that nothing else uses (idle RSS, docs/benchmarks.md).
        guard let status else { return false }
        let bytes = Array(status.utf8), key = Array("\nCapEff:".utf8)
        guard var i = (0...max(0, bytes.count - key.count)).first(where: { bytes[$0..<min($0 + key.count, bytes.count)].elementsEqual(key) })
        else { return false }
        i += key.count
        while i < bytes.count, bytes[i] == 0x20 || bytes[i] == 0x09 { i += 1 }
        var mask: UInt64 = 0, digits = 0
        while i < bytes.count, let d = Self.hexValue(bytes[i]), digits < 16 {
            mask = mask << 4 | UInt64(d)
            digits += 1
            i += 1
        }
        return digits > 0 && mask & (1 << sysPtrace) != 0
    }

    private static func hexValue(_ b: UInt8) -> UInt8? {
        switch b {
        case 0x30...0x39: b - 0x30
        case 0x61...0x66: b - 0x61 + 10
        case 0x41...0x46: b - 0x41 + 10
        default: nil
        }
    }

    /// What the daemon logs at start when it cannot (docs/systemd.md, "Identifying programs").
    static let cannotIdentifyWarning = "cannot identify other users' programs: reading another user's /proc/PID/exe needs CAP_SYS_PTRACE, which locationd does not have; their executables read as '?', so policy rules naming an executable do not match them and each user's programs share one identity (uid=N exe=?) for regions and queued events. Grant it: AmbientCapabilities=CAP_SYS_PTRACE and CapabilityBoundingSet=CAP_SYS_PTRACE in the unit (the shipped unit does)"
}
