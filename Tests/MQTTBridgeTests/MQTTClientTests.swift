import Foundation
import OwnTracks
import TestSupport
import Testing
@testable import locationd_mqtt

/// `MQTTClient` across a reconnect, against a real mosquitto reached through a `Relay` (which
/// loses, holds and cuts at the exact point each test needs), read by mosquitto_sub. The test
/// plays the bridge: it reads the client's events and handles each disconnect
/// (docs/mqtt.md, "Durability").
@Suite(.serialized, .timeLimit(.minutes(2))) struct MQTTClientTests {
    static let topic = "test/client"

    /// The client's events in order, with the PUBACKs seen so far.
    struct Events {
        let client: MQTTClient
        var iterator: AsyncStream<MQTTEvent>.Iterator
        var acknowledged: Set<Int32> = []
        /// Whether each `.disconnected` is handled as it is read (as the bridge does when it is
        /// not late).
        var handlesDisconnects: Bool

        init(_ client: MQTTClient, handlesDisconnects: Bool) {
            self.client = client
            iterator = client.events.makeAsyncIterator()
            self.handlesDisconnects = handlesDisconnects
        }

        /// Reads events up to the first that `match` takes.
        mutating func until(_ what: String, _ match: (MQTTEvent) -> Bool) async throws {
            while let event = await iterator.next() {
                if case .published(let mid) = event { acknowledged.insert(mid) }
                if case .disconnected = event, handlesDisconnects { client.disconnectHandled() }
                if match(event) { return }
            }
            throw TestFailure(description: "the client's events ended before \(what)")
        }

        mutating func connected() async throws {
            try await until("CONNACK") { if case .connected(code: 0) = $0 { true } else { false } }
        }

        mutating func puback(_ mid: Int32) async throws {
            if acknowledged.contains(mid) { return }
            try await until("the PUBACK of \(mid)") { if case .published(mid) = $0 { true } else { false } }
        }
    }

    static func client(port: UInt16, id: String) throws -> MQTTClient {
        try MQTTClient(.init(clientID: id, host: "127.0.0.1", port: Int(port), keepalive: 60, username: nil, password: nil,
                             caFile: nil, certFile: nil, keyFile: nil,
                             will: OutgoingMessage(topic: "test/will", payload: Array("{}".utf8), retain: false)))
    }

    static func message(_ seq: Int) -> OutgoingMessage {
        OutgoingMessage(topic: topic, payload: Array(payload(seq).utf8), retain: false)
    }

    static func payload(_ seq: Int) -> String { "{\"_seq\":\(seq)}" }

    /// What the subscriber got up to and with `seq` (the broker forwards in the order it
    /// received, so nothing sent before it can come after).
    static func received(by sub: Subscriber, through seq: Int) throws -> [String] {
        try waitUntil("\(payload(seq)) at the subscriber", detail: { sub.process.stdout }) {
            sub.messages.contains { $0.payload == payload(seq) }
        }
        let all = sub.messages.map(\.payload)
        return Array(all[...all.firstIndex(of: payload(seq))!])
    }

    /// The connection drops with message 1 in flight (lost on the way), and the bridge handles
    /// the disconnect late: the client has reconnected, the broker's CONNACK is on its way.
    /// libmosquitto sends 1 again only after that CONNACK, and a message handed to it now would
    /// go at once, ahead of 1: it is refused until the disconnect is handled.
    @Test(.enabled(if: have("mosquitto", "mosquitto_sub"), "needs mosquitto and mosquitto_sub"))
    func aPublishBeforeTheDisconnectIsHandledIsRefused() async throws {
        let dir = try makeDirectory("mq-client")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let broker = try Broker(directory: dir)
        defer { broker.kill() }
        let sub = try Subscriber(broker: broker, base: Self.topic, directory: dir)
        defer { sub.process.stop() }
        let relay = try Relay(upstream: broker.port)
        defer { relay.stop() }
        try relay.start()
        let client = try Self.client(port: relay.port, id: "test-late")
        defer { client.stop() }
        var events = Events(client, handlesDisconnects: false)
        try await events.connected()

        relay.dropping = true
        let first = try #require(try client.publish(Self.message(1)))
        #expect(await waitUntil { relay.dropped > 0 })
        relay.dropping = false
        relay.holding = true
        relay.cut()
        try await events.until("the disconnect") { if case .disconnected = $0 { true } else { false } }
        // Reconnected: CONNECT went through, the CONNACK is held.
        #expect(await waitUntil { relay.accepted == 2 && relay.held > 0 })

        var second = try client.publish(Self.message(2))
        #expect(second == nil, "refused while the disconnect is not handled")

        relay.release()
        try await events.connected()
        client.disconnectHandled()
        try await events.puback(first)
        if second == nil { second = try client.publish(Self.message(2)) }
        try await events.puback(try #require(second))
        #expect(try Self.received(by: sub, through: 2) == [Self.payload(1), Self.payload(2)])
    }

    /// A client started while the broker refuses connects once it listens; a message handed
    /// over while the connection is down (the disconnect handled, no connection yet) is taken:
    /// libmosquitto queues it and sends it after it connects, and it arrives once.
    @Test(.enabled(if: have("mosquitto", "mosquitto_sub"), "needs mosquitto and mosquitto_sub"))
    func aPublishWhileDownIsSentOnce() async throws {
        let dir = try makeDirectory("mq-client")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let broker = try Broker(directory: dir)
        defer { broker.kill() }
        let sub = try Subscriber(broker: broker, base: Self.topic, directory: dir)
        defer { sub.process.stop() }
        let relay = try Relay(upstream: broker.port)  // not listening yet: the connection is refused
        defer { relay.stop() }
        let client = try Self.client(port: relay.port, id: "test-down")
        defer { client.stop() }
        var events = Events(client, handlesDisconnects: true)
        try await events.until("the refused connection") { if case .disconnected = $0 { true } else { false } }

        // Not taken (refused or failed), the bridge would keep it and publish it after the reconnect.
        let first = try? client.publish(Self.message(1))
        #expect(first != nil, "taken while down: libmosquitto sends it after it connects")
        try relay.start()
        try await events.connected()
        if let first { try await events.puback(first) } else { _ = try client.publish(Self.message(1)) }
        try await events.puback(try #require(try client.publish(Self.message(2))))
        #expect(try Self.received(by: sub, through: 2) == [Self.payload(1), Self.payload(2)])
    }
}
