import Glibc
import LocationClient
import LocationCore
import LocationProtocol
import Testing
@testable import LocationDaemon

@Suite(.serialized, .timeLimit(.minutes(5))) struct RegionServerTests {
    static let home = Coordinate(latitude: 50.0, longitude: 8.5)

    func fixAt(_ i: Int, northMetres: Double) -> Fix {
        Fix(time: Timestamp(seconds: 1_780_000_000 + Int64(i)),
            coordinate: Coordinate(latitude: Self.home.latitude + northMetres / 111_195.08, longitude: Self.home.longitude),
            mode: .threeD, horizontalAccuracy: 5)
    }

    @Test func addListRemoveAndEventsOverTheSocket() async throws {
        let h = try await ServerHarness.start()
        defer { h.stopIfRunning() }
        let client = try await LocationClient.connect(path: h.path)
        var messages = client.messages.makeAsyncIterator()
        try await client.startSession(.always)
        try await client.subscribe()
        #expect(try await messages.expectNext() == .status(.disconnected, nil))

        let added = try await client.request { .regionsAdd(id: $0, regions: [
            Region(id: "home", center: Self.home, radius: 100, notifyInitialState: true),
            Region(id: "far", center: Coordinate(latitude: 51, longitude: 8.5), radius: 100)]) }
        #expect(added == .regionsChanged(id: .number(3), added: 2, removed: 0, registered: 2))

        // All or nothing: one bad region (a duplicate id) and nothing of the request is applied.
        do {
            _ = try await client.request { .regionsAdd(id: $0, regions: [
                Region(id: "new", center: Self.home, radius: 100), Region(id: "home", center: Self.home, radius: 100)]) }
            Issue.record("duplicate accepted")
        } catch let e as ProtocolError {
            #expect(e.code == .duplicateRegion)
            #expect(e.message == "region home is already registered; remove it first (regions.remove) to change it, or give the new one another id")
        }
        do {
            _ = try await client.request { .regionsRemove(id: $0, ids: ["far", "nope"]) }
            Issue.record("unknown id removed")
        } catch let e as ProtocolError {
            #expect(e.code == .unknownRegion)
        }
        guard case .regions(_, let listed, _) = try await client.request({ .regionsList(id: $0) }) else { Issue.record("no list"); return }
        #expect(listed.map(\.region.id) == ["home", "far"])
        #expect(listed.map(\.state) == [.unknown, .unknown])

        // Outside, then walk in: initial state, then an enter (3 confirming fixes at 1 Hz).
        h.hub.submit(.fix(fixAt(0, northMetres: 400)))
        for i in 1...10 { h.hub.submit(.fix(fixAt(i, northMetres: 0))) }
        var regionEvents: [RegionEvent] = []
        while regionEvents.count < 2 {
            if case .region(let e) = try await messages.expectNext() { regionEvents.append(e) }
        }
        #expect(regionEvents.map(\.kind) == [.outside, .enter])
        #expect(regionEvents[1].time == fixAt(1, northMetres: 0).time)
        guard case .regions(_, let states, _) = try await client.request({ .regionsState(id: $0, ids: ["home"]) }) else { Issue.record("no state"); return }
        #expect(states.map(\.state) == [.inside])

        #expect(try await client.request { .regionsRemove(id: $0, ids: nil) } == .regionsChanged(id: .number(8), added: 0, removed: 2, registered: 0))
        client.close()
        await h.stop()
    }

    /// A subscription that becomes approximate (a session without the purpose that made it
    /// precise) gets no region events any more, though the program's regions stay monitored.
    @Test func aSubscriptionThatBecomesApproximateIsNoLongerSentRegionEvents() async throws {
        let h = try await ServerHarness.start()
        defer { h.stopIfRunning() }
        var policy = Policy()
        policy.ownerRule = false
        policy.rules = [PolicyRule(name: "nav", user: getuid(), authorization: .always, accuracy: .approximate, purposes: ["navigation"])]
        try await h.hub.eventLoop.submit { [policy] in h.hub.policy = policy }.get()
        let client = try await LocationClient.connect(path: h.path)
        var messages = client.messages.makeAsyncIterator()
        #expect(try await client.startSession(.always, purpose: "navigation").accuracy == .precise)
        _ = try await client.request { .regionsAdd(id: $0, regions: [Region(id: "home", center: Self.home, radius: 100, notifyInitialState: true)]) }
        try await client.subscribe(SubscriptionOptions(events: [.visits]))
        #expect(try await messages.expectNext() == .status(.disconnected, nil))
        h.hub.submit(.fix(fixAt(0, northMetres: 400)))
        var initial: RegionEvent?
        while initial == nil {
            if case .region(let e) = try await messages.expectNext() { initial = e }  // after the status change
        }
        #expect(initial?.kind == .outside)

        // The same program, precise no more: the subscription is re-opened approximate. Walking
        // in would be an `enter`; the source going away afterwards marks the end.
        #expect(try await client.startSession(.always).accuracy == .approximate)
        for i in 1...10 { h.hub.submit(.fix(fixAt(i, northMetres: 0))) }
        h.hub.submit(.source(.disconnected))
        var seen: [ServerMessage] = []
        while true {
            let m = try await messages.expectNext()
            if case .status(.disconnected, _) = m { break }
            seen.append(m)
        }
        #expect(!seen.contains { if case .region = $0 { true } else { false } }, "\(seen)")
        let records = try await h.hub.eventLoop.submit { h.hub.regionRecords(of: PeerIdentity.resolve(PeerCredentials(pid: getpid(), uid: getuid(), gid: getgid())).program) }.get()
        #expect(records.map(\.state) == [.inside], "monitored all along, only not sent")
        client.close()
        await h.stop()
    }

    @Test func regionsBelongToTheProgramNotTheConnection() async throws {
        let h = try await ServerHarness.start()
        defer { h.stopIfRunning() }
        let first = try await LocationClient.connect(path: h.path)
        try await first.startSession(.always)
        _ = try await first.request { .regionsAdd(id: $0, regions: [Region(id: "a", center: Self.home, radius: 100)]) }
        first.close()
        // Same process (same uid and executable): a new connection sees the same regions.
        let second = try await LocationClient.connect(path: h.path)
        try await second.startSession(.always)
        guard case .regions(_, let listed, _) = try await second.request({ .regionsList(id: $0) }) else { Issue.record("no list"); return }
        #expect(listed.map(\.region.id) == ["a"])
        second.close()
        await h.stop()
    }
}
