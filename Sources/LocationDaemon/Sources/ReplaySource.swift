import LocationCore
import NMEA
import NIOCore
import NIOPosix
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Feeds the engine from an NMEA log instead of gpsd (the demo, and testing a recorded drive
/// against real subscribers). Runs on its own thread because pacing sleeps; the inputs are the
/// ones `NMEAReplay` produces, the same that `locationctl replay` feeds its in-process engine.
///
/// Backpressure: with a `consumer` loop, at most `window` inputs are in flight to it — every
/// `window` inputs the replay waits until the loop has handled the earlier ones. A replay
/// faster than the hub can fan out therefore runs late (as a receiver whose reader lags)
/// instead of queueing inputs without bound: NIO runs every queued task before it polls its
/// sockets again, so an unbounded queue kept new connections waiting for seconds
/// (docs/benchmarks.md, "Overload"). The gpsd source needs no such rule: it reads on the loop.
public final class ReplaySource: Sendable {
    public let path: String
    /// Replay at this many times real time; 0 = as fast as possible.
    public let speed: Double
    public let loop: Bool
    /// Inputs handed to `consumer` between two waits for it.
    public static let window = 8
    private let consumer: (any EventLoop)?
    private let sink: @Sendable (EngineInput) -> Void
    private let stopped = Atomic<Bool>(false)
    private let pool = NIOThreadPool(numberOfThreads: 1)

    /// - Parameter consumer: the loop `sink` hands inputs to (the hub's), waited on every
    ///   `window` inputs; nil for a sink that does not queue.
    public init(path: String, speed: Double, loop: Bool, consumer: (any EventLoop)? = nil,
                sink: @escaping @Sendable (EngineInput) -> Void) {
        self.path = path
        self.speed = speed
        self.loop = loop
        self.consumer = consumer
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
        var inFlight = 0
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
            inFlight += 1
            if inFlight == Self.window, let consumer {
                inFlight = 0
                try? consumer.submit {}.wait()
            }
        }
    }
}

func monotonicSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}
