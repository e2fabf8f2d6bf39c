import CInetDiag
import Glibc
import NIOCore

/// Who is at the other end of a TCP connection from this host, as the kernel knows it: gpsd's
/// clients connect over TCP only, and a TCP peer's word about itself is worth nothing. The
/// peer's socket is found by the connection's addresses with inet_diag (NETLINK_SOCK_DIAG: its
/// uid and inode, as `ss -e` shows them), the process holding that socket by its inode in
/// /proc/PID/fd, and then the peer is resolved as a Unix-socket peer is (`PeerIdentity.resolve`).
///
/// Nil — the policy's default rule, as for any peer that cannot be identified — when the peer
/// is not on loopback, or its socket or process is gone.
enum LoopbackPeer {
    /// The peer as the policy sees it: its process's groups and executable, read as a Unix-socket
    /// peer's are.
    static func identity(remote: SocketAddress?, local: SocketAddress?, hint: Int32? = nil) -> PeerIdentity? {
        credentials(remote: remote, local: local, hint: hint).map(PeerIdentity.resolve)
    }

    /// The kernel's record of the peer of a connection accepted at `local` from `remote`.
    static func credentials(remote: SocketAddress?, local: SocketAddress?, hint: Int32? = nil) -> PeerCredentials? {
        guard let ends = Ends(remote: remote, local: local), ends.isLoopback else { return nil }
        var uid: UInt32 = 0
        var inode: UInt = 0
        let found = ends.peer.withUnsafeBytes { peer in
            ends.server.withUnsafeBytes { server in
                locationd_tcp_socket_owner(ends.family, peer.baseAddress, ends.peerPort, server.baseAddress, ends.serverPort,
                                           &uid, &inode)
            }
        }
        guard found == 0, inode != 0, let pid = process(holdingSocket: inode, hint: hint) else { return nil }
        return PeerCredentials(pid: pid, uid: uid, gid: effectiveGroup(pid: pid) ?? uid_t.max)
    }

    /// A connection's two ends as inet_diag wants them: one family, raw addresses, host-order ports.
    struct Ends: Equatable {
        var family: Int32
        var peer: [UInt8]
        var peerPort: UInt16
        var server: [UInt8]
        var serverPort: UInt16

        init?(remote: SocketAddress?, local: SocketAddress?) {
            guard let (rf, ra, rp) = Self.parts(remote), let (lf, la, lp) = Self.parts(local) else { return nil }
            // A v4 peer of a dual-stack listener shows as ::ffff:a.b.c.d; its socket is AF_INET.
            if rf == AF_INET6, lf == AF_INET6, let r4 = Self.mappedV4(ra), let l4 = Self.mappedV4(la) {
                self.init(family: AF_INET, peer: r4, peerPort: rp, server: l4, serverPort: lp)
            } else if rf == lf {
                self.init(family: rf, peer: ra, peerPort: rp, server: la, serverPort: lp)
            } else {
                return nil
            }
        }

        init(family: Int32, peer: [UInt8], peerPort: UInt16, server: [UInt8], serverPort: UInt16) {
            self.family = family; self.peer = peer; self.peerPort = peerPort; self.server = server; self.serverPort = serverPort
        }

        /// 127.0.0.0/8 or ::1: a process of this host (in the daemon's network namespace).
        var isLoopback: Bool {
            family == AF_INET ? peer.first == 127 : peer == [UInt8](repeating: 0, count: 15) + [1]
        }

        static func parts(_ address: SocketAddress?) -> (Int32, [UInt8], UInt16)? {
            switch address {
            case .v4(let a):
                let bytes = withUnsafeBytes(of: a.address.sin_addr.s_addr) { Array($0) }
                return (AF_INET, bytes, UInt16(bigEndian: a.address.sin_port))
            case .v6(let a):
                let bytes = withUnsafeBytes(of: a.address.sin6_addr) { Array($0) }
                return (AF_INET6, bytes, UInt16(bigEndian: a.address.sin6_port))
            default:
                return nil
            }
        }

        static func mappedV4(_ v6: [UInt8]) -> [UInt8]? {
            v6.count == 16 && v6[0..<10].allSatisfy { $0 == 0 } && v6[10] == 0xFF && v6[11] == 0xFF ? Array(v6[12...]) : nil
        }
    }

    /// The process that holds the socket `inode`: `hint` first (the last peer found, as a
    /// program often opens several connections), then every process in /proc. Processes the
    /// daemon may not inspect (no CAP_SYS_PTRACE, another user's) are passed over.
    static func process(holdingSocket inode: UInt, hint: Int32?) -> Int32? {
        let link = Array("socket:[\(inode)]".utf8)
        if let hint, holds(hint, link) { return hint }
        guard let proc = opendir("/proc") else { return nil }
        defer { closedir(proc) }
        while let entry = readdir(proc) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            guard let pid = Int32(name), pid != hint, holds(pid, link) else { continue }
            return pid
        }
        return nil
    }

    /// Whether one of `pid`'s descriptors is the socket whose link text is `link`.
    private static func holds(_ pid: Int32, _ link: [UInt8]) -> Bool {
        let dir = "/proc/\(pid)/fd/"
        guard let fds = opendir(dir) else { return false }
        defer { closedir(fds) }
        var buffer = [CChar](repeating: 0, count: 64)
        while let entry = readdir(fds) {
            let n = withUnsafeBytes(of: entry.pointee.d_name) { raw -> Int in
                let name = String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
                guard name.first != "." else { return -1 }
                return readlink(dir + name, &buffer, buffer.count)
            }
            if n == link.count, buffer.prefix(n).elementsEqual(link, by: { UInt8(bitPattern: $0) == $1 }) { return true }
        }
        return false
    }

    /// The effective gid of `pid` (the `Gid:` line of /proc/PID/status: real, effective, …),
    /// as SO_PEERCRED would give it.
    static func effectiveGroup(pid: Int32) -> UInt32? {
        guard let status = try? DaemonOptions.readFile("/proc/\(pid)/status"),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("Gid:") }) else { return nil }
        let ids = line.dropFirst(4).split(whereSeparator: { $0 == " " || $0 == "\t" })
        return ids.count > 1 ? UInt32(ids[1]) : nil
    }
}
