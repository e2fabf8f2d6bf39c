import CSystemd
#if canImport(Glibc)
import Glibc
#endif

/// The service manager's side of the daemon, through libsystemd: the notify protocol
/// (`sd_notify`), the watchdog interval (`sd_watchdog_enabled`) and socket activation
/// (`sd_listen_fds`). Every call is a no-op when the daemon was not started by systemd.
public struct SystemdNotifier: Sendable {
    /// `NOTIFY_SOCKET` is set: someone listens to our notifications.
    public let isEnabled: Bool

    public init() {
        isEnabled = getenv("NOTIFY_SOCKET") != nil
    }

    /// Sends newline-separated `KEY=value` assignments (`READY=1`, `STATUS=…`, …) in one datagram.
    @discardableResult
    public func notify(_ state: String) -> Bool {
        guard isEnabled else { return false }
        return locationd_sd_notify(0, state) > 0
    }

    /// The watchdog interval systemd asked for (`WATCHDOG_USEC`, checked against
    /// `WATCHDOG_PID` when set), in microseconds; nil when the watchdog is off.
    public static func watchdogMicroseconds() -> UInt64? {
        var usec: UInt64 = 0
        guard sd_watchdog_enabled(0, &usec) > 0, usec > 0 else { return nil }
        return usec
    }

    /// CLOCK_MONOTONIC in microseconds, for `RELOADING=1`'s `MONOTONIC_USEC=`.
    public static func monotonicMicroseconds() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000 + UInt64(ts.tv_nsec) / 1000
    }
}

/// Socket activation: the listening socket systemd passed (locationd.socket), if any.
public enum SocketActivation {
    public enum Failure: Error, CustomStringConvertible {
        case listenFDs(errno: Int32)
        case notAUnixStreamListener(CInt)

        public var description: String {
            switch self {
            case .listenFDs(let e): "sd_listen_fds: \(String(cString: strerror(e)))"
            case .notAUnixStreamListener(let fd): "the socket passed as fd \(fd) is not a listening Unix stream socket; check ListenStream= in locationd.socket"
            }
        }
    }

    /// The first passed descriptor when `LISTEN_FDS` ≥ 1 and `LISTEN_PID` is this process;
    /// nil when no socket was passed. Unsets the variables and sets FD_CLOEXEC on the fds.
    /// `count` receives how many were passed (extra ones are ignored).
    public static func listeningSocket(count: inout Int) throws(Failure) -> CInt? {
        let n = sd_listen_fds(1)
        if n < 0 { throw .listenFDs(errno: -n) }
        count = Int(n)
        guard n > 0 else { return nil }
        let fd = CInt(locationd_sd_listen_fds_start())
        guard sd_is_socket_unix(fd, Int32(SOCK_STREAM.rawValue), 1, nil, 0) > 0 else {
            throw .notAUnixStreamListener(fd)
        }
        return fd
    }
}
