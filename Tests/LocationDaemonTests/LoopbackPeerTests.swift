import Foundation
import Glibc
import NIOCore
import TestSupport
import Testing
@testable import LocationDaemon

/// A TCP connection to a loopback listener, both ends open: (listener port, client's port,
/// accepted descriptor, client descriptor).
private func loopbackConnection() throws -> (server: UInt16, client: UInt16, accepted: Int32, clientFD: Int32, listener: Int32) {
    let (listener, port) = try GPSDHarness.listenLoopback()
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    addr.sin_port = port.bigEndian
    let connected = withUnsafePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
    }
    #expect(connected)
    let accepted = accept(listener, nil, nil)
    return (port, try remotePort(of: accepted), accepted, fd, listener)
}

/// The remote port of a connected socket.
private func remotePort(of fd: Int32) throws -> UInt16 {
    var peer = sockaddr_in()
    var len = socklen_t(MemoryLayout<sockaddr_in>.size)
    let ok = withUnsafeMutablePointer(to: &peer) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(fd, $0, &len) == 0 } }
    try #require(ok, "getpeername: \(errno)")
    return UInt16(bigEndian: peer.sin_port)
}

private func loopback(_ port: UInt16) throws -> SocketAddress { try SocketAddress(ipAddress: "127.0.0.1", port: Int(port)) }

@Suite("TCP peers identified by the kernel (inet_diag, /proc)")
struct LoopbackPeerTests {
    @Test("A peer in this process: its pid, uid and gid")
    func thisProcess() throws {
        let c = try loopbackConnection()
        defer { close(c.accepted); close(c.clientFD); close(c.listener) }
        let peer = try #require(LoopbackPeer.credentials(remote: try loopback(c.client), local: try loopback(c.server)))
        #expect(peer.pid == getpid() && peer.uid == getuid() && peer.gid == getegid())
    }

    @Test("A peer in another process: that process and its executable, for the policy")
    func otherProcess() async throws {
        let (listener, port) = try GPSDHarness.listenLoopback()
        defer { close(listener) }
        let python = Process()
        python.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        python.arguments = ["-c", "import socket,sys; s=socket.create_connection(('127.0.0.1',\(port))); sys.stdin.read()"]
        let stdin = Pipe()
        python.standardInput = stdin
        try python.run()
        defer { try? stdin.fileHandleForWriting.close(); python.waitUntilExit() }
        let accepted = accept(listener, nil, nil)
        defer { close(accepted) }
        let who = try #require(LoopbackPeer.identity(remote: try loopback(try remotePort(of: accepted)), local: try loopback(port)))
        #expect(who.pid == python.processIdentifier && who.uid == getuid())
        #expect(who.executable?.hasPrefix("/usr/bin/python3") == true && who.executableVerified)
        #expect(who.groups.contains(getegid()))
        // The last peer found is looked at first: a stale hint costs nothing but a look.
        let again = LoopbackPeer.credentials(remote: try loopback(try remotePort(of: accepted)), local: try loopback(port), hint: getpid())
        #expect(again?.pid == python.processIdentifier)
    }

    @Test("A peer whose socket is gone, or that is not on loopback, is not identified")
    func unidentified() throws {
        let c = try loopbackConnection()
        defer { close(c.accepted); close(c.listener) }
        close(c.clientFD)
        #expect(LoopbackPeer.credentials(remote: try loopback(c.client), local: try loopback(c.server)) == nil)
        let far = try SocketAddress(ipAddress: "192.0.2.7", port: Int(c.client))
        #expect(LoopbackPeer.credentials(remote: far, local: try loopback(c.server)) == nil)
        #expect(LoopbackPeer.credentials(remote: nil, local: try loopback(c.server)) == nil)
    }

    @Test("Loopback is 127/8 and ::1; a v4 peer of a dual-stack listener is looked up as v4")
    func loopbackAddresses() throws {
        func ends(_ remote: String, _ local: String) throws -> LoopbackPeer.Ends? {
            LoopbackPeer.Ends(remote: try SocketAddress(ipAddress: remote, port: 1), local: try SocketAddress(ipAddress: local, port: 2))
        }
        #expect(try ends("127.1.2.3", "127.0.0.1")?.isLoopback == true)
        #expect(try ends("::1", "::1")?.isLoopback == true)
        #expect(try ends("10.0.0.1", "10.0.0.2")?.isLoopback == false)
        #expect(try ends("fe80::1", "::1")?.isLoopback == false)
        let mapped = try #require(try ends("::ffff:127.0.0.1", "::ffff:127.0.0.1"))
        #expect(mapped.family == AF_INET && mapped.peer == [127, 0, 0, 1] && mapped.isLoopback)
        #expect(try ends("127.0.0.1", "::1") == nil)
    }
}

/// PID 1 here is not systemd: the shipped unit is read and checked against what the gpsd
/// listener opens — TCP on loopback, and a NETLINK_SOCK_DIAG socket per connection.
@Suite("The shipped unit allows the gpsd listener")
struct GPSDListenerUnitTests {
    static func values(_ key: String) throws -> [String] {
        let unit = try String(contentsOf: ConfigTests.repo.appendingPathComponent("systemd/locationd.service"), encoding: .utf8)
        return unit.split(separator: "\n").filter { $0.hasPrefix(key + "=") }
            .flatMap { $0.dropFirst(key.count + 1).split(separator: " ").map(String.init) }
    }

    @Test("AF_NETLINK and the Internet families, and loopback addresses only")
    func sandbox() throws {
        #expect(Set(try Self.values("RestrictAddressFamilies")).isSuperset(of: ["AF_INET", "AF_INET6", "AF_NETLINK"]))
        #expect(try Self.values("IPAddressDeny") == ["any"])
        // systemd's `localhost` is 127.0.0.0/8 and ::1: every address LoopbackPeer identifies.
        #expect(try Self.values("IPAddressAllow") == ["localhost"])
        #expect(try Self.values("SystemCallFilter").contains("@system-service"))
        #expect(try Self.values("PrivateNetwork").isEmpty, "a private network would hide the peers' sockets from inet_diag")
    }
}
