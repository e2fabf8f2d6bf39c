import LocationCore
import LocationDaemon
import NIOPosix
import Testing

/// The daemon says when the engine drops a fix as a clock glitch (docs/semantics.md, "Time"),
/// at the first and then at each doubling: a second receiver with another clock drops every
/// other report, and a notice for each would fill the journal.
@Suite struct ClockGlitchNoticeTests {
    @Test func droppedFixesAreNoticedAtDoublings() async throws {
        let log = CapturedLog()
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let hub = Hub(eventLoop: group.next(), sourceDescription: "test", logger: log.logger)
        let place = Coordinate(latitude: 52, longitude: 13)
        let start = CivilTime(year: 2026, month: 3, day: 10, hour: 10).timestamp
        // Each second, a report of the right time, then one an hour ahead: five glitches.
        for s in 0..<6 {
            hub.submit(.fix(Fix(time: start.adding(seconds: Double(s)), coordinate: place, mode: .threeD, horizontalAccuracy: 5)))
            if s < 5 {
                hub.submit(.fix(Fix(time: start.adding(seconds: Double(s) + 3600), coordinate: place, mode: .threeD, horizontalAccuracy: 5)))
            }
        }
        await hub.processed()
        try await group.shutdownGracefully()
        let notices = log.messages(.notice).filter { $0.hasPrefix("dropped ") }
        #expect(notices.map { $0.prefix(24) } == ["dropped a fix whose time", "dropped 2 fixes so far w", "dropped 4 fixes so far w"], "\(notices)")
    }
}
