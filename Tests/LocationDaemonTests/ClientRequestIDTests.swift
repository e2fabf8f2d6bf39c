import LocationClient
import LocationProtocol
import Testing

/// The ids of `send`'s requests and of the client's own calls never meet, so each reply
/// reaches whoever asked (docs/protocol.md, "Client library").
@Suite(.serialized, .timeLimit(.minutes(5))) struct ClientRequestIDTests {
    /// A program that sends a request with id 2 and then subscribes: numbered 2 too, the subscribe
    /// would take the other reply (`unexpectedReply`), and its own `subscribed` would go to
    /// `messages`.
    @Test func theClientNumbersItsOwnRequestsAroundSendsIDs() async throws {
        let daemon = try DaemonProcess(arguments: ["--gpsd", "127.0.0.1:1"])
        defer { daemon.stop() }
        let client = try await daemon.connect()
        defer { client.close() }
        try await client.startSession(.always)  // id 1
        try client.send(.unsubscribe(id: .number(2)))
        let options = try await client.subscribe()
        #expect(options.events == .location)
        var messages = client.messages.makeAsyncIterator()
        let first = try await messages.next()
        #expect(first == .unsubscribed(id: .number(2)), "\(String(describing: first))")
    }

    /// `send` with the id of one of the client's own requests still waiting is refused: its
    /// reply would have been taken for that request's.
    @Test func sendRefusesTheIDOfAPendingCall() async throws {
        let server = try FakeServer(.init())  // reads, never answers
        defer { server.stop() }
        let client = try await LocationClient.connect(path: server.path)
        let status = Task { try await client.status() }
        #expect(await server.waitForRequests(1))
        #expect(throws: LocationClientError.idInUse(.number(1))) { try client.send(.status(id: .number(1), offset: 0)) }
        try client.send(.status(id: .number(2), offset: 0))
        client.close()
        await #expect(throws: LocationClientError.closedBeforeReply(request: "status (id 1)")) { try await status.value }
    }

    /// `send` in the moment between the client picking an id for its own call and waiting for the
    /// reply (here: from the call's own request builder) is refused too: marked only once the call
    /// waits, the id would go out with both requests and one would take the other's reply.
    @Test func sendRefusesAnIDTheClientHasJustPicked() async throws {
        let server = try FakeServer(.init())  // reads, never answers
        defer { server.stop() }
        let client = try await LocationClient.connect(path: server.path)
        final class Outcome: @unchecked Sendable { var refused: RequestID?; var other: (any Error)?; var sent = false }
        let outcome = Outcome()
        let call = Task {
            try await client.request { id in
                do {
                    try client.send(.status(id: id, offset: 0))
                    outcome.sent = true
                } catch LocationClientError.idInUse(let taken) {
                    outcome.refused = taken
                } catch {
                    outcome.other = error
                }
                return .unsubscribe(id: id)
            }
        }
        #expect(await server.waitForRequests(1))
        client.close()
        _ = try? await call.value
        #expect(outcome.refused == .number(1) && !outcome.sent && outcome.other == nil)
    }
}
