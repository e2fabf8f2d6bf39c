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
    var approximate = false
    /// Approximate: the cell centre the open visit's arrival was reported with, which its
    /// departure repeats (by then the device may be in another cell, e.g. after a gap).
    var visitCell: Coordinate?
    /// Approximate: visits detected since the last publication, as detected, until the next
    /// publication sends them coarse (`offerPublished`): the moment a visit is detected (an
    /// arrival is its first fix plus the dwell) must not be when it is sent.
    var heldVisits: [Visit] = []
    /// Approximate: the visit detector sees fixes only from the next publication on, so every
    /// subscription a program opens within one epoch watches the same stay from the same fix.
    /// Started at its subscribe, whether a subscription gets an arrival would tell whether the
    /// device stayed the dwell from that second on: subscriptions opened 10 s apart would time a
    /// departure to 10 s (docs/privacy.md, "Other channels").
    var visitsAwaitPublication = false

    init?(options: SubscriptionOptions) {
        guard options.events.contains(.visits) || options.events.contains(.significant) else { return nil }
        if options.events.contains(.visits) { visits = VisitDetector(parameters: options.visitParameters) }
        if options.events.contains(.significant) {
            var p = options.significantParameters
            // A program asking for 20 m is not handed an 80 m significant change either.
            if let a = options.desiredAccuracy {
                p.maximumAccuracy = min(p.maximumAccuracy, a)
                p.requiresKnownAccuracy = true
            }
            if options.accuracy == .approximate {
                // Unused on published cells (`offerPublished`: no gate, no confirmation), and the
                // same for every approximate detector, so that one is handed back (`adopt`).
                p.maximumAccuracy = .infinity
                p.maximumSpeed = .infinity
                p.requiresKnownAccuracy = false
            }
            significant = SignificantChange(parameters: p)
        }
        approximate = options.accuracy == .approximate
        visitsAwaitPublication = approximate && visits != nil
    }

    /// Runs the fix (`unit`: its unit vector, computed once per fix) through the detectors,
    /// passing each event to `emit` (a subscriber's delivery, or a program's queue when it runs
    /// in the background).
    /// Approximate subscriptions: visits are detected on precise fixes and held for the next
    /// publication; significant changes run on what is published. Both go out from
    /// `offerPublished`, not here.
    @inline(__always)
    mutating func offer(_ fix: Fix, unit: SIMD3<Double>, privacy: ApproximateLocation, emit: (Event) -> Void) {
        if approximate {
            guard visits != nil, !visitsAwaitPublication else { return }
            // Swapped out and back: no copy of the (usually empty) array per fix.
            var held: [Visit] = []
            swap(&held, &heldVisits)
            visits!.offer(fix, unit: unit) { held.append($0) }
            swap(&held, &heldVisits)
            return
        }
        // Optional chaining changes the detectors in place, testing each optional once;
        // `significant != nil` copied all of it (289 bytes) to compare with nil.
        visits?.offer(fix, unit: unit) { emit(.visit($0)) }
        if let f = significant?.offer(fix) {
            emit(.significant(f))
        }
    }

    /// A publication: an approximate subscription's held visits go out, as the published cell
    /// with 15-minute times, then its significant change if the published location (`shown`,
    /// nil without a fix at the epoch's start) is one: a change of published cell, at the
    /// publication that shows it, as the location events do (the cell moved with its
    /// hysteresis; a second confirming publication would delay it by an epoch), the event's
    /// time rounded down to 15 minutes.
    mutating func offerPublished(_ shown: Fix?, privacy: ApproximateLocation, emit: (Event) -> Void) {
        guard approximate else { return }
        visitsAwaitPublication = false
        releaseVisits(privacy: privacy, emit: emit)
        guard let shown, significant != nil, var f = significant!.offerConfirmed(shown) else { return }
        f.time = ApproximateLocation.coarse(f.time)
        emit(.significant(f))
    }

    /// The held visits, coarse: the published cell centre (a departure repeats its arrival's,
    /// as by then the device may be in another cell), 15-minute times.
    mutating func releaseVisits(privacy: ApproximateLocation, emit: (Event) -> Void) {
        guard !heldVisits.isEmpty else { return }
        for v in heldVisits {
            var shown = privacy.approximate(v)
            if v.kind == .departure, let c = visitCell { shown.coordinate = c }
            visitCell = v.kind == .arrival ? shown.coordinate : nil
            emit(.visit(shown))
        }
        heldVisits.removeAll()
    }

    /// Takes `visits` held by another detector of the same program, each once: two
    /// connections watching the same stay hold the same visit.
    mutating func mergeHeld(_ visits: [Visit]) {
        heldVisits += visits.filter { !heldVisits.contains($0) }
    }

    /// Takes over `other`'s detector state for the kinds both run (same privacy), so a visit in
    /// progress when a program went to the background ends with a departure, not a second arrival.
    /// Returns whether `other`'s held visits came along too: they do when this one runs
    /// approximate visits; otherwise the caller sends them elsewhere.
    mutating func adopt(_ other: SubscriptionExtras) -> Bool {
        guard other.approximate == approximate else { return false }
        if visits != nil, let v = other.visits, v.parameters == visits!.parameters {
            visits = v; visitCell = other.visitCell
            visitsAwaitPublication = other.visitsAwaitPublication
        }
        if significant != nil, let s = other.significant, s.parameters == significant!.parameters { significant = s }
        guard visits != nil else { return false }
        mergeHeld(other.heldVisits)
        // A held departure repeats the cell its arrival was shown with, whichever detector
        // goes on (a fresh one sets its own at its own arrival).
        if visitCell == nil { visitCell = other.visitCell }
        return true
    }
}
