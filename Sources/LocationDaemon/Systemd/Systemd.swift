#if canImport(Glibc)
import Glibc
#endif
import LocationProtocol

// The service manager's protocols, spoken natively rather than through libsystemd: each is an
// environment variable or two and a datagram (https://systemd.io/ — sd_notify(3),
// sd_listen_fds(3), sd_watchdog_enabled(3)), while linking libsystemd brought libgcrypt, lz4,
// zstd, lzma and libcap into the process (docs/benchmarks.md, "Footprint").

/// Reads the process environment; tests pass their own.
public typealias EnvironmentLookup = @Sendable (String) -> String?

public let processEnvironment: EnvironmentLookup = { name in getenv(name).map { String(cString: $0) } }

/// An `AF_UNIX` address: a path, or a name in the abstract namespace (written `@name`, as
/// systemd writes `NOTIFY_SOCKET`).
public struct UnixSocketAddress: Hashable, Sendable, CustomStringConvertible {
    public enum Failure: Error, Hashable, Sendable, CustomStringConvertible {
        case unsupported(String)
        case tooLong(String)

        public var description: String {
            switch self {
            case .unsupported(let s): "'\(s)' is neither an absolute path nor an abstract socket name (@name)"
            case .tooLong(let s): "'\(s)' is longer than a socket address holds (107 bytes)"
            }
        }
    }

    /// The bytes of `sun_path` that are used: a path and its terminating NUL, or a NUL and the
    /// abstract name (which has no terminator; its length is the address length).
    let pathBytes: [UInt8]
    public let description: String

    public init(_ text: String) throws(Failure) {
        var bytes = Array(text.utf8)
        switch bytes.first {
        case UInt8(ascii: "/"): bytes.append(0)
        case UInt8(ascii: "@"): bytes[0] = 0
        default: throw .unsupported(text)
        }
        guard bytes.count <= MemoryLayout.size(ofValue: sockaddr_un().sun_path) else { throw .tooLong(text) }
        pathBytes = bytes
        description = text
    }

    /// Calls `body` with the `sockaddr` and its length.
    public func withSockaddr<R>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &addr.sun_path) { $0.copyBytes(from: pathBytes) }
        let length = socklen_t(MemoryLayout<sockaddr_un>.offset(of: \.sun_path)! + pathBytes.count)
        return withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, length) }
        }
    }

    /// Sends `bytes` as one datagram from `fd`, with `flags` (`MSG_DONTWAIT`) besides
    /// `MSG_NOSIGNAL`; the errno of a failure, nil on success.
    public func send(_ bytes: [UInt8], from fd: CInt, flags: Int32 = 0) -> Int32? {
        withSockaddr { addr, length in
            bytes.withUnsafeBytes { raw in
                while true {
                    let n = sendto(fd, raw.baseAddress, raw.count, Int32(MSG_NOSIGNAL) | flags, addr, length)
                    if n >= 0 { return n == raw.count ? nil : EMSGSIZE }
                    if errno != EINTR { return errno }
                }
            }
        }
    }
}

/// The notify protocol: newline-separated `KEY=value` assignments (`READY=1`, `STATUS=…`) in
/// one datagram to the `AF_UNIX` socket named by `NOTIFY_SOCKET`. Every call is a no-op when
/// the daemon was not started by systemd (the variable is unset).
public struct SystemdNotifier: Sendable {
    /// Where notifications go; nil when `NOTIFY_SOCKET` is unset or unusable.
    public let address: UnixSocketAddress?
    /// Why a set `NOTIFY_SOCKET` cannot be used, for the daemon to log at start.
    public let problem: String?

    public init(environment: EnvironmentLookup = processEnvironment) {
        guard let value = environment("NOTIFY_SOCKET") else {
            address = nil
            problem = nil
            return
        }
        do {
            address = try UnixSocketAddress(value)
            problem = nil
        } catch {
            address = nil
            problem = "NOTIFY_SOCKET=\(value): \(error); systemd will not hear READY=1 or the watchdog (a notify socket is a path or @name; vsock addresses are not supported)"
        }
    }

    /// `NOTIFY_SOCKET` names a socket we can send to.
    public var isEnabled: Bool { address != nil }

    /// Sends `state` in one datagram; false when disabled or the send failed (as sd_notify, a
    /// new socket each time: notifications are rare, and nothing stays open to leak or share).
    @discardableResult
    public func notify(_ state: String) -> Bool {
        guard let address else { return false }
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        return address.send(Array(state.utf8), from: fd) == nil
    }

    /// The watchdog interval systemd asked for (`WATCHDOG_USEC`), in microseconds; nil when
    /// unset, not a positive number, or meant for another process (`WATCHDOG_PID` is set and is
    /// not `pid` — a child that inherited the environment must not ping for its parent).
    public static func watchdogMicroseconds(environment: EnvironmentLookup = processEnvironment,
                                            pid: pid_t = getpid()) -> UInt64? {
        guard let text = environment("WATCHDOG_USEC"), let usec = UInt64(text), usec > 0 else { return nil }
        if let owner = environment("WATCHDOG_PID") {
            guard let owner = pid_t(owner), owner == pid else { return nil }
        }
        return usec
    }

    /// CLOCK_MONOTONIC in microseconds, for `RELOADING=1`'s `MONOTONIC_USEC=` (the reload
    /// record's clock too).
    public static func monotonicMicroseconds() -> UInt64 { ReloadRecord.now() }
}

/// Socket activation: the listening socket systemd passed (locationd.socket), if any.
/// Passed descriptors start at 3 (`SD_LISTEN_FDS_START`); `LISTEN_FDS` says how many,
/// `LISTEN_PID` whom they are for, `LISTEN_FDNAMES` their names.
public enum SocketActivation {
    public static let firstDescriptor: CInt = 3

    public enum Failure: Error, Hashable, Sendable, CustomStringConvertible {
        case invalid(variable: String, value: String)
        case descriptor(CInt, errno: Int32)
        case notAUnixStreamListener(CInt)

        public var description: String {
            switch self {
            case .invalid(let name, let value):
                "\(name)=\(value) is not a number; it is set by systemd for a socket-activated service — unset it when starting locationd by hand"
            case .descriptor(let fd, let e):
                "fd \(fd), passed by systemd (LISTEN_FDS), is unusable: \(String(cString: strerror(e))); check ListenStream= in locationd.socket"
            case .notAUnixStreamListener(let fd):
                "the socket passed as fd \(fd) is not a listening Unix stream socket; check ListenStream= in locationd.socket"
            }
        }
    }

    /// How many descriptors were passed to process `pid`: 0 when `LISTEN_PID` is unset or names
    /// another process (the variables were inherited, not meant for us).
    public static func passedCount(environment: EnvironmentLookup, pid: pid_t) throws(Failure) -> Int {
        guard let owner = environment("LISTEN_PID") else { return 0 }
        guard let ownerPid = pid_t(owner) else { throw .invalid(variable: "LISTEN_PID", value: owner) }
        guard ownerPid == pid else { return 0 }
        let count = environment("LISTEN_FDS") ?? "0"
        guard let n = Int(count), n >= 0, n <= Int(Int32.max - firstDescriptor) else {
            throw .invalid(variable: "LISTEN_FDS", value: count)
        }
        return n
    }

    /// The first passed descriptor when `LISTEN_FDS` ≥ 1 and `LISTEN_PID` is this process;
    /// nil when no socket was passed. Unsets the variables (so no child inherits them) and sets
    /// FD_CLOEXEC on the passed descriptors. `count` receives how many were passed (extra ones
    /// are ignored).
    public static func listeningSocket(count: inout Int) throws(Failure) -> CInt? {
        defer {
            unsetenv("LISTEN_PID")
            unsetenv("LISTEN_FDS")
            unsetenv("LISTEN_FDNAMES")
        }
        let n = try passedCount(environment: processEnvironment, pid: getpid())
        count = n
        guard n > 0 else { return nil }
        for fd in firstDescriptor..<(firstDescriptor + CInt(n)) {
            let flags = fcntl(fd, F_GETFD)
            guard flags >= 0, fcntl(fd, F_SETFD, flags | FD_CLOEXEC) == 0 else { throw .descriptor(fd, errno: errno) }
        }
        guard isListeningUnixStream(firstDescriptor) else { throw .notAUnixStreamListener(firstDescriptor) }
        return firstDescriptor
    }

    /// Whether `fd` is an `AF_UNIX` `SOCK_STREAM` socket in the listening state.
    public static func isListeningUnixStream(_ fd: CInt) -> Bool {
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFSOCK else { return false }
        func option(_ name: Int32) -> CInt? {
            var value: CInt = 0
            var length = socklen_t(MemoryLayout<CInt>.size)
            return getsockopt(fd, SOL_SOCKET, name, &value, &length) == 0 ? value : nil
        }
        guard option(SO_TYPE) == Int32(SOCK_STREAM.rawValue), option(SO_ACCEPTCONN) == 1 else { return false }
        var addr = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let rc = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return rc == 0 && addr.ss_family == sa_family_t(AF_UNIX)
    }
}
