import Foundation
import LocationCore
import NIOCore
import NIOPosix
import Synchronization
import Testing
@testable import LocationDaemon

/// The replay source's backpressure (docs/benchmarks.md, "Overload"): it never has more than
/// `ReplaySource.window` inputs queued on its consumer loop, however slow the loop is, and
/// still delivers every input in order.
@Suite(.timeLimit(.minutes(5))) struct ReplaySourceTests {
    final class Counts: Sendable {
        struct Value { var submitted = 0; var handled = 0; var maxQueued = 0; var times: [Timestamp] = [] }
        let value = Mutex(Value())
    }

    @Test func atMostAWindowOfInputsIsQueuedOnTheConsumer() async throws {
        let log = DaemonEndToEndTests.walk(count: 600, startSecond: 0)
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("replay-window-\(UUID().uuidString.prefix(8)).nmea")
        try Data(log.bytes).write(to: path)
        defer { try? FileManager.default.removeItem(at: path) }

        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let counts = Counts()
        let source = ReplaySource(path: path.path, speed: 0, loop: false, consumer: loop) { input in
            counts.value.withLock { $0.submitted += 1; $0.maxQueued = max($0.maxQueued, $0.submitted - $0.handled) }
            loop.execute {
                usleep(200)  // a hub slower than the replay (the workload, not a wait for anything)
                counts.value.withLock {
                    $0.handled += 1
                    if case .fix(let f) = input { $0.times.append(f.time) }
                }
            }
        }
        let (done, finished) = AsyncStream<Void>.makeStream()
        source.start { _ in finished.finish() }
        for await _ in done {}
        try await loop.submit {}.get()
        source.stop()
        let v = counts.value.withLock { $0 }
        #expect(v.handled == v.submitted)
        #expect(v.times == log.fixes.map(\.time))
        #expect(v.maxQueued <= ReplaySource.window, "queued \(v.maxQueued) inputs")
        #expect(v.maxQueued == ReplaySource.window, "the loop was meant to lag: queued only \(v.maxQueued)")
    }
}
