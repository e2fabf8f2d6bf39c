#if canImport(Glibc)
import Glibc
#endif
import LocationCore
import NIOCore
import NIOPosix

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

extension GPSDError {
    static let closed = GPSDError(code: 0, message: "gpsd closed the connection")
    static let closedUnheard = GPSDError(code: 0, message: "gpsd closed the connection before sending anything (its client limit reached, or not gpsd on that port)")

    /// NIO's connect and socket errors: the errno when there is one, a host name that does not
    /// resolve, a connect timeout. The message is the same for every attempt that fails the
    /// same way (the source warns only when it changes).
    init(_ error: any Error) {
        switch error {
        case let io as IOError:
            self.init(code: io.errnoCode, message: Self.reason(errno: io.errnoCode))
        case let unknown as SocketAddressError.UnknownHost:
            self.init(code: 0, message: Self.unresolved(unknown.host, unknown.errorDescription))
        case ChannelError.connectTimeout(let limit):
            let seconds = Double(limit.nanoseconds) / 1e9
            self.init(code: ETIMEDOUT, message: "no connection within \(numberText(seconds)) s: the host is down, a firewall drops the connection, or the name lookup does not answer")
        case let c as NIOConnectionError:
            // One reason per address tried (localhost: ::1 and 127.0.0.1), in a fixed order.
            let each = c.connectionErrors
                .map { (address: $0.target.ipAddress ?? "\($0.target)", error: GPSDError($0.error)) }
                .sorted { $0.address < $1.address }
            guard let first = each.first else {
                if let dns = c.dnsAError ?? c.dnsAAAAError {
                    let why = (dns as? SocketAddressError.UnknownHost)?.errorDescription ?? "\(dns)"
                    self.init(code: 0, message: Self.unresolved(c.host, why))
                } else {
                    self.init(code: 0, message: "\(c)")
                }
                return
            }
            if each.allSatisfy({ $0.error == first.error }) {
                self = first.error
            } else {
                self.init(code: first.error.code, message: each.map { "\($0.address): \($0.error.message)" }.joined(separator: "; "))
            }
        default:
            self.init(code: 0, message: "\(error)")
        }
    }

    static func unresolved(_ host: String, _ why: String) -> String {
        "cannot resolve the host name '\(host)' (\(why)): correct [gpsd] host or --gpsd HOST[:PORT], or check the resolver (/etc/hosts, DNS)"
    }
}
