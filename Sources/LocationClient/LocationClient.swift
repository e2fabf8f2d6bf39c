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
    /// No reply to `request` (e.g. `status (id 3)`, `hello`) within `timeout`; the connection
    /// stays open and a late reply is dropped.
    case timedOut(request: String, timeout: Duration)
    /// The connection closed (the server's side or `close()`) before `request`'s reply came.
    case closedBeforeReply(request: String)
    /// The daemon's hello announces a protocol this client does not speak.
    case unsupportedProtocol(Int)
    /// `send` was given the id of one of the client's own requests whose reply has not come
    /// (picked, waiting, timed out, or cancelled after it went out): the reply could not be
    /// told from its.
    case idInUse(RequestID)

    public var description: String {
        switch self {
        case .system(let what, let e): "\(what): \(String(cString: strerror(e)))"
        case .pathTooLong(let p): "socket path too long: \(p)"
        case .closed: "connection closed"
        case .unexpectedReply(let r): "unexpected reply: \(r)"
        case .timedOut(let request, let timeout):
            "no reply to \(request) from locationd within \(timeout): the daemon is stuck, overloaded or not serving this socket (systemctl status locationd); if it is only slow, pass a longer requestTimeout to LocationClient.connect"
        case .closedBeforeReply(let request):
            "the connection to locationd closed before the reply to \(request) (journalctl -u locationd says why the daemon closed it)"
        case .unsupportedProtocol(let v):
            "locationd speaks protocol \(v); this client speaks protocol \(LocationProtocol.protocolVersion): use a client built for that daemon"
        case .idInUse(let id):
            "request id \(id) belongs to one of this client's own requests, whose reply has not come: give send another id, or none"
        }
    }
}

/// A subscriber's connection to locationd over its Unix socket (protocol v1, NDJSON).
///
/// Plain POSIX socket, one dedicated reader thread (no Foundation, no NIO). Replies to the
/// convenience calls (`subscribe`, `unsubscribe`, `status`, which number their requests) are
/// routed to those calls; everything else — events, replies to `send`, errors without a
/// pending request — arrives on `messages`, in order. `messages` buffers without bound: read it.
///
/// Nothing waits forever: the connect, the hello, every request's reply and every write are
/// bounded by `requestTimeout` (`LocationClientError.timedOut`); when the connection closes,
/// pending requests fail at once (`closedBeforeReply`), and cancelling the calling task cancels
/// its request.
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
    /// - Parameter requestTimeout: how long the connect, the hello, each request's reply and
    ///   each write may take (a write waits while the daemon does not read).
    public static func connect(path: String, requestTimeout: Duration = .seconds(10)) async throws -> LocationClient {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw LocationClientError.system("socket", errno: errno) }
        // Bounds connect (a full listen backlog) and send (a daemon that does not read).
        let (seconds, attoseconds) = requestTimeout.components
        var limit = timeval(tv_sec: Int(max(0, seconds)), tv_usec: Int(max(0, attoseconds) / 1_000_000_000_000))
        if limit.tv_sec == 0 && limit.tv_usec == 0 { limit.tv_usec = 1 }  // 0 would mean "no timeout"
        _ = setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
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
            if e == EAGAIN || e == EWOULDBLOCK { throw LocationClientError.timedOut(request: "connect \(path)", timeout: requestTimeout) }
            throw LocationClientError.system("connect \(path)", errno: e)
        }
        let (stream, continuation) = AsyncThrowingStream<ServerMessage, any Error>.makeStream()
        let core = Core(fd: fd, continuation: continuation, timeout: requestTimeout)
        let hello: ServerMessage
        do {
            hello = try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (waiter: CheckedContinuation<ServerMessage, any Error>) in
                    let cancelled = core.state.withLock { s in
                        if Task.isCancelled { return true }
                        s.helloWaiter = Core.Pending(name: "hello", continuation: waiter, timer: core.timer(for: nil))
                        return false
                    }
                    if cancelled { waiter.resume(throwing: CancellationError()) }
                    // Started either way: the reader closes the descriptor when it ends.
                    core.startReader()
                }
            } onCancel: {
                core.failHello(with: CancellationError())
            }
        } catch {
            core.shutdown()  // nobody owns the connection: let the reader thread end
            throw error
        }
        guard case .hello(let h) = hello else {
            core.shutdown()
            throw LocationClientError.unexpectedReply(hello.line)
        }
        guard h.protocolVersion == LocationProtocol.protocolVersion else {
            core.shutdown()
            throw LocationClientError.unsupportedProtocol(h.protocolVersion)
        }
        return LocationClient(core: core, hello: h, messages: stream)
    }

    /// Sends one request; its reply arrives on `messages`. Its id must not be one of the
    /// client's own requests still without a reply (`idInUse`); the client numbers its own
    /// around the ids given here.
    public func send(_ request: Request) throws {
        var out: [UInt8] = []
        request.append(to: &out)
        if let id = request.id { try core.reserve(id) }
        do {
            try core.write(out, name: Core.name(of: out, id: request.id))
        } catch {
            if let id = request.id { core.unreserve(id) }
            throw error
        }
    }

    /// Sends raw bytes (a newline is not added). For tools and tests of malformed input.
    public func sendRaw(_ text: String) throws {
        try core.write(Array(text.utf8), name: "raw bytes")
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

    /// Every region of the program with its state (`ids`: only these), following the reply's
    /// pages (docs/protocol.md, "Regions").
    public func regions(_ ids: [String]? = nil) async throws -> [RegionRecord] {
        var all: [RegionRecord] = []
        var offset = 0
        while true {
            let reply = try await request { id in
                ids == nil ? .regionsList(id: id, offset: offset) : .regionsState(id: id, ids: ids, offset: offset)
            }
            guard case .regions(_, let page, let next) = reply else { throw LocationClientError.unexpectedReply(reply.line) }
            all += page
            guard let next, next > offset else { return all }
            offset = next
        }
    }

    /// The program's places (none for an approximate session), following the reply's pages
    /// (docs/protocol.md, "Places").
    public func places() async throws -> [Place] {
        var all: [Place] = []
        var offset = 0
        while true {
            let reply = try await request { .places(id: $0, offset: offset) }
            guard case .places(_, let page, let next) = reply else { throw LocationClientError.unexpectedReply(reply.line) }
            all += page
            guard let next, next > offset else { return all }
            offset = next
        }
    }

    /// The program's recent visits, oldest first (none for an approximate session), following
    /// the reply's pages (docs/protocol.md, "Recent visits").
    public func recentVisits() async throws -> [Visit] {
        var all: [Visit] = []
        var offset = 0
        while true {
            let reply = try await request { .visits(id: $0, offset: offset) }
            guard case .visits(_, let page, let next) = reply else { throw LocationClientError.unexpectedReply(reply.line) }
            all += page
            guard let next, next > offset else { return all }
            offset = next
        }
    }

    /// Tells the daemon the program has its queued events up to `seq` (they are forgotten);
    /// returns how many remain queued.
    @discardableResult
    public func acknowledge(_ seq: UInt64) async throws -> Int {
        let reply = try await core.request { .ack(id: $0, seq: seq) }
        guard case .acked(_, _, let queued) = reply else { throw LocationClientError.unexpectedReply(reply.line) }
        return queued
    }

    /// Asks the daemon to re-read its configuration file (root and the daemon's user only);
    /// returns once the new configuration is in force. A refused file throws `ProtocolError`
    /// (`reloadRefused`, the file's error as its message).
    public func reload() async throws {
        let reply = try await core.request { .reload(id: $0) }
        guard case .reloaded = reply else { throw LocationClientError.unexpectedReply(reply.line) }
    }

    public func unsubscribe() async throws {
        let reply = try await core.request { .unsubscribe(id: $0) }
        guard case .unsubscribed = reply else { throw LocationClientError.unexpectedReply(reply.line) }
    }

    /// The daemon's status, with every page of `connections` (a reply holds as many as fit one
    /// line; docs/protocol.md, "Status reply"): the counts are the first page's.
    public func status() async throws -> StatusReply {
        var status = try await statusPage(from: 0)
        var offset = 0
        var next = status.next
        // Only forward, as in regions(): a reply whose `next` does not move on ends the paging
        // instead of asking for the same page forever.
        while let n = next, n > offset {
            offset = n
            let page = try await statusPage(from: n)
            status.connections = (status.connections ?? []) + (page.connections ?? [])
            next = page.next
        }
        status.next = nil
        return status
    }

    private func statusPage(from offset: Int) async throws -> StatusReply {
        let reply = try await core.request { .status(id: $0, offset: offset) }
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
///
/// Two locks, always taken in this order: `writing` (serialises writes, and closing the
/// descriptor: no write can then hit a descriptor number reused by someone else), then `state`.
/// `state` is never held while blocking, so a write waiting on a daemon that does not read
/// cannot stall the reader thread or the timeouts.
final class Core: Sendable {
    /// A call waiting for its reply.
    struct Pending {
        /// What it asked, for errors: `status (id 3)`.
        var name: String
        var continuation: CheckedContinuation<ServerMessage, any Error>
        /// Fails it after the timeout; cancelled when the reply comes.
        var timer: Task<Void, Never>
    }

    struct State {
        var closed = false
        var fdClosed = false
        var nextID = 1
        var waiters: [RequestID: Pending] = [:]
        var helloWaiter: Pending?
        /// Requests that timed out: their late replies are dropped, not put on `messages`.
        var expired: Set<RequestID> = []
        /// The ids of `send`'s requests whose reply has not come, with how many: the client's
        /// own numbering skips them, so that each reply reaches whoever asked.
        var sent: [RequestID: Int] = [:]
        /// The ids of the client's own calls from the moment each is picked until its reply,
        /// failure or timeout: `send` may not take one even before the call waits for it.
        var own: Set<RequestID> = []
    }

    let fd: Int32
    let continuation: AsyncThrowingStream<ServerMessage, any Error>.Continuation
    let timeout: Duration
    let state = Mutex(State())
    private let writing = Mutex(())

    init(fd: Int32, continuation: AsyncThrowingStream<ServerMessage, any Error>.Continuation, timeout: Duration) {
        self.fd = fd
        self.continuation = continuation
        self.timeout = timeout
    }

    /// `status (id 3)`: the request's type from its encoded line (`{"type":"status",…`).
    static func name(of line: [UInt8], id: RequestID?) -> String {
        let prefix = Array(#"{"type":""#.utf8)
        var type = "request"
        if line.starts(with: prefix), let end = line[prefix.count...].firstIndex(of: 0x22) {
            type = String(decoding: line[prefix.count..<end], as: UTF8.self)
        }
        return id.map { "\(type) (id \($0))" } ?? type
    }

    /// A task failing the waiter for `id` (nil: the hello) once the timeout has passed.
    func timer(for id: RequestID?) -> Task<Void, Never> {
        let timeout = self.timeout
        return Task { [weak self] in
            do { try await Task.sleep(for: timeout) } catch { return }  // cancelled: the reply came
            self?.expire(id)
        }
    }

    private func expire(_ id: RequestID?) {
        let pending: Pending? = state.withLock { s in
            guard let id else { defer { s.helloWaiter = nil }; return s.helloWaiter }
            guard let p = s.waiters.removeValue(forKey: id) else { return nil }
            s.own.remove(id)
            if s.expired.count >= 1024, let any = s.expired.first { s.expired.remove(any) }
            s.expired.insert(id)
            return p
        }
        guard let pending else { return }
        pending.continuation.resume(throwing: LocationClientError.timedOut(request: pending.name, timeout: timeout))
    }

    /// Fails the wait for the hello with `error` if it still waits (`connect` was cancelled).
    func failHello(with error: any Error) {
        let pending = state.withLock { s in
            defer { s.helloWaiter = nil }
            return s.helloWaiter
        }
        pending?.timer.cancel()
        pending?.continuation.resume(throwing: error)
    }

    /// Fails `id`'s call with `error` if it still waits. `expecting`: the request went out, so
    /// its reply may still come; it is dropped then, not put on `messages` (a cancelled call).
    private func fail(_ id: RequestID, with error: any Error, expecting reply: Bool = false) {
        let pending = state.withLock { s in
            let p = s.waiters.removeValue(forKey: id)
            s.own.remove(id)
            if reply, p != nil {
                if s.expired.count >= 1024, let any = s.expired.first { s.expired.remove(any) }
                s.expired.insert(id)
            }
            return p
        }
        pending?.timer.cancel()
        pending?.continuation.resume(throwing: error)
    }

    /// Marks `id` as one of `send`'s, unless one of the client's own requests without a reply
    /// has it. An id the daemon will not echo (a number that is not finite, sent as null; a
    /// string longer than `maxIDBytes`, refused without it) is not marked: no reply would clear
    /// it. Each mark is cleared by its reply (the daemon answers every request that has an id,
    /// or closes the connection), or by `unreserve` when the request could not be written.
    func reserve(_ id: RequestID) throws {
        switch id {
        case .number(let n) where !n.isFinite: return
        case .string(let text) where text.utf8.count > maxIDBytes: return
        default: break
        }
        let taken = state.withLock { s in
            if s.own.contains(id) || s.expired.contains(id) { return true }  // (own holds every waiter's id)
            s.sent[id, default: 0] += 1
            return false
        }
        if taken { throw LocationClientError.idInUse(id) }
    }

    /// Takes back a mark of `reserve` for a request that was not sent.
    func unreserve(_ id: RequestID) {
        state.withLock { s in
            guard let n = s.sent[id] else { return }
            s.sent[id] = n > 1 ? n - 1 : nil
        }
    }

    /// Writes all of `bytes`. A write still blocked after the timeout (the daemon does not read)
    /// closes the connection: part of a line may have gone out, so nothing after it would parse.
    func write(_ bytes: [UInt8], name: String) throws {
        try writing.withLock { _ throws in
            guard !state.withLock({ $0.closed }) else { throw LocationClientError.closed }
            var offset = 0
            while offset < bytes.count {
                let n = bytes.withUnsafeBytes { raw in
                    Glibc.send(fd, raw.baseAddress! + offset, raw.count - offset, Int32(MSG_NOSIGNAL))
                }
                if n < 0 {
                    let e = errno
                    if e == EINTR { continue }
                    if e == EAGAIN || e == EWOULDBLOCK {
                        _ = Glibc.shutdown(fd, Int32(SHUT_RDWR))  // the reader then fails every pending call
                        throw LocationClientError.timedOut(request: "sending \(name)", timeout: timeout)
                    }
                    // The daemon closed the connection (the reader fails the pending calls).
                    if e == EPIPE || e == ECONNRESET { throw LocationClientError.closed }
                    throw LocationClientError.system("send", errno: e)
                }
                offset += n
            }
        }
    }

    func request(_ make: (RequestID) -> Request) async throws -> ServerMessage {
        let id: RequestID = state.withLock { s in
            var id: RequestID
            repeat {
                id = .number(Double(s.nextID))
                s.nextID += 1
            } while s.sent[id] != nil
            s.own.insert(id)  // in the same lock: a send() of this id from now on is idInUse
            return id
        }
        var out: [UInt8] = []
        make(id).append(to: &out)
        let name = Self.name(of: out, id: id)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { waiter in
                let refusal: (any Error)? = state.withLock { s in
                    if s.closed { s.own.remove(id); return LocationClientError.closed }
                    if Task.isCancelled { s.own.remove(id); return CancellationError() }
                    s.waiters[id] = Pending(name: name, continuation: waiter, timer: timer(for: id))
                    return nil
                }
                if let refusal { waiter.resume(throwing: refusal); return }
                do {
                    try write(out, name: name)
                } catch {
                    fail(id, with: error)
                }
            }
        } onCancel: {
            fail(id, with: CancellationError(), expecting: true)
        }
    }

    /// Wakes the reader (which closes the descriptor on its way out); calls from now on throw
    /// `closed`.
    func shutdown() {
        state.withLock { s in
            s.closed = true
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
                // The daemon closed with input of ours unread (after a flood, say): the end of
                // the stream, as a close is, not a failure of the client's own reading.
                if errno == ECONNRESET { break }
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
                    if error.isUnknownType { continue }  // a newer daemon's message, not for this client
                    // A known type this version cannot read (a newer value in it): it fails the
                    // request it answers, if any, and is skipped like an unknown type. Only a
                    // line that is no message at all, or a hello, ends the connection.
                    guard let type = error.type, type != "hello" else {
                        failure = error
                        break reading
                    }
                    if let id = error.replyID { unreadable(id, error) }
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

    /// A reply this version cannot read: its request fails with why; a `send`'s caller, who
    /// reads its replies on `messages`, gets an `unrecognized` error with the request's id there.
    private func unreadable(_ id: RequestID, _ error: ServerMessage.DecodingError) {
        enum Route { case waiter(Pending), stream, none }
        let route: Route = state.withLock { s in
            if let w = s.waiters.removeValue(forKey: id) { s.own.remove(id); return .waiter(w) }
            if let n = s.sent[id] {
                s.sent[id] = n > 1 ? n - 1 : nil
                return .stream
            }
            s.expired.remove(id)
            return .none
        }
        switch route {
        case .waiter(let w):
            w.timer.cancel()
            w.continuation.resume(throwing: error)
        case .stream:
            continuation.yield(.error(ProtocolError(.unrecognized, "\(error.type ?? "reply") this client cannot read: \(error.message)", id: id)))
        case .none:
            break
        }
    }

    private func route(_ message: ServerMessage) {
        let replyID: RequestID?
        switch message {
        case .hello(let h): replyID = h.id
        case .subscribed(let id, _), .unsubscribed(let id): replyID = id
        case .statusReply(let s): replyID = s.id
        case .error(let e): replyID = e.id
        case .regions(let id, _, _), .regionsChanged(let id, _, _, _), .places(let id, _, _), .visits(let id, _, _): replyID = id
        case .session(let info): replyID = info.id
        case .acked(let id, _, _): replyID = id
        case .reloaded(let id): replyID = id
        case .location, .status, .visit, .significant, .paused, .resumed, .region, .queued, .overflow: replyID = nil
        }
        enum Route { case waiter(Pending), late, stream }
        let route: Route = state.withLock { s in
            if let w = s.helloWaiter, case .hello = message {
                s.helloWaiter = nil
                return .waiter(w)
            }
            // An error instead of the hello (tooManyConnections): connect throws it.
            if let w = s.helloWaiter, case .error(let e) = message, e.id == nil {
                s.helloWaiter = nil
                return .waiter(w)
            }
            guard let replyID else { return .stream }
            if let w = s.waiters.removeValue(forKey: replyID) { s.own.remove(replyID); return .waiter(w) }
            if let n = s.sent[replyID] {
                s.sent[replyID] = n > 1 ? n - 1 : nil
                return .stream
            }
            return s.expired.remove(replyID) != nil ? .late : .stream
        }
        switch route {
        case .stream:
            continuation.yield(message)
        case .late:
            break  // its caller already got `timedOut`
        case .waiter(let w):
            w.timer.cancel()
            if case .error(let e) = message { w.continuation.resume(throwing: e) } else { w.continuation.resume(returning: message) }
        }
    }

    /// The reader's end: fail every pending call, finish `messages`, close the descriptor.
    private func finish(error: (any Error)?) {
        let waiters = state.withLock { s in
            s.closed = true
            // A writer blocked in send wakes up (EPIPE) and lets go of `writing`.
            if !s.fdClosed { _ = Glibc.shutdown(fd, Int32(SHUT_RDWR)) }
            var all = Array(s.waiters.values)
            s.waiters.removeAll()
            s.own.removeAll()
            if let h = s.helloWaiter { all.append(h); s.helloWaiter = nil }
            return all
        }
        writing.withLock { _ in
            state.withLock { s in
                if !s.fdClosed { Glibc.close(fd); s.fdClosed = true }
            }
        }
        for w in waiters {
            w.timer.cancel()
            w.continuation.resume(throwing: error ?? LocationClientError.closedBeforeReply(request: w.name))
        }
        continuation.finish(throwing: error)
    }
}
