import LocationCore
import LocationProtocol
import NIOCore
import NIOPosix
import Testing
@testable import LocationDaemon

/// The hub's fan-out reads each input's deliveries in place and shares one encoded line among
/// the subscribers of the same event: every subscriber must still get exactly the events the
/// engine decides for it, each with that event's own line, whatever its neighbours receive in
/// the same input.
@Suite("Hub fan-out: each subscriber its own events and their lines")
struct HubFanOutTests {
    /// Records what the hub hands it. Used on the hub's loop only, read once the loop is done.
    final class Probe: HubSubscriber, @unchecked Sendable {
        let program = ProgramID("probe")
        var received: [(event: Event, line: String)] = []
        func deliver(_ event: Event, encoded: ByteBuffer) { received.append((event, String(buffer: encoded))) }
    }

    func line(_ event: Event) -> String {
        var bytes: [UInt8] = []
        EventEncoder().append(event, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    @Test func subscribersWithOtherOptionsJoiningAndLeavingGetTheEnginesEvents() async throws {
        var approximate = SubscriptionOptions()
        approximate.accuracy = .approximate
        var pausing = SubscriptionOptions()
        pausing.pausesWhenStationary = true
        // Interleaved ids: neighbours in the fan-out get other events than each other.
        let plans: [(id: UInt64, options: SubscriptionOptions, joins: Int, leaves: Int?)] = [
            (1, SubscriptionOptions(), 0, nil),
            (2, SubscriptionOptions(distanceFilter: 100), 0, nil),  // its filter's state diverges
            (3, approximate, 0, 70),
            (4, SubscriptionOptions(), 0, 30),
            (5, pausing, 0, nil),
            (6, SubscriptionOptions(minimumInterval: 5), 25, nil),
            (7, SubscriptionOptions(), 50, nil),
        ]
        let start = CivilTime(year: 2026, month: 3, day: 10, hour: 10).timestamp
        // Moving east 20 m a second, still for three minutes, then moving again.
        var fixes: [Fix] = []
        var longitude = 13.0
        for s in 0..<260 {
            if s < 40 || s >= 220 { longitude += 20 / 67_000 }
            fixes.append(Fix(time: start.adding(seconds: Double(s)), coordinate: Coordinate(latitude: 52, longitude: longitude),
                             mode: .threeD, horizontalAccuracy: 5))
        }

        // The reference: the bare engine fed the same inputs.
        var engine = Engine()
        var expected: [UInt64: [Event]] = [:]
        func run(_ input: EngineInput) {
            for d in engine.handle(input) { expected[d.subscriber.rawValue, default: []].append(d.event) }
        }

        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let hub = Hub(eventLoop: group.next(), sourceDescription: "test")
        let probes = Dictionary(uniqueKeysWithValues: plans.map { ($0.id, Probe()) })
        for (k, fix) in fixes.enumerated() {
            for plan in plans where plan.joins == k {
                run(.subscribe(SubscriberID(plan.id), plan.options))
                let probe = probes[plan.id]!
                try await hub.eventLoop.submit {
                    hub.subscribe(SubscriberID(plan.id), options: plan.options, subscriber: probe)
                }.get()
            }
            for plan in plans where plan.leaves == k {
                run(.unsubscribe(SubscriberID(plan.id)))
                try await hub.eventLoop.submit { hub.unsubscribe(SubscriberID(plan.id)) }.get()
            }
            run(.fix(fix))
            hub.submit(.fix(fix))
        }
        await hub.processed()
        try await group.shutdownGracefully()

        var kinds: Set<String> = []
        for plan in plans {
            let received = probes[plan.id]!.received
            #expect(received.map(\.event) == expected[plan.id, default: []], "subscriber \(plan.id)")
            for (event, text) in received {
                #expect(text == line(event), "subscriber \(plan.id): \(text)")
                kinds.insert(String(text.prefix(24)))
            }
        }
        // The run is worth something only if the inputs mixed events: statuses, locations,
        // pauses and resumes, and the approximate ones.
        let paused = probes[5]!.received.contains { if case .paused = $0.event { true } else { false } }
        let resumed = probes[5]!.received.contains { if case .resumed = $0.event { true } else { false } }
        #expect(paused && resumed)
        #expect(probes[2]!.received.count < probes[1]!.received.count / 2)
        #expect(probes[6]!.received.count < probes[7]!.received.count)
        #expect(!probes[3]!.received.isEmpty && probes[3]!.received.count < probes[1]!.received.count / 10)
        #expect(kinds.count >= 3, "\(kinds)")
    }
}
