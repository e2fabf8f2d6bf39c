import Foundation
import LocationClient
import LocationProtocol
import TestSupport
import Testing

/// LocationClient against daemons other than its own version, and a caller that gives up
/// (docs/protocol.md, "Client library").
@Suite(.serialized, .timeLimit(.minutes(5))) struct ClientCompatibilityTests {
    /// An error code this client does not know (a newer daemon's) fails the request it
    /// answers, naming the code; the connection stays open.
    @Test func aNewerDaemonsUnknownErrorCodeFailsOnlyItsRequest() async throws {
        let server = try FakeServer(.init(reply: { index, _ in
            let id = index + 1
            return [index == 0
                ? #"{"type":"error","id":\#(id),"code":"quotaExceeded","message":"too many today"}"#
                : ServerMessage.unsubscribed(id: .number(Double(id))).line]
        }))
        defer { server.stop() }
        let client = try await LocationClient.connect(path: server.path, requestTimeout: .seconds(30))
        defer { client.close() }
        do {
            try await client.unsubscribe()
            Issue.record("an error reply was taken for success")
        } catch let error as ProtocolError {
            #expect(error == ProtocolError(.unrecognized, "quotaExceeded: too many today", id: .number(1)))
        }
        try await client.unsubscribe()  // still open
    }

    /// A message of a known type with a value this version cannot read (a newer daemon's
    /// `status` state): the reply fails only its request, the event is skipped, and the
    /// connection and `messages` go on. The first such line closed the client, losing every
    /// later event.
    @Test func aNewerValueInAKnownMessageFailsOnlyItsRequest() async throws {
        let server = try FakeServer(.init(reply: { index, _ in
            index == 0
                ? [#"{"type":"status","state":"degraded","time":null}"#,
                   #"{"type":"status","id":1,"state":"degraded","subscribers":1,"source":"gpsd","lastFix":null}"#]
                : [ServerMessage.status(.connected, nil).line, ServerMessage.unsubscribed(id: .number(2)).line]
        }))
        defer { server.stop() }
        let client = try await LocationClient.connect(path: server.path, requestTimeout: .seconds(30))
        defer { client.close() }
        do {
            _ = try await client.status()
            Issue.record("an unreadable reply was taken for one")
        } catch let error as ServerMessage.DecodingError {
            #expect(error.type == "status" && error.replyID == .number(1), "\(error)")
        }
        try await client.unsubscribe()  // still open
        var messages = client.messages.makeAsyncIterator()
        #expect(try await messages.next() == .status(.connected, nil))  // the unreadable event skipped
    }

    /// The same for a request made with `send`, whose replies its caller reads on `messages`:
    /// an `unrecognized` error with the request's id comes there (nothing came at all); and a
    /// queued event whose sequence number this version cannot read is skipped, not the end.
    @Test func anUnreadableReplyToASentRequestIsAnErrorOnMessages() async throws {
        let server = try FakeServer(.init(reply: { _, _ in
            [#"{"type":"status","id":"s","state":"degraded","subscribers":1,"source":"gpsd","lastFix":null}"#,
             #"{"type":"significant","time":"2026-03-10T10:00:00Z","latitude":1,"longitude":2,"mode":"2d","seq":"one"}"#,
             ServerMessage.status(.connected, nil).line]
        }))
        defer { server.stop() }
        let client = try await LocationClient.connect(path: server.path, requestTimeout: .seconds(30))
        defer { client.close() }
        try client.send(.status(id: .string("s")))
        var messages = client.messages.makeAsyncIterator()
        guard case .error(let e)? = try await messages.next() else { Issue.record("no error on messages"); return }
        #expect(e.code == .unrecognized && e.id == .string("s") && e.message.hasPrefix("status this client cannot read: "), "\(e)")
        #expect(try await messages.next() == .status(.connected, nil))
    }

    /// A daemon that closes with the client's requests unread (after a flood) resets the
    /// connection: the waiting call gets `closedBeforeReply` and `messages` finishes, as at a
    /// close. They got "read: Connection reset by peer", and `messages` threw it.
    @Test func aResetIsTheEndOfTheStream() async throws {
        let server = try FakeServer(.init(closesUnread: true))
        defer { server.stop() }
        let client = try await LocationClient.connect(path: server.path, requestTimeout: .seconds(30))
        defer { client.close() }
        do {
            _ = try await client.status()
            Issue.record("a reply came from nowhere")
        } catch let error as LocationClientError {
            guard case .closedBeforeReply = error else { Issue.record("\(error)"); return }
        }
        var messages = client.messages.makeAsyncIterator()
        #expect(try await messages.next() == nil)
    }

    /// A daemon announcing another protocol is refused at connect, naming both versions.
    @Test func aDaemonSpeakingAnotherProtocolIsRefusedAtConnect() async throws {
        let server = try FakeServer(.init(helloLine: ServerMessage.hello(ServerHello(protocolVersion: 2)).line))
        defer { server.stop() }
        do {
            _ = try await LocationClient.connect(path: server.path, requestTimeout: .seconds(30))
            Issue.record("connected to a protocol 2 daemon")
        } catch let error as LocationClientError {
            #expect(error == .unsupportedProtocol(2))
            #expect(error.description.contains("protocol 2; this client speaks protocol 1"), "\(error)")
        }
        #expect(await server.waitForClientsClosed(1), "the client kept its connection open")
    }

    /// A connect whose task is cancelled before it waits for the hello closes its socket too.
    @Test func aConnectCancelledBeforeItWaitsClosesItsSocket() async throws {
        let server = try FakeServer(.init(hello: false, reads: true))
        defer { server.stop() }
        func openDescriptors() -> Int { (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? -1 }
        let before = openDescriptors()
        for _ in 0..<5 {
            let connecting = Task {
                withUnsafeCurrentTask { $0?.cancel() }
                return try await LocationClient.connect(path: server.path, requestTimeout: .seconds(120))
            }
            await #expect(throws: CancellationError.self) { _ = try await connecting.value }
        }
        #expect(await server.waitForClientsClosed(5), "cancelled connects left their sockets open: \(server.clientsClosed) of 5 closed")
        // The fake server keeps its 5 accepted ends open; the clients' own must be closed (by
        // their reader threads, soon after).
        _ = await waitUntil { openDescriptors() <= before + 5 }
        #expect(openDescriptors() <= before + 5, "\(openDescriptors() - before) more descriptors open than before")
    }

    /// Cancelling a connect that waits for a silent daemon's hello ends it at once, long before
    /// its timeout, and closes the socket.
    @Test func cancellingAConnectEndsTheWaitForTheHello() async throws {
        let server = try FakeServer(.init(hello: false, reads: true))
        defer { server.stop() }
        let clock = ContinuousClock(), start = clock.now
        let connecting = Task { try await LocationClient.connect(path: server.path, requestTimeout: .seconds(120)) }
        #expect(await server.waitForConnections(1), "the client never connected")
        connecting.cancel()
        await #expect(throws: CancellationError.self) { _ = try await connecting.value }
        #expect(clock.now - start < .seconds(60), "the cancelled connect waited \(clock.now - start)")
        #expect(await server.waitForClientsClosed(1), "the client kept its connection open")
    }

    /// A status reply whose `next` does not move forward ends the paging (status() asked for the
    /// same page forever); the pages read are kept.
    @Test(.timeLimit(.minutes(1))) func statusPagingStopsWhenNextDoesNotMoveOn() async throws {
        let server = try FakeServer(.init(reply: { index, _ in
            let id = index + 1
            return [#"{"type":"status","id":\#(id),"state":"fix","subscribers":1,"source":"x","lastFix":null,"connected":2,"connectionsShown":"all","connections":[{"connection":\#(id),"self":false,"pid":1,"uid":0,"gid":0,"executable":"/x","rule":"r","session":null,"subscribed":false}],"next":1}"#]
        }))
        defer { server.stop() }
        let client = try await LocationClient.connect(path: server.path, requestTimeout: .seconds(30))
        defer { client.close() }
        let status = try await client.status()
        #expect(status.connections?.map(\.connection) == [1, 2] && status.next == nil, "\(status)")
    }
}
