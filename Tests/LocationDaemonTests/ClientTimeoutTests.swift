import Foundation
import LocationClient
import LocationProtocol
#if canImport(Glibc)
import Glibc
#endif
import TestSupport
import Testing

/// A real Unix-socket listener standing in for a daemon that misbehaves: it accepts, then
/// follows a script (greet or not, read or not, reply or not, close). One thread per
/// connection; `stop()` wakes and ends them all.
final class FakeServer: @unchecked Sendable {
    struct Script: Sendable {
        /// Send locationd's hello on accept.
        var hello = true
        /// The hello line to send instead of this version's.
        var helloLine: String? = nil
        /// Read requests at all (false: the client's writes eventually block).
        var reads = true
        /// Close as soon as a request arrives, without reading it: the kernel then resets the
        /// client's end (ECONNRESET), as at a daemon closing after a flood.
        var closesUnread = false
        /// The lines to send after the `index`-th request line; nil closes the connection.
        var reply: @Sendable (_ index: Int, _ line: String) -> [String]? = { _, _ in [] }
    }

    let directory: String
    var path: String { directory + "/s.sock" }
    private let listener: Int32
    private let script: Script
    private let lock = NSLock()
    private var connections: [Int32] = []
    /// Set when a client's end reached EOF (the client closed its socket).
    private var sawEOF = 0
    /// Request lines read, all connections.
    private var requestsRead = 0

    init(_ script: Script) throws {
        self.script = script
        directory = "/tmp/ldfake-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard listener >= 0, withSockaddr(directory + "/s.sock", { bind(listener, $0, $1) }) == 0, listen(listener, 16) == 0 else {
            throw DaemonProcess.Failure(description: "fake server: \(String(cString: strerror(errno)))")
        }
        Thread.detachNewThread { [self] in acceptLoop() }
    }

    var clientsClosed: Int { lock.withLock { sawEOF } }

    private func acceptLoop() {
        while true {
            let fd = accept(listener, nil, nil)
            guard fd >= 0 else { return }  // stop() shut the listener down
            lock.withLock { connections.append(fd) }
            Thread.detachNewThread { [self] in serve(fd) }
        }
    }

    private func send(_ fd: Int32, _ line: String) {
        let bytes = Array((line.hasSuffix("\n") ? line : line + "\n").utf8)
        _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    private func serve(_ fd: Int32) {
        if script.hello { send(fd, script.helloLine ?? ServerMessage.hello(ServerHello()).line) }
        if script.closesUnread {
            var ready = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            _ = poll(&ready, 1, 10_000)
            lock.withLock { connections.removeAll { $0 == fd } }  // stop() must not touch its number
            close(fd)
            return
        }
        var pending: [UInt8] = [], index = 0
        var chunk = [UInt8](repeating: 0, count: 4096)
        while script.reads {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 {
                if n == 0 { lock.withLock { sawEOF += 1 } }
                return
            }
            pending += chunk[0..<n]
            while let nl = pending.firstIndex(of: 0x0A) {
                let line = String(decoding: pending[..<nl], as: UTF8.self)
                pending.removeSubrange(...nl)
                guard let replies = script.reply(index, line) else {
                    shutdown(fd, Int32(SHUT_RDWR))
                    return
                }
                index += 1
                lock.withLock { requestsRead += 1 }
                for r in replies { send(fd, r) }
            }
        }
    }

    /// Waits (a deadline only against a hang) until `n` clients have closed their end.
    func waitForClientsClosed(_ n: Int, timeout: Double = 10) async -> Bool {
        await waitUntil(timeout: timeout) { clientsClosed >= n }
    }

    /// Waits (a deadline only against a hang) until `n` clients have connected.
    func waitForConnections(_ n: Int, timeout: Double = 10) async -> Bool {
        await waitUntil(timeout: timeout) { lock.withLock({ connections.count }) >= n }
    }

    /// Waits (a deadline only against a hang) until `n` request lines were read.
    func waitForRequests(_ n: Int, timeout: Double = 10) async -> Bool {
        await waitUntil(timeout: timeout) { lock.withLock({ requestsRead }) >= n }
    }

    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))  // wakes accept
        lock.withLock { for fd in connections { shutdown(fd, Int32(SHUT_RDWR)) } }
        close(listener)
        unlink(path)
        rmdir(directory)
    }
}

/// LocationClient never waits forever: a server that never answers, one that closes, one that
/// does not read (docs/protocol.md, "Client library").
@Suite(.serialized, .timeLimit(.minutes(5))) struct ClientTimeoutTests {
    static let short: Duration = .milliseconds(300)

    /// A listener that accepts and says nothing: `connect` fails after the timeout, naming the
    /// hello it waited for, and closes its socket.
    @Test func aSilentServerFailsTheConnectNamingTheHello() async throws {
        let server = try FakeServer(.init(hello: false, reads: true))
        defer { server.stop() }
        let clock = ContinuousClock(), start = clock.now
        do {
            _ = try await LocationClient.connect(path: server.path, requestTimeout: Self.short)
            Issue.record("connected without a hello")
        } catch let error as LocationClientError {
            #expect(error == .timedOut(request: "hello", timeout: Self.short))
            #expect(error.description.contains("no reply to hello from locationd within 0.3 seconds"), "\(error)")
            #expect(error.description.contains("requestTimeout"), "\(error)")
        }
        let took = clock.now - start
        #expect(took >= Self.short && took < .seconds(5), "took \(took)")
        #expect(await server.waitForClientsClosed(1), "the client kept its connection open")
    }

    /// Hello, then no reply to anything: each request fails after the timeout naming its type
    /// and id; the connection stays open, and a reply arriving late is dropped rather than
    /// surfacing on `messages`.
    @Test func anUnansweredRequestTimesOutNamingItAndALateReplyIsDropped() async throws {
        let server = try FakeServer(.init(reply: { index, line in
            switch index {
            case 0, 1: return []  // unsubscribe id 1, then id 2: silence
            default:
                // The probe: first the late reply to id 1, then the probe's own.
                return [ServerMessage.unsubscribed(id: .number(1)).line, ServerMessage.unsubscribed(id: .string("probe")).line]
            }
        }))
        defer { server.stop() }
        let client = try await LocationClient.connect(path: server.path, requestTimeout: Self.short)
        defer { client.close() }
        let clock = ContinuousClock(), start = clock.now
        for n in 1...2 {
            do {
                try await client.unsubscribe()
                Issue.record("a reply nobody sent")
            } catch let error as LocationClientError {
                #expect(error == .timedOut(request: "unsubscribe (id \(n))", timeout: Self.short))
            }
        }
        #expect(clock.now - start >= Self.short * 2)
        try client.send(.unsubscribe(id: .string("probe")))
        var messages = client.messages.makeAsyncIterator()
        let first = try await messages.next()
        #expect(first == .unsubscribed(id: .string("probe")), "\(String(describing: first))")
    }

    /// The server closes with requests pending: every one fails at once (not after the
    /// timeout) naming itself, `messages` finishes, later requests fail as closed.
    @Test func pendingRequestsFailWhenTheServerCloses() async throws {
        let server = try FakeServer(.init(reply: { index, _ in index < 1 ? [] : nil }))  // close on the 2nd request
        defer { server.stop() }
        let client = try await LocationClient.connect(path: server.path, requestTimeout: .seconds(30))
        defer { client.close() }
        let clock = ContinuousClock(), start = clock.now
        // Two requests in flight; the server closes when it has read both.
        let first = Task { try await client.unsubscribe() }, second = Task { try await client.unsubscribe() }
        var errors: [LocationClientError] = []
        for result in [await first.result, await second.result] {
            if case .failure(let e as LocationClientError) = result { errors.append(e) } else { Issue.record("\(result)") }
        }
        #expect(Set(errors) == [.closedBeforeReply(request: "unsubscribe (id 1)"), .closedBeforeReply(request: "unsubscribe (id 2)")])
        #expect(clock.now - start < .seconds(10), "pending requests waited for the timeout")
        #expect(errors.first?.description.contains("closed before the reply to unsubscribe") == true)
        var messages = client.messages.makeAsyncIterator()
        #expect(try await messages.next() == nil)
        do { try await client.unsubscribe(); Issue.record("a request on a closed connection") } catch let e as LocationClientError {
            #expect(e == .closed)
        }
    }

    /// A server that never reads: once the socket buffer is full a write blocks, and after the
    /// timeout it fails naming what was being sent; the connection is closed (part of a line may
    /// be out), so pending requests fail too.
    @Test func aServerThatDoesNotReadFailsTheWrite() async throws {
        let server = try FakeServer(.init(reads: false))
        defer { server.stop() }
        let client = try await LocationClient.connect(path: server.path, requestTimeout: Self.short)
        defer { client.close() }
        let clock = ContinuousClock(), start = clock.now
        let big = String(repeating: "x", count: 8 << 20)
        #expect(throws: LocationClientError.timedOut(request: "sending raw bytes", timeout: Self.short)) { try client.sendRaw(big) }
        #expect(clock.now - start < .seconds(5))
        var messages = client.messages.makeAsyncIterator()
        #expect(try await messages.next() == nil)
    }

    /// The result of an `unsubscribe` cancelled while it waits for its reply: once `server` has
    /// read the request, not before it is out.
    static func cancelledWhileWaiting(_ client: LocationClient, _ server: FakeServer) async -> Result<Void, any Error> {
        let waiting = Task { try await client.unsubscribe() }
        #expect(await server.waitForRequests(1))
        waiting.cancel()
        return await waiting.result
    }

    /// Cancelling the task that waits for a reply ends the wait with CancellationError.
    @Test func cancellingTheCallerEndsTheWait() async throws {
        let server = try FakeServer(.init())
        defer { server.stop() }
        let client = try await LocationClient.connect(path: server.path, requestTimeout: .seconds(30))
        defer { client.close() }
        let result = await Self.cancelledWhileWaiting(client, server)
        guard case .failure(let error) = result else { Issue.record("\(result)"); return }
        #expect(error is CancellationError, "\(error)")
    }

    /// The reply to a cancelled call, arriving after all, is dropped like a timed-out one's,
    /// not put on `messages`.
    @Test func aCancelledCallsLateReplyIsDropped() async throws {
        let server = try FakeServer(.init(reply: { index, _ in
            index == 0 ? [] : [ServerMessage.unsubscribed(id: .number(1)).line, ServerMessage.unsubscribed(id: .string("probe")).line]
        }))
        defer { server.stop() }
        let client = try await LocationClient.connect(path: server.path, requestTimeout: .seconds(30))
        defer { client.close() }
        _ = await Self.cancelledWhileWaiting(client, server)
        try client.send(.unsubscribe(id: .string("probe")))
        var messages = client.messages.makeAsyncIterator()
        let first = try await messages.next()
        #expect(first == .unsubscribed(id: .string("probe")), "\(String(describing: first))")
    }

    /// A message of a type this client does not know (a newer daemon's) is skipped: the reply
    /// after it still arrives and the connection stays open.
    @Test func aNewerDaemonsUnknownMessageIsSkipped() async throws {
        let server = try FakeServer(.init(reply: { index, _ in
            [#"{"type":"weather","id":9,"rain":true}"#, ServerMessage.unsubscribed(id: .number(Double(index + 1))).line]
        }))
        defer { server.stop() }
        let client = try await LocationClient.connect(path: server.path, requestTimeout: .seconds(30))
        defer { client.close() }
        try await client.unsubscribe()
        var unknown = ServerMessage.DecodingError(#"unknown message type weather"#, unknownType: true)
        unknown.type = "weather"
        #expect(throws: unknown) {
            try ServerMessage.decode(#"{"type":"weather"}"#)
        }
        try await client.unsubscribe()  // still open
    }

    /// After `close()` every call throws `closed` at once, not a socket error.
    @Test func callsAfterCloseThrowClosed() async throws {
        let server = try FakeServer(.init())
        defer { server.stop() }
        for _ in 0..<20 {
            let client = try await LocationClient.connect(path: server.path, requestTimeout: .seconds(30))
            client.close()
            do { _ = try await client.status(); Issue.record("a call on a closed client") } catch let e as LocationClientError {
                #expect(e == .closed)
            }
            #expect(throws: LocationClientError.closed) { try client.send(.unsubscribe(id: nil)) }
        }
    }
}
