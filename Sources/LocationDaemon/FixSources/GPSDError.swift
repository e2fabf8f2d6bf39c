#if canImport(Glibc)
import Glibc
#endif

/// An error talking to gpsd: a failed connection, a lost one, or gpsd closing it.
///
/// `message` says what went wrong and what to look at, in words meant for the log line
/// `cannot connect to gpsd at HOST:PORT: MESSAGE; …`. It is the same for every attempt that
/// fails the same way (no addresses in changing order, no counters), so the source compares
/// messages to warn only when the reason changes (docs/gpsd.md, "Reconnect and stop timing").
public struct GPSDError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The `errno` of the socket failure, or 0 when gpsd closed the connection, broke the
    /// protocol, or the host name could not be resolved.
    public var code: Int32
    public var message: String
    public init(code: Int32, message: String) { self.code = code; self.message = message }
    public var description: String { "\(message) (\(code))" }

    /// A socket error's reason, with what to check for the common ones.
    static func reason(errno code: Int32) -> String {
        switch code {
        case ECONNREFUSED:
            "connection refused: nothing listens on that port (is gpsd running? systemctl status gpsd.socket gpsd; or correct [gpsd] host/port or --gpsd)"
        case ENETUNREACH, EHOSTUNREACH, EADDRNOTAVAIL:
            "\(String(cString: strerror(code))) (check the address and the network)"
        case EPERM, EACCES:
            "\(String(cString: strerror(code))): a firewall refuses it (under systemd the unit allows only localhost: a remote gpsd needs a drop-in with IPAddressAllow=ADDRESS, docs/systemd.md)"
        case ETIMEDOUT:
            "no answer: the host is down or a firewall drops the connection"
        default:
            String(cString: strerror(code))
        }
    }
}
