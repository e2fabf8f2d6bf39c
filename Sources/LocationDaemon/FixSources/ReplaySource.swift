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
/// sockets again, so an unbounded queue would keep new connections waiting for seconds
/// (docs/benchmarks.md, "Overload"). The gpsd source needs no such rule: it reads on the loop.
public final class ReplaySource: Sendable {
    public let path: String
    /// Replay at this many times real time; 0 = as fast as possible.
    public let speed: Double
    public let loop: Bool
    /// How the log is decoded: the date of its positions before its first RMC or ZDA, and
    /// whether as gpsd reports it (`NMEADecoder.Options(assumedDate:asGPSD:)`).
    public let decoding: NMEADecoder.Options
    /// Inputs handed to `consumer` between two waits for it.
    public static let window = 8
    private let consumer: (any EventLoop)?
    private let sink: @Sendable (EngineInput) -> Void
    private let warning: @Sendable (String) -> Void
    private let stopped = Atomic<Bool>(false)
    private let pool = NIOThreadPool(numberOfThreads: 1)
    private let clock: ShellClock

    /// - Parameters:
    ///   - consumer: the loop `sink` hands inputs to (the hub's), waited on every `window`
    ///     inputs; nil for a sink that does not queue.
    ///   - warning: told once, after the first pass, when positions were skipped for want of a
    ///     date (`NMEAReplay.undatedWarning`).
    ///   - clock: what the pacing waits by.
    public init(path: String, speed: Double, loop: Bool, decoding: NMEADecoder.Options = .init(), consumer: (any EventLoop)? = nil,
                clock: ShellClock = .system, warning: @escaping @Sendable (String) -> Void = { _ in },
                sink: @escaping @Sendable (EngineInput) -> Void) {
        self.clock = clock
        self.path = path
        self.speed = speed
        self.loop = loop
        self.decoding = decoding
        self.consumer = consumer
        self.warning = warning
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
                var passes = 0
                repeat {
                    let (fixes, undated) = try replayOnce()
                    passes += 1
                    if passes == 1, undated > 0 {
                        warning(NMEAReplay.undatedWarning(path: path, count: undated, remedy: "give the log's UTC date with --date YYYY-MM-DD or replay.date"))
                    }
                    // A looped log without fixes would repeat nothing as fast as it can.
                    if loop && fixes == 0 {
                        throw NMEAReplay.Failure(description: "\(path): no fixes in the log (pass \(passes)); --loop needs a log with fixes")
                    }
                } while loop && !stopped.load(ordering: .relaxed)
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

    /// One pass over the log; returns how many fixes it had, and how many positions it
    /// skipped for want of a date.
    private func replayOnce() throws -> (fixes: Int, undated: Int) {
        var pacer = ReplayPacer(speed: speed)
        var inFlight = 0, fixes = 0
        let statistics = try NMEAReplay.inputs(fromFile: path, options: decoding) { input in
            if stopped.load(ordering: .relaxed) { throw Stopped() }
            let time: Timestamp?
            switch input {
            case .fix(let fix): time = fix.time; fixes += 1
            case .noFix(let t): time = t
            default: time = nil
            }
            if speed > 0, let time {
                let due = pacer.due(time, now: clock.seconds())
                var wait = due - clock.seconds()
                while wait > 0 {
                    if stopped.load(ordering: .relaxed) { throw Stopped() }
                    let slice = min(wait, 0.1)  // wake up to notice stop()
                    var ts = timespec(tv_sec: Int(slice), tv_nsec: Int((slice - Double(Int(slice))) * 1e9))
                    nanosleep(&ts, nil)
                    wait = due - clock.seconds()
                }
            }
            sink(input)
            inFlight += 1
            if inFlight == Self.window, let consumer {
                inFlight = 0
                try? consumer.submit {}.wait()
            }
        }
        // The next pass (or the end) comes after the loop has handled this one's inputs.
        if inFlight > 0, let consumer { try? consumer.submit {}.wait() }
        return (fixes, statistics.undatedFixes)
    }
}
