/// The pure core: `(state, input) -> (state, [event])`.
///
/// No I/O, no clock: time comes from fixes. The same engine runs in the daemon (fed by gpsd)
/// and in `locationctl replay` (fed by the NMEA parser), so both publish identical events.
/// Per-fix work is proportional to the number of subscriptions, and `handle` appends to a
/// caller-owned buffer so the hot path does not allocate once the buffer has grown.
public struct Engine: Sendable {
    @usableFromInline struct Subscription: Sendable {
        var id: SubscriberID
        var filter: LocationFilter
        var extras: SubscriptionExtras? = nil
        var approximate = false
    }

    @usableFromInline var subscriptions: [Subscription] = []
    @usableFromInline var indexByID: [SubscriberID: Int] = [:]
    public private(set) var sourceState: SourceState = .disconnected
    /// The most recent fix seen, delivered or not.
    public private(set) var lastFix: Fix?
    /// Geofences per program, and which program each subscriber belongs to (Engine+Regions.swift).
    @usableFromInline var regionPrograms = RegionPrograms()
    /// The device's approximate position for approximate subscriptions (docs/privacy.md); the
    /// shell sets the grid from the device secret before any fix.
    public var privacy = ApproximateLocation(grid: PrivacyGrid(secret: 0))
    /// Visit and significant-change detectors of programs in the background (Engine+Background.swift).
    @usableFromInline var background = BackgroundMonitors()
    /// Events for programs with no subscribed connection, until the shell drains them.
    @usableFromInline var programEvents: [ProgramEvent] = []

    public init() {}

    public var subscriberCount: Int { subscriptions.count }

    public func options(of id: SubscriberID) -> SubscriptionOptions? {
        indexByID[id].map { subscriptions[$0].filter.options }
    }

    /// Applies one input, appending the resulting deliveries to `out` (in subscription order).
    public mutating func handle(_ input: EngineInput, into out: inout [Delivery]) {
        switch input {
        case .fix(let fix):
            setState(.fix, time: fix.time, into: &out)
            lastFix = fix
            privacy.offer(fix)
            for i in subscriptions.indices {
                if subscriptions[i].filter.options.events.contains(.location) {
                    // Approximate subscriptions: the privacy stage first, then their filter.
                    let shown = subscriptions[i].approximate ? privacy.approximate(fix) : fix
                    if subscriptions[i].filter.offer(shown) {
                        out.append(Delivery(subscriber: subscriptions[i].id, event: .location(shown)))
                    }
                }
                if subscriptions[i].extras != nil {
                    let id = subscriptions[i].id
                    subscriptions[i].extras!.offer(fix, privacy: privacy) { out.append(Delivery(subscriber: id, event: $0)) }
                }
            }
            regionPrograms.handle(fix, into: &out, unbound: &programEvents)
            background.handle(fix, privacy: privacy, into: &programEvents)
        case .noFix(let time):
            setState(.noFix, time: time, into: &out)
        case .source(let state):
            setState(state, time: nil, into: &out)
        case .subscribe(let id, let options):
            // Subscribing again replaces the options and restarts the filters, like setting a
            // new distanceFilter on CLLocationManager.
            let sub = Subscription(id: id, filter: LocationFilter(options: options.effectiveForFilter),
                                   extras: SubscriptionExtras(options: options),
                                   approximate: options.accuracy == .approximate)
            if let i = indexByID[id] {
                subscriptions[i] = sub
            } else {
                indexByID[id] = subscriptions.count
                subscriptions.append(sub)
            }
            // A new subscriber learns the source state at once instead of waiting for a change.
            out.append(Delivery(subscriber: id, event: .status(sourceState, time: lastFix?.time)))
        case .unsubscribe(let id):
            guard let i = indexByID.removeValue(forKey: id) else { return }
            let last = subscriptions.count - 1
            if i != last {
                subscriptions[i] = subscriptions[last]
                indexByID[subscriptions[i].id] = i
            }
            subscriptions.removeLast()
            regionPrograms.unbind(id)
        }
    }

    /// Convenience for tests and tools: the deliveries of one input.
    public mutating func handle(_ input: EngineInput) -> [Delivery] {
        var out: [Delivery] = []
        handle(input, into: &out)
        return out
    }

    @usableFromInline mutating func setState(_ state: SourceState, time: Timestamp?, into out: inout [Delivery]) {
        guard state != sourceState else { return }
        sourceState = state
        for s in subscriptions {
            out.append(Delivery(subscriber: s.id, event: .status(state, time: time)))
        }
    }
}
