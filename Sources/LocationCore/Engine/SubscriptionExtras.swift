/// Which kinds of events a subscription asked for (`events` in `subscribe`).
public struct EventKinds: OptionSet, Hashable, Sendable {
    public var rawValue: UInt8
    @inlinable public init(rawValue: UInt8) { self.rawValue = rawValue }
    /// `location` events (the filtered fix stream).
    public static let location = EventKinds(rawValue: 1)
    /// `visit` events (arrival, departure).
    public static let visits = EventKinds(rawValue: 2)
    /// `significant` events.
    public static let significant = EventKinds(rawValue: 4)

    /// Wire names, in wire order.
    public static let names: [(name: String, kind: EventKinds)] =
        [("location", .location), ("visits", .visits), ("significant", .significant)]
}

/// A subscription's detectors besides the location filter; present only for subscriptions
/// that asked for visits or significant changes, so others pay one nil check per fix.
@usableFromInline struct SubscriptionExtras: Sendable {
    var visits: VisitDetector?
    var significant: SignificantChange?

    init?(options: SubscriptionOptions) {
        guard options.events.contains(.visits) || options.events.contains(.significant) else { return nil }
        if options.events.contains(.visits) { visits = VisitDetector(parameters: options.visitParameters) }
        if options.events.contains(.significant) {
            var p = options.significantParameters
            // A program asking for 20 m is not handed an 80 m significant change either.
            if let a = options.desiredAccuracy { p.maximumAccuracy = min(p.maximumAccuracy, a) }
            significant = SignificantChange(parameters: p)
        }
    }

    /// Runs the fix through the detectors, appending their events for `id`.
    mutating func offer(_ fix: Fix, for id: SubscriberID, into out: inout [Delivery]) {
        if visits != nil {
            visits!.offer(fix) { out.append(Delivery(subscriber: id, event: .visit($0))) }
        }
        if significant != nil, let f = significant!.offer(fix) {
            out.append(Delivery(subscriber: id, event: .significant(f)))
        }
    }
}
