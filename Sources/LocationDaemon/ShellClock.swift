import NIOCore

/// The monotonic time the shell's timers and rate limits read: the flood limit, the loop's stall
/// watch, paced warnings, store retries, publication ticks, gpsd's epochs in pieces and replay
/// pacing. Injected where each is made, so that a test runs them on a clock it moves instead
/// of waiting. `system` is CLOCK_MONOTONIC, the clock NIO runs its scheduled tasks by.
public struct ShellClock: Sendable {
    public let now: @Sendable () -> NIODeadline

    public init(now: @escaping @Sendable () -> NIODeadline) { self.now = now }

    public static let system = ShellClock { NIODeadline.now() }

    /// The time `loop` runs its scheduled tasks by (an `EmbeddedEventLoop`'s is the one its test
    /// advances; a real loop's is `system`).
    public static func of(_ loop: any EventLoop) -> ShellClock { ShellClock { loop.now } }

    /// `now` in seconds.
    public func seconds() -> Double { Double(now().uptimeNanoseconds) / 1e9 }
}
