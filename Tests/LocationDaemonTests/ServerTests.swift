import Glibc
import LocationClient
import LocationCore
import LocationProtocol
import NIOCore
import TestSupport
import Testing
@testable import LocationDaemon

@Suite(.serialized, .timeLimit(.minutes(5))) struct ServerTests {
    @Test func helloSubscribeAndStatus() async throws {
        let h = try await ServerHarness.start()
        defer { h.stopIfRunning() }
        let client = try await LocationClient.connect(path: h.path)
        #expect(client.hello == ServerHello())
        var messages = client.messages.makeAsyncIterator()
        let options = SubscriptionOptions(distanceFilter: 10, desiredAccuracy: 50, minimumInterval: 1)
        try await client.startSession(.always)
        #expect(try await client.subscribe(options) == options)
        #expect(try await messages.expectNext() == .status(.disconnected, nil))
        h.hub.submit(.source(.connected))
        #expect(try await messages.expectNext() == .status(.connected, nil))
        let status = try await client.status()
        #expect(status.subscribers == 1)
        #expect(status.state == .connected)
        #expect(status.source == "test source")
        #expect(status.lastFix == nil)
        // A client hello is answered with the server hello, id echoed.
        try client.send(.hello(id: .string("hi")))
        #expect(try await messages.expectNext() == .hello(ServerHello(id: .string("hi"))))
        client.close()
        await h.stop()
    }

    @Test func fixesArriveInOrder() async throws {
        let h = try await ServerHarness.start()
        defer { h.stopIfRunning() }
        let client = try await LocationClient.connect(path: h.path)
        var messages = client.messages.makeAsyncIterator()
        try await client.startSession(.always)
        try await client.subscribe()
        #expect(try await messages.expectNext() == .status(.disconnected, nil))
        for i in 0..<200 { h.hub.submit(.fix(testFix(i))) }
        #expect(try await messages.expectNext() == .status(.fix, testFix(0).time))
        for i in 0..<200 {
            guard case .location(let fix, let skipped) = try await messages.expectNext() else {
                Issue.record("expected a location"); break
            }
            #expect(skipped == 0)
            #expect(fix.time == testFix(i).time)
            #expect(abs(fix.coordinate.latitude - testFix(i).coordinate.latitude) < 1e-9)
            #expect(fix.coordinate.longitude == 8.5)
            #expect(fix.altitudeMSL == 100)
            #expect(fix.horizontalAccuracy == 5)
        }
        let status = try await client.status()
        #expect(status.lastFix == testFix(199).time)
        client.close()
        await h.stop()
    }

    @Test func distanceFilterApplied() async throws {
        let h = try await ServerHarness.start()
        defer { h.stopIfRunning() }
        let client = try await LocationClient.connect(path: h.path)
        var messages = client.messages.makeAsyncIterator()
        let options = SubscriptionOptions(distanceFilter: 100)
        try await client.startSession(.always)
        try await client.subscribe(options)
        _ = try await messages.expectNext()  // status
        // Steps of ~30 m; the reference engine says which fixes pass.
        let fixes = (0..<40).map { testFix($0, latitude: 50 + Double($0) * 0.00027) }
        var reference = Engine()
        _ = reference.handle(.subscribe(SubscriberID(1), options))
        var expected: [Fix] = []
        for f in fixes {
            for d in reference.handle(.fix(f)) { if case .location(let x) = d.event { expected.append(x) } }
        }
        #expect(expected.count > 5 && expected.count < 20)
        for f in fixes { h.hub.submit(.fix(f)) }
        h.hub.submit(.source(.disconnected))  // a marker after the last fix
        var delivered: [Fix] = []
        loop: while true {
            switch try await messages.expectNext() {
            case .location(let f, _): delivered.append(f)
            case .status(.disconnected, _): break loop
            default: continue
            }
        }
        #expect(delivered.map(\.time) == expected.map(\.time))
        client.close()
        await h.stop()
    }

    @Test(arguments: [
        ("{\"type\":\"status\",\"id\":1", ErrorCode.badJSON, nil as RequestID?),
        ("[1,2,3]", .notAnObject, nil),
        ("{\"type\":\"launch\",\"id\":2}", .unknownType, .number(2)),
        ("{\"id\":\"three\"}", .missingField, .string("three")),
        ("{\"type\":\"subscribe\",\"distanceFilter\":\"far\",\"id\":4}", .badField, .number(4)),
        ("{\"type\":true,\"id\":5}", .badField, .number(5)),
        ("{\"type\":\"subscribe\",\"distanceFilter\":-3,\"id\":6}", .outOfRange, .number(6)),
        ("{\"type\":\"subscribe\",\"minimumInterval\":100000,\"id\":\"seven\"}", .outOfRange, .string("seven")),
    ])
    func malformedRequestsGetErrorsAndConnectionStays(line: String, code: ErrorCode, id: RequestID?) async throws {
        let h = try await ServerHarness.start()
        defer { h.stopIfRunning() }
        let client = try await LocationClient.connect(path: h.path)
        var messages = client.messages.makeAsyncIterator()
        try client.sendRaw(line + "\n")
        guard case .error(let e) = try await messages.expectNext() else {
            Issue.record("expected an error"); return
        }
        #expect(e.code == code)
        #expect(e.id == id)
        #expect(!e.message.isEmpty)
        // Still usable.
        #expect(try await client.status().subscribers == 0)
        try await client.startSession(.always)
        try await client.subscribe()
        #expect(try await messages.expectNext() == .status(.disconnected, nil))
        client.close()
        await h.stop()
    }

    @Test func outOfRangeMessageNamesFieldValueAndRange() async throws {
        let h = try await ServerHarness.start()
        defer { h.stopIfRunning() }
        let client = try await LocationClient.connect(path: h.path)
        try await client.startSession(.always)
        await #expect(throws: ProtocolError(.outOfRange, "distanceFilter -3 is out of range; expected 0…1000000 metres", id: .number(2))) {
            try await client.subscribe(SubscriptionOptions(distanceFilter: -3))
        }
        client.close()
        await h.stop()
    }

    @Test func lineTooLongClosesTheConnection() async throws {
        let h = try await ServerHarness.start()
        defer { h.stopIfRunning() }
        let raw = RawSocket(path: h.path)
        #expect(raw.readLine()?.contains("\"hello\"") == true)
        raw.send(String(repeating: "x", count: 70_000) + "\n{\"type\":\"status\"}\n")
        let line = raw.readLine() ?? ""
        guard case .error(let e) = try ServerMessage.decode(line) else { Issue.record("expected an error"); return }
        #expect(e.code == .lineTooLong)
        #expect(raw.readLine() == nil)  // the status request was not answered …
        #expect(raw.readToEnd() == .closed)  // … because the server closed (not the read timeout)
        await h.stop()
    }

    @Test func floodClosesTheConnection() async throws {
        // A frozen clock: the bucket never refills, so exactly `floodBurst` requests pass.
        let h = try await ServerHarness.start { config in
            config.floodBurst = 5
            let t = NIODeadline.now()
            config.clock = ShellClock { t }
        }
        defer { h.stopIfRunning() }
        let raw = RawSocket(path: h.path)
        _ = raw.readLine()
        raw.send(String(repeating: "{\"type\":\"status\"}\n", count: 8))
        for _ in 0..<5 {
            guard case .statusReply = try ServerMessage.decode(raw.readLine() ?? "") else { Issue.record("expected status"); return }
        }
        guard case .error(let e) = try ServerMessage.decode(raw.readLine() ?? "") else { Issue.record("expected an error"); return }
        #expect(e.code == .flood)
        #expect(raw.readToEnd() == .closed)
        await h.stop()
    }

    /// The loop stood still (a task that blocked it; a stopped process is the same) for 2 s while
    /// a peer sent requests: what piled up in the socket comes out together when the loop runs
    /// again. With a burst of 20 and 100 a second, 150 is within what the limit allows for those
    /// 2 s (20 + ≈ 190) and is answered, more than a burst beyond the burst (the stall's tokens
    /// are not cut to it by the next refill); 1,000 is a flood all the same.
    @Test(arguments: [(150, false), (1000, true)])
    func requestsThatPiledUpWhileTheLoopStoodStillAreNotAFlood(sent: Int, flood expected: Bool) async throws {
        let h = try await ServerHarness.start { $0.stallBeat = .milliseconds(100); $0.floodBurst = 20 }
        defer { h.stopIfRunning() }
        let peer = RawSocket(path: h.path)
        #expect(peer.readLine()?.contains(#""type":"hello""#) == true)
        let stalled = Flag()
        h.hub.eventLoop.execute {
            stalled.set()
            var stall = timespec(tv_sec: 2, tv_nsec: 0)  // the fault itself: the loop does not run
            nanosleep(&stall, nil)
        }
        while !stalled.isSet {}
        // Short replies: all of them fit the socket, so no reply waits to be read (which would
        // make the rest requests held back by a pause, answered at the limit's rate).
        peer.send(String(repeating: #"{"type":"hello"}"# + "\n", count: sent))
        var answered = 0, flood = false
        while answered < sent, let line = peer.readLine() {
            if line.contains(#""code":"flood""#) { flood = true; break }
            if line.hasPrefix(#"{"type":"hello""#) { answered += 1 }
        }
        #expect(flood == expected)
        if !expected { #expect(answered == sent) } else { #expect(answered < sent) }
        await h.stop()
    }

    /// A peer that sends requests and never reads its replies: the daemon stops answering (and
    /// reading) at the write watermark instead of queueing every reply, and once the peer reads,
    /// every request is answered, in order.
    @Test func requestsOfAPeerThatDoesNotReadWaitInsteadOfQueueingReplies() async throws {
        let h = try await ServerHarness.start { $0.floodBurst = 100_000; $0.floodRate = 100_000 }
        defer { h.stopIfRunning() }
        let peer = RawSocket(path: h.path)
        let count = 3000
        // ≈ 90 KB of requests, ≈ 1 MB of replies: more than the socket and the watermark hold.
        peer.send((0..<count).map { #"{"type":"status","id":\#($0)}"# + "\n" }.joined())
        var stats = try await h.server.connectionStats()
        let deadline = ContinuousClock.now + .seconds(20)
        while stats.first?.isWritable != false && ContinuousClock.now < deadline {
            stats = try await h.server.connectionStats()
        }
        #expect(stats.first?.isWritable == false, "the replies should have filled the socket")
        for _ in 0..<20 {  // however often the loop runs meanwhile
            stats = try await h.server.connectionStats()
            #expect((stats.first?.bufferedBytes ?? 0) <= h.server.configuration.writeBufferHighWatermark + 4096)
        }
        #expect(peer.readLine()?.contains(#""type":"hello""#) == true)
        var answered = 0
        while answered < count, let line = peer.readLine() {
            guard line.contains(#""type":"status""#) else { continue }
            #expect(line.contains(#""id":\#(answered),"#), "reply \(answered) out of order: \(line.prefix(60))")
            answered += 1
        }
        #expect(answered == count)
        await h.stop()
    }

    /// A peer within the flood limit (200 at once, then 100/s) that reads its replies late: the
    /// requests the daemon held back meanwhile are answered at the limit's rate when it reads,
    /// not taken for a flood because they come out of the socket together.
    @Test func requestsHeldBackByAPauseAreNotAFlood() async throws {
        let clock = AdvancingClock()
        // No stall watch: the clock's jump is no stall, and what is tested is the pause's own rule.
        let h = try await ServerHarness.start { $0.clock = clock.shellClock; $0.stallBeat = .hours(1) }
        defer { h.stopIfRunning() }
        let client = try await LocationClient.connect(path: h.path)
        try await client.startSession(.always)
        let metadata = "{\"note\":\"" + String(repeating: "x", count: 3000) + "\"}"
        let regions = (0..<20).map { Region(id: "r\($0)", center: Coordinate(latitude: 48.1, longitude: 11.5), radius: 100, metadata: metadata) }
        _ = try await client.request { .regionsAdd(id: $0, regions: regions) }
        client.close()
        let peer = RawSocket(path: h.path)
        peer.send(#"{"type":"session.start","authorization":"always"}"# + "\n")
        // ≈ 60 KB per reply: the socket and the watermark are full after a few.
        let list = (0..<200).map { #"{"type":"regions.list","id":\#($0)}"# + "\n" }.joined()
        peer.send(list)
        clock.advance(by: .milliseconds(1100))  // the scenario: 100 more requests within the rate
        peer.send((200..<300).map { #"{"type":"regions.list","id":\#($0)}"# + "\n" }.joined())
        var answered = 0, flood = false
        while answered < 300, let line = peer.readLine() {
            if line.contains(#""code":"flood""#) { flood = true; break }
            if line.hasPrefix(#"{"type":"regions""#) { answered += 1 }
        }
        #expect(!flood)
        #expect(answered == 300)
        await h.stop()
    }

    @Test func slowReaderDoesNotStallOthersAndStaysBounded() async throws {
        let h = try await ServerHarness.start()
        defer { h.stopIfRunning() }
        let slow = RawSocket(path: h.path)
        slow.send("{\"type\":\"session.start\"}\n{\"type\":\"subscribe\",\"id\":\"slow\"}\n")  // and never read (for now)
        let client = try await LocationClient.connect(path: h.path)
        try await client.startSession(.always)
        try await client.subscribe()
        // The slow client's requests are read on the server's own time: both subscribed before
        // the first fix.
        try #require(try await waitUntil(timeout: 20) { try await h.hub.snapshot().subscriberCount == 2 }, "the slow client never subscribed")
        let count = 20_000
        let last = testFix(count - 1).time
        let reader = Task {
            var received = 0
            var previous: Timestamp? = nil
            var ordered = true
            for try await m in client.messages {
                guard case .location(let f, _) = m else { continue }
                received += 1
                if let p = previous, f.time <= p { ordered = false }
                previous = f.time
                if f.time == last { break }
            }
            return (received, ordered)
        }
        for i in 0..<count {
            h.hub.submit(.fix(testFix(i)))
            if i % 500 == 499 { await h.hub.processed() }
        }
        await h.hub.processed()
        let (received, ordered) = try await reader.value
        #expect(ordered)
        #expect(received > 0)  // the reader got the newest fix: it was not stalled

        let stats = try await h.server.connectionStats()
        #expect(stats.count == 2)
        let slowStats = try #require(stats.first { !$0.isWritable || $0.skippedLocations > 0 })
        #expect(slowStats.skippedLocations > 0)
        #expect(slowStats.hasPendingLocation)
        // Bounded: NIO's queue stops growing at the high watermark (plus what one event adds).
        #expect(slowStats.bufferedBytes <= h.server.configuration.writeBufferHighWatermark + 1024)

        // Once the slow reader reads, it gets the newest fix, tagged with what it missed.
        var sawSkipped = 0
        var lastLine = ""
        while let line = slow.readLine() {
            if case .location(let f, let skipped) = try ServerMessage.decode(line) {
                sawSkipped += skipped
                lastLine = line
                if f.time == last { break }
            }
        }
        #expect(lastLine.contains("\"skipped\":\(slowStats.skippedLocations)"))
        #expect(sawSkipped == slowStats.skippedLocations)
        client.close()
        await h.stop()
    }

    /// docs/protocol.md, "Slow readers": a subscriber not writable for `unwritableTimeout` (30 s
    /// by default, 100 ms here) is closed, and the close unsubscribes it.
    @Test func connectionNotWritableForTooLongIsClosed() async throws {
        let h = try await ServerHarness.start { $0.unwritableTimeout = .milliseconds(100) }
        defer { h.stopIfRunning() }
        let slow = RawSocket(path: h.path)
        slow.send("{\"type\":\"session.start\",\"authorization\":\"always\"}\n{\"type\":\"subscribe\"}\n")  // and never read
        let watcher = try await LocationClient.connect(path: h.path)
        try #require(try await waitUntil(timeout: 20) { try await watcher.status().subscribers == 1 }, "the slow client never subscribed")
        for i in 0..<20_000 {
            h.hub.submit(.fix(testFix(i)))
            if i % 1000 == 999 { await h.hub.processed() }
        }
        await h.hub.processed()
        // The server closes it by itself: the slow client has not read (reading would make it
        // writable again), so only the unwritable timeout can have closed it.
        let closeDeadline = ContinuousClock.now + .seconds(20)
        while try await h.server.connectionStats().count > 1 && ContinuousClock.now < closeDeadline {}
        #expect(try await h.server.connectionStats().count == 1, "the unwritable connection was not closed")
        // The close unsubscribed it.
        #expect(try await watcher.status().subscribers == 0)
        // What it was sent, then the end of the stream (not the read timeout).
        #expect(slow.readToEnd() == .closed)
        watcher.close()
        await h.stop()
    }

    @Test func closingUnsubscribes() async throws {
        let h = try await ServerHarness.start()
        defer { h.stopIfRunning() }
        let a = try await LocationClient.connect(path: h.path)
        let b = try await LocationClient.connect(path: h.path)
        try await a.startSession(.always)
        try await a.subscribe()
        try await b.startSession(.always)
        try await b.subscribe()
        #expect(try await h.hub.snapshot().subscriberCount == 2)
        a.close()
        var n = 2
        for _ in 0..<100_000 where n != 1 {  // each status is a round trip through the loop
            n = try await b.status().subscribers
        }
        #expect(n == 1)
        b.close()
        await h.stop()
    }

    /// A peer that sends its requests and goes at once: the daemon's first flush fails, and NIO
    /// closes the connection from inside that write. The requests after it, and the rest of the
    /// `subscribe` that wrote, run after the close and must not keep a session and a
    /// subscription no close would release (300 such peers would hold 300 sessions, and the
    /// receiver for good).
    @Test func aPeerGoneMidRequestLeavesNoSessionOrSubscription() async throws {
        let h = try await ServerHarness.start()
        defer { h.stopIfRunning() }
        let burst = String(repeating: #"""
            {"type":"session.start","authorization":"always"}
            {"type":"subscribe","events":["location"]}
            {"type":"session.start","authorization":"always"}
            {"type":"subscribe"}
            {"type":"status"}

            """#, count: 3)
        try h.vanishingPeers(50, sending: burst)
        let watcher = try await LocationClient.connect(path: h.path)
        defer { watcher.close() }
        var status = try await watcher.status()
        let deadline = ContinuousClock.now + .seconds(20)
        while status.connected != 1 && ContinuousClock.now < deadline {  // each a round trip through the loop
            status = try await watcher.status()
        }
        try #require(status.connected == 1, "\(status)")
        #expect(status.sessions == 0 && status.subscribers == 0, "\(status)")
        #expect(try await h.hub.snapshot().subscriberCount == 0)
        await h.stop()
    }

    /// One user may hold `[socket] max_connections_per_user` connections: the next gets
    /// `tooManyConnections` instead of the hello and is closed, logged once, not per refusal; a
    /// closed one makes room. Root and the daemon's own user (the owner rule) are not counted
    /// against it. (A denied user held every descriptor the daemon had and locked everyone out.)
    @Test func oneUserCannotTakeEveryConnection() async throws {
        let log = CapturedLog()
        let h = try await ServerHarness.start(log: log) { $0.maxConnectionsPerUser = 3 }
        defer { h.stopIfRunning() }
        // The owner rule: this test runs as root, exempt.
        var owner: [LocationClient] = []
        for _ in 0..<5 { owner.append(try await LocationClient.connect(path: h.path)) }
        for c in owner { c.close() }

        var policy = Policy()
        policy.ownerRule = false
        policy.rules = [PolicyRule(name: "me", user: getuid(), authorization: .always, accuracy: .precise)]
        try await h.server.applyPolicy(policy)
        // The closes above may not have been handled yet: the first three that get in are the three.
        var open: [LocationClient] = []
        let deadline = ContinuousClock.now + .seconds(20)
        while open.count < 3 && ContinuousClock.now < deadline {
            if let c = try? await LocationClient.connect(path: h.path) { open.append(c) }
        }
        try #require(open.count == 3)
        for _ in 0..<3 {
            do {
                let extra = try await LocationClient.connect(path: h.path)
                extra.close()
                Issue.record("a fourth connection of the user was served")
            } catch let e as ProtocolError {
                #expect(e.code == .tooManyConnections)
                #expect(e.message == "uid \(getuid()) has 3 connections open, the most this daemon allows one user ([socket] max_connections_per_user = 3); close some")
            }
        }
        #expect(log.messages(.warning).filter { $0.hasPrefix("refusing connections of uid") }.count == 1, "\(log.messages(.warning))")
        // The others are served meanwhile.
        #expect(try await open[0].status().connected == 3)
        open.removeFirst().close()
        var again: LocationClient?
        while again == nil && ContinuousClock.now < deadline { again = try? await LocationClient.connect(path: h.path) }
        #expect(again != nil, "no room after a close")
        again?.close()
        for c in open { c.close() }
        await h.stop()
    }

    /// The warning about a user at `max_connections_per_user` is paced by the clock, not re-armed
    /// by a dip below the limit: a client closing and opening connections around the limit got
    /// one warning per dip. The next warning, a minute on, counts those refused meanwhile.
    @Test func crowdingIsWarnedAboutAtMostOnceAMinute() async throws {
        let log = CapturedLog()
        let clock = AdvancingClock()
        // No stall watch: the clock's jump is no stall.
        let h = try await ServerHarness.start(log: log) { $0.maxConnectionsPerUser = 1; $0.clock = clock.shellClock; $0.stallBeat = .hours(1) }
        defer { h.stopIfRunning() }
        var policy = Policy()
        policy.ownerRule = false
        policy.rules = [PolicyRule(name: "me", user: getuid(), authorization: .always, accuracy: .precise)]
        try await h.server.applyPolicy(policy)
        func warnings() -> [String] { log.messages(.warning).filter { $0.hasPrefix("refusing connections of uid") } }
        func refused() async throws -> Bool {
            do {
                let c = try await LocationClient.connect(path: h.path)
                c.close()
                return false
            } catch let e as ProtocolError {
                return e.code == .tooManyConnections
            }
        }
        /// A connection, once the close before it has been handled.
        func connectWhenRoom() async throws -> LocationClient {
            let deadline = ContinuousClock.now + .seconds(20)
            while ContinuousClock.now < deadline {
                if let c = try? await LocationClient.connect(path: h.path) { return c }
            }
            throw ProtocolError(.tooManyConnections, "no room after a close")
        }
        var open = try await connectWhenRoom()
        for _ in 0..<3 {
            #expect(try await refused())
            open.close()
            open = try await connectWhenRoom()  // below the limit, then at it again
        }
        #expect(warnings().count == 1, "\(warnings())")
        clock.advance(by: .seconds(61))
        #expect(try await refused())
        #expect(warnings().count == 2, "\(warnings())")
        // At least the two of the loop; tries while a close was not yet handled were refused too.
        let held = warnings().last?.split(separator: "; ").last?.split(separator: " ").first.flatMap { Int($0) }
        #expect((held ?? 0) >= 2, "\(warnings())")
        open.close()
        await h.stop()
    }

    /// Each user's warnings apart, one per interval, counting what was held back in between.
    @Test func pacedWarningsCountWhatTheyHeldBack() {
        var w = PacedWarnings(interval: .seconds(60))
        let t = NIODeadline.uptimeNanoseconds(1_000_000_000)
        #expect(w.due(1, at: t) == 0)
        #expect(w.due(1, at: t + .seconds(59)) == nil)
        #expect(w.due(2, at: t + .seconds(59)) == 0)
        #expect(w.due(1, at: t + .seconds(60)) == 1)
        #expect(w.due(1, at: t + .seconds(200)) == 0)
    }

    /// `[regions] max_registered_per_user` bounds what one user's programs register together:
    /// each executable is a program with its own limit, and copies of a binary are new programs.
    @Test func oneUsersProgramsShareARegionLimit() async throws {
        let h = try await ServerHarness.start { $0.maxRegionsPerUser = 3 }
        defer { h.stopIfRunning() }
        var policy = Policy()
        policy.ownerRule = false
        policy.rules = [PolicyRule(name: "me", user: getuid(), authorization: .always, accuracy: .precise)]
        try await h.server.applyPolicy(policy)
        let here = Coordinate(latitude: 52.5, longitude: 13.4)
        let mine = try await LocationClient.connect(path: h.path)
        defer { mine.close() }
        try await mine.startSession(.always)
        _ = try await mine.request { .regionsAdd(id: $0, regions: [Region(id: "a", center: here, radius: 50), Region(id: "b", center: here, radius: 50)]) }
        func ctlAdd(_ id: String) throws -> (status: Int32, out: String, err: String) {
            try LocationCtlReplayTests.run(["regions", "add", id, "--latitude", "52.5", "--longitude", "13.4", "--radius", "50", "--socket", h.path])
        }
        let other = try ctlAdd("c")  // another executable: another program of the same user
        #expect(other.status == 0 && other.out == "added 1; 1 registered\n", "\(other.err)")
        let over = try ctlAdd("d")
        #expect(over.status == 1)
        #expect(over.err.contains("tooManyRegions: uid \(getuid())'s programs have 3 regions registered; 1 more would exceed the most one user may register ([regions] max_registered_per_user = 3)"), "\(over.err)")
        await #expect(throws: ProtocolError.self) {
            _ = try await mine.request { .regionsAdd(id: $0, regions: [Region(id: "e", center: here, radius: 50)]) }
        }
        _ = try await mine.request { .regionsRemove(id: $0, ids: ["a"]) }
        #expect(try ctlAdd("d").status == 0)
        // Regions restored at start count too; uid 1 is not uid 10.
        let counts = try await h.hub.eventLoop.submit {
            try h.hub.restoreRegions([RegionRecord(region: Region(id: "x", center: here, radius: 50), state: .unknown)],
                                     for: ProgramID("uid=10 exe=/usr/bin/a"))
            return (h.hub.registeredRegions(ofUser: 10), h.hub.registeredRegions(ofUser: 1), h.hub.registeredRegions(ofUser: getuid()))
        }.get()
        #expect(counts == (1, 0, 3))
        await h.stop()
    }

    @Test func staleSocketIsReplacedButLiveOneIsNot() async throws {
        let h = try await ServerHarness.start()
        defer { h.stopIfRunning() }
        await #expect(throws: SocketServerError.pathInUse(h.path)) {
            _ = try await SocketServer.start(hub: h.hub, configuration: .init(path: h.path), logger: .init(label: "t"))
        }
        await h.stop()
    }

    @Test func peerCredentialsAreRecorded() async throws {
        let h = try await ServerHarness.start()
        defer { h.stopIfRunning() }
        let client = try await LocationClient.connect(path: h.path)
        _ = try await client.status()
        let stats = try await h.server.connectionStats()
        #expect(stats.first?.peer?.pid == getpid())
        #expect(stats.first?.peer?.uid == getuid())
        client.close()
        await h.stop()
    }
}

@Suite(.timeLimit(.minutes(5))) struct SocketPathTests {
    @Test func staleSocketFileIsRemovedAndDirectoryCreated() async throws {
        let h = try await ServerHarness.start()
        defer { h.stopIfRunning() }
        let path = h.path
        // Leave a stale socket file behind: bind a raw socket there, close it, keep the file.
        await h.server.close()
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in raw.copyBytes(from: bytes); raw[bytes.count] = 0 }
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        #expect(rc == 0)
        close(fd)
        #expect(access(path, F_OK) == 0)
        let server = try await SocketServer.start(hub: h.hub, configuration: .init(path: path), logger: .init(label: "t"))
        var st = stat()
        #expect(stat(path, &st) == 0)
        #expect(st.st_mode & 0o777 == 0o660)
        let client = try await LocationClient.connect(path: path)
        #expect(try await client.status().subscribers == 0)
        client.close()
        await server.close()
        await h.stop()
    }
    /// Missing parents are created 0755 (docs/protocol.md, "Transport"), whatever the umask:
    /// under 0077 (the unit's UMask=) they would be 0700, and the socket's group could not reach
    /// it.
    @Test func missingParentsAre0755UnderARestrictiveUmask() throws {
        let top = "/tmp/sockpath-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        defer { for dir in [top + "/a/b", top + "/a", top] { rmdir(dir) } }
        let old = umask(0o077)
        defer { umask(old) }
        try SocketServer.prepareSocketPath(top + "/a/b/locationd.sock")
        for dir in [top, top + "/a", top + "/a/b"] {
            var st = stat()
            try #require(stat(dir, &st) == 0)
            #expect(st.st_mode & 0o7777 == 0o755, "\(dir): \(String(st.st_mode & 0o7777, radix: 8))")
        }
    }
}
