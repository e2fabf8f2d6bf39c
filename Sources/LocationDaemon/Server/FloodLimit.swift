import Logging
import NIOCore

/// A token bucket: `burst` requests at once, refilled at `rate` per second.
struct TokenBucket {
    var burst: Double
    var rate: Double
    var tokens: Double
    var last: NIODeadline
    /// Until when the time the loop stood still has been added (`credit`).
    var stallsCredited: NIODeadline
    /// Tokens for the requests that piled up while the loop stood still, beyond the burst (the
    /// refill's cap does not apply to them), and until when they may be spent: they are for what
    /// waited in the socket then, which the loop reads at once when it runs again, not savings
    /// for a later burst.
    var stallTokens: Double = 0
    var stallTokensUntil: NIODeadline

    init(burst: Int, rate: Double, now: NIODeadline) {
        self.burst = Double(burst); self.rate = rate; self.tokens = Double(burst); self.last = now
        self.stallsCredited = now
        self.stallTokensUntil = now
    }

    /// Grants tokens for `stalled`, time the loop stood still since `stallsCredited`: requests
    /// sent then waited in the socket and count at the rate they were sent, not as arriving
    /// together now. They may be spent for as long as the stall lasted, 1 s at least.
    mutating func credit(stalled: TimeAmount, now: NIODeadline) {
        stallsCredited = now
        // What an earlier stall left unspent has expired with its window: not banked.
        let left = now <= stallTokensUntil ? stallTokens : 0
        stallTokens = left + Double(stalled.nanoseconds) / 1e9 * rate
        stallTokensUntil = max(stallTokensUntil, now + max(stalled, .seconds(1)))
    }

    mutating func take(now: NIODeadline) -> Bool {
        let elapsed = Double((now - last).nanoseconds) / 1e9
        if elapsed > 0 {
            tokens = min(burst, tokens + elapsed * rate)
            last = now
        }
        if tokens >= 1 {
            tokens -= 1
            return true
        }
        guard stallTokens >= 1, now <= stallTokensUntil else { return false }
        stallTokens -= 1
        return true
    }
}

/// The flood limit (docs/protocol.md, "Flood policy"): one token per request.
extension Connection {
    /// A token for one request. An empty bucket is first refilled for the time the loop stood
    /// still (`LoopStallWatch`) since the last such refill.
    func takeToken() -> Bool {
        let now = configuration.clock.now()
        if bucket.take(now: now) { return true }
        let stalled = registry.stalls.stalled(since: bucket.stallsCredited)
        guard stalled > .zero else { return false }
        bucket.credit(stalled: stalled, now: now)
        logger.debug("requests held by a stalled loop", metadata: ["stalled_ms": "\(stalled.nanoseconds / 1_000_000)"])
        return bucket.take(now: now)
    }

    /// Waits for the flood limit's next token, reading paused.
    func throttleInput(context: ChannelHandlerContext) {
        pauseReading(context: context)
        let wait = TimeAmount.nanoseconds(Int64(1e9 / configuration.floodRate) + 1)
        throttle = context.eventLoop.assumeIsolated().scheduleTask(in: wait) { [self] in
            throttle = nil
            resumeInput()
        }
    }
}
