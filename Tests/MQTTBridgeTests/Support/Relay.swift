import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A TCP relay from a free loopback port to a broker's, for the network faults a test needs at
/// an exact point of MQTT's exchange: what the client sends can be lost (`dropping`), what the
/// broker answers held until `release()` (`holding`), and the connection cut. Bound at once,
/// listening only from `start()` (before it, a connection is refused). `stop()` ends it.
final class Relay: Sendable {
    let port: UInt16
    private let upstream: UInt16
    private let listener: Int32

    private struct Connection {
        var client: Int32
        var broker: Int32
        /// Directions done: at 2 both descriptors are closed (never while one is in use).
        var ended = 0
    }
    private struct State {
        var dropping = false
        var holding = false
        var held: [UInt8] = []
        /// Bytes from the client lost while `dropping`.
        var dropped = 0
        /// Connections accepted so far; the last is the current one.
        var accepted = 0
        var open: [Int: Connection] = [:]
    }
    private let state = Mutex(State())

    init(upstream: UInt16) throws {
        self.upstream = upstream
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket: \(errno)") }
        var addr = Self.loopback(port: 0)
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) == 0 && getsockname(fd, $0, &len) == 0 }
        }
        guard ok else { close(fd); throw Failure(description: "bind: \(errno)") }
        listener = fd
        port = UInt16(bigEndian: addr.sin_port)
    }

    var dropping: Bool {
        get { state.withLock { $0.dropping } }
        set { state.withLock { $0.dropping = newValue } }
    }
    var holding: Bool {
        get { state.withLock { $0.holding } }
        set { state.withLock { $0.holding = newValue } }
    }
    var dropped: Int { state.withLock { $0.dropped } }
    var held: Int { state.withLock { $0.held.count } }
    var accepted: Int { state.withLock { $0.accepted } }

    /// Listens; each connection accepted is relayed to the broker on a connection of its own.
    func start() throws {
        guard listen(listener, 8) == 0 else { throw Failure(description: "listen: \(errno)") }
        Thread.detachNewThread { [self] in acceptLoop() }
    }

    /// Sends what was held to the client and holds no more.
    func release() {
        state.withLock { s in
            s.holding = false
            if let c = s.open[s.accepted] { Self.writeAll(c.client, s.held) }
            s.held.removeAll()
        }
    }

    /// Ends every connection (both sides) at once; what was held is lost with it.
    func cut() {
        state.withLock { s in
            for c in s.open.values {
                shutdown(c.client, Int32(SHUT_RDWR))
                shutdown(c.broker, Int32(SHUT_RDWR))
            }
            s.held.removeAll()
        }
    }

    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        cut()
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            if client < 0 {
                if errno == EINTR { continue }
                break
            }
            let broker = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var addr = Self.loopback(port: upstream)
            let connected = withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(broker, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
            }
            guard connected else { close(client); close(broker); continue }
            let id = state.withLock { s in
                s.accepted += 1
                s.open[s.accepted] = Connection(client: client, broker: broker)
                return s.accepted
            }
            Thread.detachNewThread { [self] in forward(id, fromClient: true) }
            Thread.detachNewThread { [self] in forward(id, fromClient: false) }
        }
        close(listener)
    }

    /// Copies one direction of connection `id` until either side ends, then ends both.
    private func forward(_ id: Int, fromClient: Bool) {
        guard let c = state.withLock({ $0.open[id] }) else { return }
        let (from, to) = fromClient ? (c.client, c.broker) : (c.broker, c.client)
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = read(from, &buffer, buffer.count)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            let chunk = Array(buffer[0..<n])
            state.withLock { s in
                if fromClient && s.dropping {
                    s.dropped += n
                } else if !fromClient && s.holding {
                    if id == s.accepted { s.held += chunk }  // a cut connection's answer is lost
                } else {
                    Self.writeAll(to, chunk)
                }
            }
        }
        state.withLock { s in
            shutdown(c.client, Int32(SHUT_RDWR))
            shutdown(c.broker, Int32(SHUT_RDWR))
            s.open[id]?.ended += 1
            if s.open[id]?.ended == 2 {
                close(c.client)
                close(c.broker)
                s.open[id] = nil
            }
        }
    }

    private static func writeAll(_ fd: Int32, _ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return }
            offset += n
        }
    }

    private static func loopback(port: UInt16) -> sockaddr_in {
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = port.bigEndian
        return addr
    }
}
