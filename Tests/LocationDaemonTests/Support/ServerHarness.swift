import Dispatch
import Glibc
import LocationClient
import LocationCore
import LocationProtocol
import Logging
import NIOCore
import NIOPosix
import Synchronization
@testable import LocationDaemon
import TestSupport

/// A hub and server on a fresh socket path, torn down by `stop()`. Right after `start`, a test
/// writes `defer { h.stopIfRunning() }`: a test that throws or returns before its `await stop()`
/// leaves no event-loop thread, connection, socket or temp folder behind.
final class ServerHarness: Sendable {
    let group: MultiThreadedEventLoopGroup
    let hub: Hub
    let server: SocketServer
    let directory: String
    var path: String { server.configuration.path }
    private let stopped = Mutex(false)

    /// A harness whose policy has no owner rule and one rule, `rule`, for this test process's
    /// user (its connections are then an ordinary program, not the owner).
    static func start(onlyRule rule: PolicyRule) async throws -> ServerHarness {
        let h = try await start()
        var policy = Policy()
        policy.ownerRule = false
        policy.rules = [rule]
        do { try await h.server.applyPolicy(policy) } catch {
            h.stopIfRunning()
            throw error
        }
        return h
    }

    static func start(store: RegionStore? = nil, queue: EventQueue? = nil, identities: ProgramIdentities? = nil, log: CapturedLog? = nil,
                      regionLimits: RegionMonitor.Limits = RegionMonitor.Limits(),
                      maxBackgroundProgramsPerUser: Int = Hub.defaultMaxBackgroundProgramsPerUser,
                      _ configure: @Sendable (inout SocketServer.Configuration) -> Void = { _ in }) async throws -> ServerHarness {
        var template = Array("/tmp/ldt-XXXXXX".utf8CString)
        guard let dir = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            fatalError("mkdtemp failed")
        }
        let directory = String(cString: dir)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        var logger = log?.logger ?? Logger(label: "test")
        if log == nil { logger.logLevel = .critical }
        let hub = Hub(eventLoop: group.next(), sourceDescription: "test source", logger: logger,
                      regionLimits: regionLimits, maxBackgroundProgramsPerUser: maxBackgroundProgramsPerUser,
                      regionStore: store, queue: queue, identities: identities)
        var config = SocketServer.Configuration(path: directory + "/run/s.sock")
        configure(&config)
        do {
            let server = try await SocketServer.start(hub: hub, configuration: config, logger: logger)
            return ServerHarness(group: group, hub: hub, server: server, directory: directory)
        } catch {
            try? await group.shutdownGracefully()
            rmdir(directory + "/run")
            rmdir(directory)
            throw error
        }
    }

    private init(group: MultiThreadedEventLoopGroup, hub: Hub, server: SocketServer, directory: String) {
        self.group = group; self.hub = hub; self.server = server; self.directory = directory
    }

    /// Whether this call is the first to stop the harness.
    private func claimStop() -> Bool { stopped.withLock { was in defer { was = true }; return !was } }

    func stop() async {
        guard claimStop() else { return }
        await server.close()
        try? await group.shutdownGracefully()
        rmdir(directory + "/run")
        rmdir(directory)
    }

    /// `count` peers that read the hello, send `requests` and are gone before the daemon reads
    /// them: the loop is held while they send and close, so each request is answered to a peer
    /// that has gone (else the daemon may answer them first and see the close after).
    func vanishingPeers(_ count: Int, sending requests: String) throws {
        var peers = (0..<count).map { _ in RawSocket(path: path) }
        for p in peers { precondition(p.readLine()?.contains(#""type":"hello""#) == true, "no hello") }
        let held = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        hub.eventLoop.execute { held.signal(); release.wait() }
        held.wait()
        for p in peers { p.send(requests) }
        peers.removeAll()  // closed, their requests unread
        release.signal()
    }

    /// For `defer`, which cannot await: stops a harness the test did not stop, synchronously.
    /// Shutting the event-loop group down closes the listener and every connection.
    func stopIfRunning() {
        guard claimStop() else { return }
        try? group.syncShutdownGracefully()
        unlink(path)
        rmdir(directory + "/run")
        rmdir(directory)
    }
}

/// A clock for `SocketServer.Configuration.clock`: real time plus an offset the test advances,
/// so a pause in the scenario costs no wall-clock time (and cannot come out shorter under load).
final class AdvancingClock: Sendable {
    private let offset = Mutex<Int64>(0)
    func advance(by amount: TimeAmount) { offset.withLock { $0 += amount.nanoseconds } }
    var now: NIODeadline { NIODeadline.now() + .nanoseconds(offset.withLock { $0 }) }
    var shellClock: ShellClock { ShellClock { self.now } }
}

/// How reading a connection to its end ended: the peer closed it (an error such as ECONNRESET
/// counts: the peer closed with input unread), or the deadline passed first.
enum StreamEnd: Equatable { case closed, timedOut }

/// A blocking Unix socket for malformed input and for a client that does not read.
final class RawSocket {
    let fd: Int32
    var pending: [UInt8] = []

    init(path: String) {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        precondition(fd >= 0)
        var tv = timeval(tv_sec: 20, tv_usec: 0)  // a hung test fails instead of hanging
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        let rc = withSockaddr(path) { connect(fd, $0, $1) }
        precondition(rc == 0, "connect failed")
    }

    deinit { close(fd) }

    func send(_ text: String) {
        let bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { return }
            offset += n
        }
    }

    /// Reads (and drops) everything until the server closes the connection or the 20 s read
    /// timeout passes, and says which.
    func readToEnd() -> StreamEnd {
        pending.removeAll()
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
            if n > 0 { continue }
            if n < 0 && errno == EINTR { continue }
            return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) ? .timedOut : .closed
        }
    }

    /// The next line, or nil at EOF (or timeout).
    func readLine() -> String? {
        while true {
            if let nl = pending.firstIndex(of: 0x0A) {
                let line = String(decoding: pending[..<nl], as: UTF8.self)
                pending.removeFirst(nl + 1)
                return line
            }
            var chunk = [UInt8](repeating: 0, count: 65_536)
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
            if n <= 0 { return nil }
            pending.append(contentsOf: chunk[0..<n])
        }
    }
}

func testFix(_ i: Int, latitude: Double? = nil) -> Fix {
    Fix(time: Timestamp(seconds: 1_552_384_800 + Int64(i), nanoseconds: 250_000_000),
        coordinate: Coordinate(latitude: latitude ?? (50 + Double(i) * 1e-5), longitude: 8.5),
        mode: .threeD, altitudeMSL: 100, horizontalAccuracy: 5)
}

extension AsyncThrowingStream<ServerMessage, any Error>.Iterator {
    /// The next message, failing the test on end of stream.
    mutating func expectNext() async throws -> ServerMessage {
        guard let m = try await next() else { throw LocationClientError.closed }
        return m
    }
}

/// A flag one thread sets and another waits for.
final class Flag: Sendable {
    private let value = Atomic<Bool>(false)
    func set() { value.store(true, ordering: .releasing) }
    var isSet: Bool { value.load(ordering: .acquiring) }
}
