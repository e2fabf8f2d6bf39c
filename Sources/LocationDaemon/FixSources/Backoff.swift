/// Capped exponential backoff for reconnecting to gpsd.
///
/// Delays are `initial`, `2·initial`, `4·initial`, … capped at `maximum`; `reset()` once a
/// connection's gpsd has spoken. With the defaults (0.1 s doubling to 1 s) a gpsd that comes back is
/// found at most ~1 s (one capped delay, plus one connection attempt) later.
public struct Backoff: Hashable, Sendable {
    public var initial: Double
    public var maximum: Double
    public private(set) var current: Double

    public init(initial: Double = 0.1, maximum: Double = 1.0) {
        precondition(initial > 0 && maximum >= initial, "Backoff needs 0 < initial <= maximum")
        self.initial = initial
        self.maximum = maximum
        self.current = initial
    }

    /// The delay to wait now; the following call returns the next (doubled, capped) one.
    public mutating func next() -> Double {
        let d = current
        current = min(current * 2, maximum)
        return d
    }

    public mutating func reset() { current = initial }
}
