import NIOCore
import NIOEmbedded
import Synchronization
import Testing
@testable import LocationDaemon

/// The flood limit's stall watch and the tokens it grants (docs/protocol.md, "Flood policy"), on
/// a virtual loop and clock.
@Suite struct LoopStallWatchTests {
    /// A clock the test sets: the loop's beat reads it, and a stall is the clock moving on while
    /// the loop runs nothing.
    final class Clock: Sendable {
        private let seconds = Mutex(Int64(0))
        let origin = NIODeadline.uptimeNanoseconds(1_000_000_000)
        func set(_ s: Int64) { seconds.withLock { $0 = s } }
        var now: NIODeadline { origin + .seconds(seconds.withLock { $0 }) }
    }

    /// A stall is measured while under way and once a beat saw it end, and only for a while
    /// after: a connection that was idle through it and empties its bucket later has nothing from
    /// it to claim (it claimed the whole stall hours later).
    @Test func aStallIsClaimableOnlyWhileItsRequestsAreBeingRead() {
        let loop = EmbeddedEventLoop()
        let clock = Clock()
        let watch = LoopStallWatch(eventLoop: loop, interval: .seconds(1), clock: ShellClock { clock.now })
        watch.retain()
        #expect(watch.stalled(since: clock.origin) == .zero)
        clock.set(3)  // the loop ran nothing for 3 s: its beat, due at 1 s, has not run
        #expect(watch.stalled(since: clock.origin) == .seconds(2))
        loop.advanceTime(by: .seconds(1))  // the overdue beat runs and records the stall
        #expect(watch.stalled(since: clock.origin) == .seconds(2))
        for s in Int64(4)...10 {  // the loop runs on time again
            clock.set(s)
            loop.advanceTime(by: .seconds(1))
            #expect(watch.stalled(since: clock.origin) == (s <= 5 ? .seconds(2) : .zero), "at \(s) s")
        }
        watch.release()
    }

    /// The tokens of a stall are spent within its window; what is left then expires, and is not
    /// banked for the next stall (a flooder emptying its bucket after each stall kept them).
    @Test func stallTokensExpireWithTheirWindow() {
        let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)
        var bucket = TokenBucket(burst: 20, rate: 100, now: t0)
        func takes(_ n: Int, at now: NIODeadline) -> Int {
            var taken = 0
            while taken < n, bucket.take(now: now) { taken += 1 }
            return taken
        }
        #expect(takes(21, at: t0) == 20)
        bucket.credit(stalled: .seconds(10), now: t0)  // 1,000 tokens, for 10 s
        #expect(takes(1, at: t0) == 1)
        let later = t0 + .hours(1)
        #expect(takes(21, at: later) == 20, "the burst, refilled; the first stall's tokens have expired")
        bucket.credit(stalled: .milliseconds(300), now: later)  // 30 tokens
        var spent = 0
        while bucket.take(now: later) { spent += 1 }
        #expect(spent == 30)
    }
}
