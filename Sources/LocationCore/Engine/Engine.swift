/// The pure core: `(state, input) -> (state, [event])`.
///
/// No I/O, no clock: time comes from fixes, and for a live source from the shell's `.tick`
/// inputs (its estimate of the receiver's time at a publication epoch's start). The same
/// engine runs in the daemon (fed by gpsd) and in `locationctl replay` (fed by the NMEA
/// parser), so both publish identical events.
/// Per-fix work is proportional to the number of subscriptions, and `handle` appends to a
/// caller-owned buffer so the hot path does not allocate once the buffer has grown.
public struct Engine: Sendable {
    @usableFromInline struct Subscription: Sendable {
        var id: SubscriberID
        var filter: LocationFilter
        var extras: SubscriptionExtras? = nil
        var approximate = false
        /// Location events from the fixes before the outlier gate (`raw`).
        var raw = false
        /// Present when the subscription pauses while the device is still.
        var pause: StationaryPause? = nil
        /// The program whose durable subscription this is while it is away: its events are
        /// program events (Engine+Away.swift).
        var awayFor: ProgramID? = nil
        /// Taken back from away by a new subscribe (`resumeAway`): its filters go on if the
        /// options are the same.
        var resumed = false
    }

    @usableFromInline var subscriptions: [Subscription] = []
    @usableFromInline var indexByID: [SubscriberID: Int] = [:]
    public private(set) var sourceState: SourceState = .disconnected
    /// The time `sourceState` was entered at (the input's that changed it), told to a new
    /// subscriber as it was told to the others then.
    public private(set) var sourceStateTime: Timestamp?
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
    /// Whether the last inputs made events for programs away (the shell writes them).
    public var hasProgramEvents: Bool { !programEvents.isEmpty }
    /// Fixes whose time jumps wait for the next report to confirm them (docs/semantics.md).
    public private(set) var clock = ClockJumpGuard()
    /// The state approximate subscriptions were last told (`approximateStatus`).
    @usableFromInline var approximateShown: SourceState = .disconnected
    /// Fixes the device cannot have reached wait for the next ones to confirm them, before
    /// every stage but raw subscriptions' locations (docs/semantics.md, "Outliers").
    public private(set) var outliers = OutlierGate()
    /// Whether any subscription is raw (otherwise a fix costs no pass over them before the gate).
    @usableFromInline var anyRaw = false
    /// Each program's places, from its precise visits (Engine+Places.swift).
    @usableFromInline var placePrograms = PlacePrograms()
    /// Durable subscriptions of programs that are away, by program (Engine+Away.swift).
    @usableFromInline var awayByProgram: [ProgramID: SubscriberID] = [:]

    public init() {}

    /// Subscriptions of connections (durable subscriptions away are not counted).
    public var subscriberCount: Int { subscriptions.count - awayByProgram.count }

    public func options(of id: SubscriberID) -> SubscriptionOptions? {
        indexByID[id].map { subscriptions[$0].filter.options }
    }

    /// Applies one input, appending the resulting deliveries to `out`: each subscriber's in the
    /// order it is to receive them (what a publication shows approximate subscriptions comes
    /// before the fix's own deliveries to the others).
    public mutating func handle(_ input: EngineInput, into out: inout [Delivery]) {
        let deliveriesBefore = out.count, programEventsBefore = programEvents.count
        defer {
            if !awayByProgram.isEmpty { routeAway(&out, from: deliveriesBefore, programEventsFrom: programEventsBefore) }
            recordPlaces(&out, from: deliveriesBefore, programEventsFrom: programEventsBefore)
        }
        switch input {
        case .fix(var fix):
            // The shells never pass these (GPSDTPV.engineInput, the NMEA assembler), but a NaN
            // position would trap in the privacy grid and poison every detector's state: a fix
            // without a real position is no fix, and an accuracy that is no radius is unknown.
            guard fix.coordinate.isValid else { return }
            if let a = fix.horizontalAccuracy, !(a >= 0 && a.isFinite) { fix.horizontalAccuracy = nil }
            let (first, second) = clock.admit(fix)
            if let first { pass(first, into: &out) }
            if let second { pass(second, into: &out) }
        case .noFix(let reported):
            if let released = clock.noFix(at: reported) { pass(released, into: &out) }
            let time = clock.noFixTime  // nil when off the timeline: a reset receiver's clock
            setState(.noFix, time: time, into: &out)
            let publications = privacy.publications
            privacy.offerNoFix(at: time)
            showApproximate(since: publications, into: &out)
        case .source(let state):
            if state == .disconnected { clock.sourceLost(); outliers.reset() }
            setState(state, time: nil, into: &out)
            if state == .disconnected { privacy.sourceLost() }
            showApproximateState(into: &out)
        case .tick(let time):
            let publications = privacy.publications
            privacy.tick(at: time)
            showApproximate(since: publications, into: &out)
        case .subscribe(let id, let options):
            // Subscribing again replaces the options and restarts the location filter, like
            // setting a new distanceFilter on CLLocationManager; the visit and significant-change
            // detectors carry over for the kinds both ask for (`adopt`, as a take-back does):
            // restarted, an open visit never got its departure.
            // Approximate subscriptions see published cells: neither raw fixes nor when the
            // device stopped and moved on (what the publication epochs hide).
            let approximate = options.accuracy == .approximate
            let paused = options.pausesWhenStationary && !approximate && options.events.contains(.location)
            let sub = Subscription(id: id, filter: LocationFilter(options: options.effectiveForFilter),
                                   extras: SubscriptionExtras(options: options), approximate: approximate,
                                   raw: options.raw && !approximate,
                                   pause: paused ? StationaryPause(parameters: .init(activity: options.activityType)) : nil)
            let i: Int
            var previous: SubscriptionExtras?
            if let existing = indexByID[id] {
                i = existing
                previous = subscriptions[i].extras
                let old = subscriptions[i]
                subscriptions[i] = sub
                // Back from away with the same options: one continuous filter (no location
                // repeated at subscribe, the distance measured from the last one queued).
                if old.resumed, old.filter.options == sub.filter.options, old.approximate == sub.approximate, old.raw == sub.raw {
                    subscriptions[i].filter = old.filter
                    subscriptions[i].pause = old.pause
                }
                if let old = previous, subscriptions[i].extras?.adopt(old) == true { previous = nil }
            } else {
                i = subscriptions.count
                indexByID[id] = i
                subscriptions.append(sub)
            }
            anyRaw = subscriptions.contains { $0.raw }
            // A new subscriber learns the source state at once instead of waiting for a change;
            // an approximate one the published state and location (a new subscription shows
            // nothing that was not already published).
            guard sub.approximate else {
                out.append(Delivery(subscriber: id, event: .status(sourceState, time: sourceStateTime)))
                sendHeldVisits(of: &previous, to: i, into: &out)
                return
            }
            // Held visits waited on for the publication above (`adopt`) if visits are still
            // wanted; a subscription without visits drops them, as any later event.
            let (state, time, _) = approximateStatus
            out.append(Delivery(subscriber: id, event: .status(state, time: time)))
            if options.events.contains(.location), let shown = privacy.publishedFix,
               subscriptions[i].filter.offer(shown) {
                out.append(Delivery(subscriber: id, event: .location(shown)))
            }
        case .unsubscribe(let id):
            guard let i = indexByID.removeValue(forKey: id) else { return }
            let last = subscriptions.count - 1
            if i != last {
                subscriptions[i] = subscriptions[last]
                indexByID[subscriptions[i].id] = i
            }
            subscriptions.removeLast()
            anyRaw = subscriptions.contains { $0.raw }
            regionPrograms.unbind(id)
        }
    }

    /// One fix the clock guard let through: the receiver reports positions, raw subscriptions
    /// see it, and what the outlier gate passes on goes through every stage.
    @usableFromInline mutating func pass(_ fix: Fix, into out: inout [Delivery]) {
        setState(.fix, time: fix.time, into: &out)
        lastFix = fix
        if anyRaw {
            for i in subscriptions.indices where subscriptions[i].raw
                && subscriptions[i].filter.options.events.contains(.location) && subscriptions[i].pause?.isPaused != true
                && subscriptions[i].filter.offer(fix) {
                out.append(Delivery(subscriber: subscriptions[i].id, event: .location(fix)))
            }
        }
        // Once per fix, for the gate and every visit detector's plane.
        let unit = Geodesy.unitVector(fix.coordinate)
        let n = outliers.admit(fix, unit: unit)
        for k in 0..<n {
            // The last one released is this fix; earlier ones are held fixes a confirmation let go.
            let accepted = outliers.released[k]
            take(accepted, unit: k == n - 1 ? unit : Geodesy.unitVector(accepted.coordinate), into: &out)
        }
    }

    /// One fix the outlier gate passed on, run through every stage.
    @usableFromInline mutating func take(_ fix: Fix, unit: SIMD3<Double>, into out: inout [Delivery]) {
        let publications = privacy.publications
        privacy.offer(fix)
        showApproximate(since: publications, into: &out)
        // Through the buffer: no uniqueness or bounds check per field and subscription.
        let privacy = privacy
        subscriptions.withUnsafeMutableBufferPointer { subscriptions in
            for i in subscriptions.indices {
                // Approximate subscriptions hear of locations only at publications (above), raw
                // ones before the gate (`pass`).
                var deliver = !subscriptions[i].approximate && !subscriptions[i].raw
                    && subscriptions[i].filter.options.events.contains(.location)
                if subscriptions[i].pause != nil {
                    switch subscriptions[i].pause!.offer(fix, unit: unit) {
                    case .deliver: break
                    case .hold: deliver = false
                    case .pause:
                        out.append(Delivery(subscriber: subscriptions[i].id, event: .paused(fix.time)))
                        deliver = false
                    case .resume:
                        out.append(Delivery(subscriber: subscriptions[i].id, event: .resumed(fix.time)))
                    }
                }
                if deliver, subscriptions[i].filter.offer(fix, unit: unit) {
                    out.append(Delivery(subscriber: subscriptions[i].id, event: .location(fix)))
                }
                if subscriptions[i].extras != nil {
                    let id = subscriptions[i].id
                    subscriptions[i].extras!.offer(fix, unit: unit, privacy: privacy) { out.append(Delivery(subscriber: id, event: $0)) }
                }
            }
        }
        regionPrograms.handle(fix, unit: unit, into: &out, unbound: &programEvents)
        background.handle(fix, unit: unit, privacy: privacy, into: &programEvents)
    }

    /// Convenience for tests and tools: the deliveries of one input.
    public mutating func handle(_ input: EngineInput) -> [Delivery] {
        var out: [Delivery] = []
        handle(input, into: &out)
        return out
    }

    /// Precise subscriptions learn every change of state, at the input that made it.
    @usableFromInline mutating func setState(_ state: SourceState, time: Timestamp?, into out: inout [Delivery]) {
        guard state != sourceState else { return }
        sourceState = state
        sourceStateTime = time
        for s in subscriptions where !s.approximate {
            out.append(Delivery(subscriber: s.id, event: .status(state, time: time)))
        }
    }

    /// The state approximate subscriptions are shown: whether gpsd is reachable as it happens
    /// (that says nothing of the device), but whether the receiver has a fix only as it was at
    /// the current publication epoch's start, stamped with it (docs/privacy.md, "Publication
    /// epochs"): when a device loses or regains its fix says when it went indoors or came out.
    /// `lastFix`: the published epoch's start when the receiver had a fix then (what an
    /// approximate status reply shows as its last fix).
    public var approximateStatus: (state: SourceState, time: Timestamp?, lastFix: Timestamp?) {
        switch sourceState {
        case .disconnected, .connected: return (sourceState, nil, nil)
        case .fix, .noFix:
            guard let shown = privacy.publishedReceiver else { return (.connected, nil, nil) }
            return (shown, privacy.publishedAt, privacy.publishedFix?.time)
        }
    }

    /// After an input the privacy stage saw: approximate subscriptions are told a changed state,
    /// then, if the input made a publication (`ApproximateLocation.publications` moved past
    /// `since`), what it shows.
    mutating func showApproximate(since publications: UInt64, into out: inout [Delivery]) {
        showApproximateState(into: &out)
        if privacy.publications != publications { publishApproximate(into: &out) }
    }

    /// Tells approximate subscriptions a changed state.
    mutating func showApproximateState(into out: inout [Delivery]) {
        let (state, time, _) = approximateStatus
        guard state != approximateShown else { return }
        approximateShown = state
        for s in subscriptions where s.approximate {
            out.append(Delivery(subscriber: s.id, event: .status(state, time: time)))
        }
    }

    /// A publication (an epoch began, or the first report came): approximate
    /// subscriptions see the location as of the epoch's start, the visits held since the last
    /// one, and significant changes (after its state, `showApproximateState`). Nothing
    /// reaches them between publications, so nothing they receive is timed finer than an
    /// epoch (docs/privacy.md, "Publication epochs").
    mutating func publishApproximate(into out: inout [Delivery]) {
        let shown = privacy.publishedFix
        for i in subscriptions.indices where subscriptions[i].approximate {
            let id = subscriptions[i].id
            if let shown, subscriptions[i].filter.options.events.contains(.location), subscriptions[i].filter.offer(shown) {
                out.append(Delivery(subscriber: id, event: .location(shown)))
            }
            if subscriptions[i].extras != nil {
                subscriptions[i].extras!.offerPublished(shown, privacy: privacy) { out.append(Delivery(subscriber: id, event: $0)) }
            }
        }
        background.handlePublished(shown, privacy: privacy, into: &programEvents)
    }
}
