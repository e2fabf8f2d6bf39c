import LocationCore
import NMEA
import NIOPosix
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Feeds the engine from an NMEA log instead of gpsd (the demo, and testing a recorded drive
/// against real subscribers). Runs on its own thread because pacing sleeps; the inputs are the
/// ones `NMEAReplay` produces, the same that `locationctl replay` feeds its in-process engine.
public final class ReplaySource: Sendable {
    public let path: String
    /// Replay at this many times real time; 0 = as fast as possible.
    public let speed: Double
    public let loop: Bool
    private let sink: @Sendable (EngineInput) -> Void
    private let stopped = Atomic<Bool>(false)
    private let pool = NIOThreadPool(numberOfThreads: 1)

    public init(path: String, speed: Double, loop: Bool, sink: @escaping @Sendable (EngineInput) -> Void) {
        self.path = path
        self.speed = speed
        self.loop = loop
        self.sink = sink
    }

    public var description: String { "replay:\(path)" }

    /// Starts replaying; `finished` is called once when the log ended (and `loop` is off),
    /// when replay failed (with the error), or after `stop()`.
    public func start(finished: @escaping @Sendable (Error?) -> Void) {
        guard !stopped.load(ordering: .relaxed) else { return finished(nil) }
        pool.start()
        pool.submit { [self] state in
            guard state == .active else { return finished(nil) }
            do {
                repeat { try replayOnce() } while loop && !stopped.load(ordering: .relaxed)
                finished(nil)
            } catch is Stopped {
                finished(nil)
            } catch {
                finished(error)
            }
        }
    }

    public func stop() {
        stopped.store(true, ordering: .relaxed)
        try? pool.syncShutdownGracefully()
    }

    private struct Stopped: Error {}

    private func replayOnce() throws {
        var firstFixTime: Timestamp?
        let wallStart = monotonicSeconds()
        try NMEAReplay.inputs(fromFile: path) { input in
            if stopped.load(ordering: .relaxed) { throw Stopped() }
            if speed > 0, case .fix(let fix) = input {
                // Pace by fix time relative to the first fix; a clock jumping backwards in the
                // log simply does not wait.
                let first = firstFixTime ?? fix.time
                firstFixTime = first
                let due = (fix.time - first) / speed
                var wait = due - (monotonicSeconds() - wallStart)
                while wait > 0 {
                    if stopped.load(ordering: .relaxed) { throw Stopped() }
                    let slice = min(wait, 0.1)  // wake up to notice stop()
                    var ts = timespec(tv_sec: Int(slice), tv_nsec: Int((slice - Double(Int(slice))) * 1e9))
                    nanosleep(&ts, nil)
                    wait = due - (monotonicSeconds() - wallStart)
                }
            }
            sink(input)
        }
    }
}

func monotonicSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}
