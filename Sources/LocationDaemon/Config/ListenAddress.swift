import Glibc

/// `[gpsd_server] listen` / `--gpsd-listen`: a numeric address and a port, `127.0.0.1:2948` or
/// `[::1]:2948`. A name is refused: whether the listener is on loopback — the only place its
/// peers can be identified (`LoopbackPeer`) — must not depend on what a name resolves to.
public struct ListenAddress: Hashable, Sendable {
    public var host: String
    public var port: Int
    /// 127.0.0.0/8 or ::1.
    public var isLoopback: Bool

    public static func parse(_ text: String) -> Result<ListenAddress, ListenAddressError> {
        let expected = "expected ADDRESS:PORT with a numeric address, e.g. 127.0.0.1:2948 or [::1]:2948, and a port 1…65535"
        guard text.contains(":"), let (host, portText) = DaemonOptions.hostAndPort(text), let port = Int(portText),
              (1...65535).contains(port), text.hasSuffix(":" + portText) else { return .failure(ListenAddressError(expected)) }
        var v4 = in_addr(), v6 = in6_addr()
        if inet_pton(AF_INET, host, &v4) == 1 {
            let first = UInt8(truncatingIfNeeded: UInt32(bigEndian: v4.s_addr) >> 24)
            return .success(ListenAddress(host: host, port: port, isLoopback: first == 127))
        }
        if inet_pton(AF_INET6, host, &v6) == 1 {
            let bytes = withUnsafeBytes(of: v6) { Array($0) }
            return .success(ListenAddress(host: host, port: port, isLoopback: bytes == [UInt8](repeating: 0, count: 15) + [1]))
        }
        return .failure(ListenAddressError("'\(host)' is not a numeric address; " + expected))
    }

    /// Why `text` is no listen address; nil for one, or for "" (the listener off).
    @Sendable static func problem(_ text: String) -> String? {
        guard !text.isEmpty, case .failure(let e) = parse(text) else { return nil }
        return e.message
    }
}

public struct ListenAddressError: Error, Hashable, Sendable {
    public var message: String
    init(_ message: String) { self.message = message }
}
