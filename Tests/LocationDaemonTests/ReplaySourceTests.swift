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
        // The loop's first input waits until a whole window is queued: the loop lags for sure
        // (with a slow loop alone, a replay thread descheduled at the wrong moment queued 7).
        let windowQueued = DispatchSemaphore(value: 0)
        let source = ReplaySource(path: path.path, speed: 0, loop: false, consumer: loop) { input in
            let submitted = counts.value.withLock {
                $0.submitted += 1
                $0.maxQueued = max($0.maxQueued, $0.submitted - $0.handled)
                return $0.submitted
            }
            if submitted == ReplaySource.window { windowQueued.signal() }
            loop.execute {
                if submitted == 1 { _ = windowQueued.wait(timeout: .now() + 20) }
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

    /// A GGA-only log (an echo sounder's, a receiver set to GGA alone) has positions and no
    /// date. Without one they are skipped (not reported as "no fix"), and the warning says how
    /// many and how to date them; with `date` they are fixes, the date
    /// advancing at midnight.
    @Test func undatedPositionsAreSkippedWithAWarningOrDatedByTheOption() async throws {
        func gga(_ hhmmss: String) -> String {
            let body = "GPGGA,\(hhmmss),5119.881,N,00125.169,E,1,08,1.0,10.0,M,47.0,M,,"
            let x = body.utf8.reduce(UInt8(0)) { $0 ^ $1 }
            let hex = Array("0123456789ABCDEF")
            return "$\(body)*\(hex[Int(x >> 4)])\(hex[Int(x & 15)])\r\n"
        }
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("replay-undated-\(UUID().uuidString.prefix(8)).nmea")
        try Data((gga("235958") + gga("235959") + gga("000000")).utf8).write(to: path)
        defer { try? FileManager.default.removeItem(at: path) }

        func replay(date: CivilTime?) async -> (inputs: [EngineInput], warnings: [String]) {
            let seen = Mutex<(inputs: [EngineInput], warnings: [String])>(([], []))
            let source = ReplaySource(path: path.path, speed: 0, loop: false, decoding: .init(assumedDate: date),
                                      warning: { w in seen.withLock { $0.warnings.append(w) } },
                                      sink: { i in seen.withLock { $0.inputs.append(i) } })
            let (done, finished) = AsyncStream<Void>.makeStream()
            source.start { _ in finished.finish() }
            for await _ in done {}
            source.stop()
            return seen.withLock { $0 }
        }

        let undated = await replay(date: nil)
        #expect(undated.inputs == [.source(.connected), .source(.disconnected)])
        #expect(undated.warnings == ["\(path.path): 3 positions had no date (no RMC or ZDA sentence dated them: a GGA/GLL-only log, or the positions before its first date) and were not replayed; give the log's UTC date with --date YYYY-MM-DD or replay.date"])

        let dated = await replay(date: CivilTime(year: 2012, month: 1, day: 19))
        let times = dated.inputs.compactMap { input -> Timestamp? in if case .fix(let f) = input { f.time } else { nil } }
        #expect(times == [CivilTime(year: 2012, month: 1, day: 19, hour: 23, minute: 59, second: 58).timestamp,
                          CivilTime(year: 2012, month: 1, day: 19, hour: 23, minute: 59, second: 59).timestamp,
                          CivilTime(year: 2012, month: 1, day: 20).timestamp])
        #expect(dated.warnings.isEmpty)
    }
}
