import CSystemd
#if canImport(Glibc)
import Glibc
#endif

/// The service manager's notify and watchdog protocols, through libsystemd (sd_notify(3),
/// sd_watchdog_enabled(3)). Every call is a no-op when the daemon was not started by systemd.
public enum SystemdNotifier {
    /// Whether `NOTIFY_SOCKET` is set: someone listens for notifications.
    public static var isEnabled: Bool { getenv("NOTIFY_SOCKET") != nil }

    /// Sends `state`, newline-separated `KEY=value` assignments (`READY=1`, `STATUS=…`); false
    /// when `NOTIFY_SOCKET` is unset or the send failed.
    @discardableResult
    public static func notify(_ state: String) -> Bool { sd_notify(0, state) > 0 }

    /// The watchdog interval systemd asked for (`WATCHDOG_USEC`), in microseconds; nil when
    /// there is none for this process (sd_watchdog_enabled(3) checks `WATCHDOG_PID`).
    public static func watchdogMicroseconds() -> UInt64? {
        var usec: UInt64 = 0
        return sd_watchdog_enabled(0, &usec) > 0 && usec > 0 ? usec : nil
    }

    /// CLOCK_MONOTONIC in microseconds, for `RELOADING=1`'s `MONOTONIC_USEC=`.
    public static func monotonicMicroseconds() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000 + UInt64(ts.tv_nsec) / 1000
    }
}

/// Socket activation (sd_listen_fds_with_names(3)): the listening socket systemd passed
/// (locationd.socket), if any.
public enum SocketActivation {
    public enum Failure: Error, Hashable, Sendable, CustomStringConvertible {
        case invalid(errno: Int32)
        case notAUnixStreamListener(CInt, name: String)

        public var description: String {
            switch self {
            case .invalid(let e):
                "the sockets passed by systemd (LISTEN_FDS, LISTEN_PID) are unusable: \(String(cString: strerror(e))); they are set by systemd for a socket-activated service — unset them when starting locationd by hand"
            case .notAUnixStreamListener(let fd, let name):
                "the socket passed as fd \(fd) (\(name)) is not a listening Unix stream socket; check ListenStream= in locationd.socket"
            }
        }
    }

    /// A passed socket: its descriptor, its name (`FileDescriptorName=`, by default the socket
    /// unit's name), and how many were passed in all (the daemon serves the first).
    public struct Passed: Sendable {
        public var fd: CInt
        public var name: String
        public var count: Int
    }

    /// The first passed descriptor, or nil when none was passed to this process. libsystemd
    /// unsets the variables (so no child inherits them) and sets FD_CLOEXEC on the descriptors.
    public static func listeningSocket() throws(Failure) -> Passed? {
        var names: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
        let n = sd_listen_fds_with_names(1, &names)
        defer {
            if let names {
                for i in 0..<Int(max(n, 0)) { free(names[i]) }
                free(names)
            }
        }
        guard n >= 0 else { throw .invalid(errno: -n) }
        guard n > 0 else { return nil }
        let fd = SD_LISTEN_FDS_START
        let name = names?[0].map { String(cString: $0) } ?? "unknown"
        guard sd_is_socket_unix(fd, Int32(SOCK_STREAM.rawValue), 1, nil, 0) > 0 else {
            throw .notAUnixStreamListener(fd, name: name)
        }
        return Passed(fd: fd, name: name, count: Int(n))
    }
}
