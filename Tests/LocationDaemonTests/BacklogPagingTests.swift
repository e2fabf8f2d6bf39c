import Foundation
import LocationCore
@testable import LocationDaemon
import LocationProtocol
import NIOCore
#if canImport(Glibc)
import Glibc
#endif
import Testing

/// An `always` program's backlog is written a page at a time as its connection drains
/// (docs/protocol.md, "Background delivery"): a connection that subscribes and does not read
/// holds no more than the slow-reader bound, whatever the program has queued, and one that
/// reads gets all of it, in order, then the events that came meanwhile.
@Suite(.serialized, .timeLimit(.minutes(2))) struct BacklogPagingTests {
    static let events = 5_000

    @Test func aSubscriberThatDoesNotReadHoldsOnlyTheBoundAndOneThatReadsGetsEverything() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("backlog-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let queue = try EventQueue(database: Database(path: dir.appendingPathComponent("q.db").path), limit: Self.events)
        let h = try await ServerHarness.start(queue: queue)
        defer { h.stopIfRunning() }
        let program = PeerIdentity.resolve(PeerCredentials(pid: getpid(), uid: getuid(), gid: getgid())).program
        try await h.hub.eventLoop.submit {
            try queue.database.transaction {
                try queue.append((1...Self.events).map { ProgramEvent(program: program, event: .region(EventQueueTests.event($0))) })
            }
        }.get()

        // Three connections of the program subscribe and read nothing past the reply.
        var idle: [RawSocket] = []
        for _ in 0..<3 {
            let s = RawSocket(path: h.path)
            s.send(#"{"type":"session.start","id":1,"authorization":"always"}"# + "\n" + #"{"type":"subscribe","id":2}"# + "\n")
            while let line = s.readLine(), !line.contains(#""type":"subscribed""#) {}
            idle.append(s)
        }
        // Written at once, each held ≈ 1 MB beyond what the kernel's socket buffer took.
        let buffered = try await h.hub.eventLoop.submit {
            h.server.registry.all.compactMap { try? $0.context?.channel.syncOptions?.getOption(ChannelOptions.bufferedWritableBytes) }
        }.get()
        #expect(buffered.count == 3)
        #expect(buffered.allSatisfy { $0 <= 128 * 1024 }, "bytes held per connection: \(buffered)")

        // An event that comes now waits behind the backlog.
        let later = RegionEvent(region: "later", kind: .enter, time: CivilTime(year: 2026, month: 6, day: 2, hour: 8).timestamp,
                                coordinate: Coordinate(latitude: 48.1, longitude: 11.5))
        try await h.hub.eventLoop.submit {
            for c in h.server.registry.all { c.deliver(.region(later), encoded: ByteBuffer(string: "{\"type\":\"region\",\"region\":\"later\"}\n")) }
        }.get()

        // One of them reads: every queued event once, in order, then the newer one.
        let reader = idle[0]
        var seqs: [UInt64] = []
        var after: String?
        while let line = reader.readLine() {
            if line.contains(#""region":"later""#) { after = line; break }
            guard line.contains(#""type":"region""#), let r = line.range(of: #""seq":"#) else { continue }
            seqs.append(UInt64(line[r.upperBound...].prefix { $0.isNumber }) ?? 0)
        }
        #expect(seqs == Array(1...UInt64(Self.events)))
        #expect(after != nil)
        idle.removeAll()
        await h.stop()
    }
}
