import Glibc
import LocationCore
import LocationProtocol
import Synchronization

/// Errors of the client itself (protocol errors from the server arrive as `ProtocolError`).
public enum LocationClientError: Error, Hashable, Sendable, CustomStringConvertible {
    case system(String, errno: Int32)
    case pathTooLong(String)
    case closed
    case unexpectedReply(String)

    public var description: String {
        switch self {
        case .system(let what, let e): "\(what): \(String(cString: strerror(e)))"
        case .pathTooLong(let p): "socket path too long: \(p)"
        case .closed: "connection closed"
        case .unexpectedReply(let r): "unexpected reply: \(r)"
        }
    }
}

/// A subscriber's connection to locationd over its Unix socket (protocol v1, NDJSON).
///
/// Plain POSIX socket, one dedicated reader thread (no Foundation, no NIO). Replies to the
/// convenience calls (`subscribe`, `unsubscribe`, `status`, which number their requests) are
/// routed to those calls; everything else — events, replies to `send`, errors without a
/// pending request — arrives on `messages`, in order. `messages` buffers without bound: read it.
public final class LocationClient: Sendable {
    /// The server's greeting, read on connect.
    public let hello: ServerHello
    /// Events and unsolicited replies, in arrival order. Finishes when the connection closes
    /// (throwing if it broke or the server sent something undecodable). One consumer.
    public let messages: AsyncThrowingStream<ServerMessage, any Error>
    private let core: Core

    private init(core: Core, hello: ServerHello, messages: AsyncThrowingStream<ServerMessage, any Error>) {
        self.core = core
        self.hello = hello
        self.messages = messages
    }

    deinit { core.shutdown() }

    /// Connects to the socket at `path` and waits for the server's hello.
    public static func connect(path: String) async throws -> LocationClient {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw LocationClientError.system("socket", errno: errno) }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: addr.sun_path) else {
            Glibc.close(fd)
            throw LocationClientError.pathTooLong(path)
        }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard rc == 0 else {
            let e = errno
            Glibc.close(fd)
            throw LocationClientError.system("connect \(path)", errno: e)
        }
        let (stream, continuation) = AsyncThrowingStream<ServerMessage, any Error>.makeStream()
        let core = Core(fd: fd, continuation: continuation)
        let hello = try await withCheckedThrowingContinuation { (waiter: CheckedContinuation<ServerMessage, any Error>) in
            core.state.withLock { $0.helloWaiter = waiter }
            core.startReader()
        }
        guard case .hello(let h) = hello else { throw LocationClientError.unexpectedReply(hello.line) }
        return LocationClient(core: core, hello: h, messages: stream)
    }

    /// Sends one request; its reply arrives on `messages`.
    public func send(_ request: Request) throws {
        var out: [UInt8] = []
        request.append(to: &out)
        try core.write(out)
    }

    /// Sends raw bytes (a newline is not added). For tools and tests of malformed input.
    public func sendRaw(_ text: String) throws {
        try core.write(Array(text.utf8))
    }

    /// Opens (or replaces) the subscription; returns the effective options. Events follow on
    /// `messages`, starting with a `status` event.
    @discardableResult
    public func subscribe(_ options: SubscriptionOptions = SubscriptionOptions()) async throws -> SubscriptionOptions {
        let reply = try await core.request { .subscribe(id: $0, options: options) }
        guard case .subscribed(_, let effective) = reply else { throw LocationClientError.unexpectedReply(reply.line) }
        return effective
    }

    /// Opens this connection's session (nothing is delivered without one); returns the grant.
    /// A denied peer gets a `notAuthorized` `ProtocolError`.
    @discardableResult
    public func startSession(_ authorization: Authorization = .whenInUse, purpose: String? = nil) async throws -> SessionInfo {
        let reply = try await core.request { .sessionStart(id: $0, authorization: authorization, purpose: purpose) }
        guard case .session(let info) = reply else { throw LocationClientError.unexpectedReply(reply.line) }
        return info
    }

    public func endSession() async throws {
        let reply = try await core.request { .sessionEnd(id: $0) }
        guard case .session = reply else { throw LocationClientError.unexpectedReply(reply.line) }
    }

    /// Tells the daemon the program has its queued events up to `seq` (they are forgotten);
    /// returns how many remain queued.
    @discardableResult
    public func acknowledge(_ seq: UInt64) async throws -> Int {
        let reply = try await core.request { .ack(id: $0, seq: seq) }
        guard case .acked(_, _, let queued) = reply else { throw LocationClientError.unexpectedReply(reply.line) }
        return queued
    }

    public func unsubscribe() async throws {
        let reply = try await core.request { .unsubscribe(id: $0) }
        guard case .unsubscribed = reply else { throw LocationClientError.unexpectedReply(reply.line) }
    }

    public func status() async throws -> StatusReply {
        let reply = try await core.request { .status(id: $0) }
        guard case .statusReply(let s) = reply else { throw LocationClientError.unexpectedReply(reply.line) }
        return s
    }

    /// Sends a request and waits for its reply (the request's id is replaced by the client's).
    /// An error reply throws `ProtocolError`.
    public func request(_ make: @escaping (RequestID) -> Request) async throws -> ServerMessage {
        try await core.request(make)
    }

    /// Closes the connection; `messages` finishes.
    public func close() { core.shutdown() }
}

/// The shared state of a client and its reader thread.
final class Core: Sendable {
    struct State {
        var closed = false
        var fdClosed = false
        var nextID = 1
        var waiters: [RequestID: CheckedContinuation<ServerMessage, any Error>] = [:]
        var helloWaiter: CheckedContinuation<ServerMessage, any Error>?
    }

    let fd: Int32
    let continuation: AsyncThrowingStream<ServerMessage, any Error>.Continuation
    let state = Mutex(State())

    init(fd: Int32, continuation: AsyncThrowingStream<ServerMessage, any Error>.Continuation) {
        self.fd = fd
        self.continuation = continuation
    }

    func write(_ bytes: [UInt8]) throws {
        try state.withLock { s throws in
            guard !s.closed else { throw LocationClientError.closed }
            var offset = 0
            while offset < bytes.count {
                let n = bytes.withUnsafeBytes { raw in
                    Glibc.send(fd, raw.baseAddress! + offset, raw.count - offset, Int32(MSG_NOSIGNAL))
                }
                if n < 0 {
                    if errno == EINTR { continue }
                    throw LocationClientError.system("send", errno: errno)
                }
                offset += n
            }
        }
    }

    func request(_ make: (RequestID) -> Request) async throws -> ServerMessage {
        let id: RequestID = state.withLock { s in
            defer { s.nextID += 1 }
            return .number(Double(s.nextID))
        }
        var out: [UInt8] = []
        make(id).append(to: &out)
        return try await withCheckedThrowingContinuation { waiter in
            let registered = state.withLock { s in
                guard !s.closed else { return false }
                s.waiters[id] = waiter
                return true
            }
            guard registered else { waiter.resume(throwing: LocationClientError.closed); return }
            do {
                try write(out)
            } catch {
                if let w = state.withLock({ $0.waiters.removeValue(forKey: id) }) { w.resume(throwing: error) }
            }
        }
    }

    /// Wakes the reader (which closes the descriptor on its way out).
    func shutdown() {
        state.withLock { s in
            if !s.fdClosed { _ = Glibc.shutdown(fd, Int32(SHUT_RDWR)) }
        }
    }

    func startReader() {
        let box = Unmanaged.passRetained(self)
        var tid = pthread_t()
        let rc = pthread_create(&tid, nil, { arg in
            let core = Unmanaged<Core>.fromOpaque(arg!).takeRetainedValue()
            core.readLoop()
            return nil
        }, box.toOpaque())
        if rc == 0 {
            pthread_detach(tid)
        } else {
            box.release()
            finish(error: LocationClientError.system("pthread_create", errno: rc))
        }
    }

    private func readLoop() {
        var pending: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        var failure: (any Error)? = nil
        reading: while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress!, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                failure = LocationClientError.system("read", errno: errno)
                break
            }
            if n == 0 { break }
            pending.append(contentsOf: chunk[0..<n])
            var start = 0
            while let nl = pending[start...].firstIndex(of: 0x0A) {
                let line = pending[start..<nl]
                start = nl + 1
                if line.isEmpty { continue }
                do {
                    route(try ServerMessage.decode(line))
                } catch {
                    failure = error
                    break reading
                }
            }
            pending.removeFirst(start)
            if pending.count > LocationProtocol.maxLineBytes * 16 {
                failure = LocationClientError.unexpectedReply("line longer than \(pending.count) bytes")
                break
            }
        }
        finish(error: failure)
    }

    private func route(_ message: ServerMessage) {
        let replyID: RequestID?
        switch message {
        case .hello(let h): replyID = h.id
        case .subscribed(let id, _), .unsubscribed(let id): replyID = id
        case .statusReply(let s): replyID = s.id
        case .error(let e): replyID = e.id
        case .regions(let id, _), .regionsChanged(let id, _, _, _): replyID = id
        case .session(let info): replyID = info.id
        case .acked(let id, _, _): replyID = id
        case .location, .status, .visit, .significant, .region, .queued, .overflow: replyID = nil
        }
        let waiter: CheckedContinuation<ServerMessage, any Error>? = state.withLock { s in
            if let w = s.helloWaiter, case .hello = message {
                s.helloWaiter = nil
                return w
            }
            if let replyID { return s.waiters.removeValue(forKey: replyID) }
            return nil
        }
        guard let waiter else {
            continuation.yield(message)
            return
        }
        if case .error(let e) = message { waiter.resume(throwing: e) } else { waiter.resume(returning: message) }
    }

    private func finish(error: (any Error)?) {
        let waiters = state.withLock { s in
            s.closed = true
            if !s.fdClosed { Glibc.close(fd); s.fdClosed = true }
            var all = Array(s.waiters.values)
            s.waiters.removeAll()
            if let h = s.helloWaiter { all.append(h); s.helloWaiter = nil }
            return all
        }
        for w in waiters { w.resume(throwing: error ?? LocationClientError.closed) }
        continuation.finish(throwing: error)
    }
}
