/// The state of the position source as subscribers see it.
public enum SourceState: String, Hashable, Sendable, CaseIterable {
    /// No connection to gpsd (or the replay has not started / has ended).
    case disconnected
    /// Connected to gpsd; nothing heard from a receiver yet.
    case connected
    /// The receiver reports, but without a position.
    case noFix
    /// The receiver reports positions.
    case fix
}

/// A subscriber: one connection's subscription (or, in replay, one simulated program).
public struct SubscriberID: Hashable, Sendable, Comparable {
    public var rawValue: UInt64
    @inlinable public init(_ rawValue: UInt64) { self.rawValue = rawValue }
    @inlinable public static func < (a: SubscriberID, b: SubscriberID) -> Bool { a.rawValue < b.rawValue }
}

/// What the core publishes.
public enum Event: Hashable, Sendable {
    case location(Fix)
    /// The source changed state; `time` is the fix time it was observed at when known.
    case status(SourceState, time: Timestamp?)
    /// A visit arrival or departure (subscriptions with `visits`).
    case visit(Visit)
    /// A significant change of position (subscriptions with `significant`).
    case significant(Fix)
    /// A geofence event of the subscriber's program (docs/regions.md).
    case region(RegionEvent)
    /// The device has been still long enough: no `location` until `resumed` (subscriptions
    /// with `pausesWhenStationary`; docs/semantics.md, "Pause when stationary"). The time of
    /// the fix that completed the stillness.
    case paused(Timestamp)
    /// Movement confirmed after `paused`: locations again; the time of the fix that confirmed it.
    case resumed(Timestamp)
}

extension Event {
    /// Whether this is a `visit` event.
    @inlinable public var isVisit: Bool {
        if case .visit = self { return true }
        return false
    }
}

/// An event addressed to one subscriber.
public struct Delivery: Hashable, Sendable {
    public var subscriber: SubscriberID
    public var event: Event
    @inlinable public init(subscriber: SubscriberID, event: Event) {
        self.subscriber = subscriber
        self.event = event
    }
}

/// Everything that can happen to the core.
public enum EngineInput: Hashable, Sendable {
    /// A position fix.
    case fix(Fix)
    /// The receiver reported an epoch without a position (at that fix time, when known).
    case noFix(Timestamp?)
    /// The shell's connection to the source changed (`.connected` / `.disconnected`).
    case source(SourceState)
    /// The shell's clock reached a publication epoch's start: its estimate of the receiver's
    /// time (docs/privacy.md, "Publication epochs"). Live sources only; a replay publishes at
    /// its reports.
    case tick(Timestamp)
    case subscribe(SubscriberID, SubscriptionOptions)
    case unsubscribe(SubscriberID)
}

/// The program a subscriber belongs to, as the shell identifies it (the peer's uid and
/// executable path). Regions belong to a program, not to a connection.
public struct ProgramID: Hashable, Sendable, Comparable, CustomStringConvertible {
    public var rawValue: String
    public init(_ rawValue: String) { self.rawValue = rawValue }
    public static func < (a: ProgramID, b: ProgramID) -> Bool { a.rawValue < b.rawValue }
    public var description: String { rawValue }
}
