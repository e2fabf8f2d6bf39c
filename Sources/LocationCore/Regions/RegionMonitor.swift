/// A rejected region request: nothing of the request was applied.
public struct RegionError: Error, Hashable, Sendable, CustomStringConvertible {
    public enum Code: String, Hashable, Sendable {
        /// A region is malformed (radius, coordinates, id, dwell, metadata).
        case invalidRegion
        /// The id is already registered, or given twice in the request.
        case duplicateRegion
        /// More regions than the program may register.
        case tooManyRegions
        /// `remove` named an id that is not registered.
        case unknownRegion
        /// The shell could not make the change durable, so it undid it (nothing applied).
        case notStored
    }
    public var code: Code
    public var message: String
    public init(_ code: Code, _ message: String) { self.code = code; self.message = message }
    public var description: String { "\(code.rawValue): \(message)" }
}

/// What is remembered of a region across restarts.
public struct RegionRecord: Hashable, Sendable {
    public var region: Region
    public var state: RegionState
    /// When the device entered (for dwell), if inside.
    public var enteredAt: Timestamp?
    public var dwellReported: Bool
    public init(region: Region, state: RegionState, enteredAt: Timestamp? = nil, dwellReported: Bool = false) {
        self.region = region; self.state = state; self.enteredAt = enteredAt; self.dwellReported = dwellReported
    }
}

/// One program's geofences: registration, per-region state machines with accuracy-aware
/// hysteresis and confirmation, crossing inference across fix gaps, and the active set with
/// rotation. Pure: `(state, fix) -> events`. Every rule, and the argument that rotation never
/// changes the events, is in docs/regions.md.
public struct RegionMonitor: Sendable {
    public struct Limits: Hashable, Sendable {
        /// Regions evaluated per fix in steady state; `nil` = all (no rotation).
        public var maxActive: Int?
        /// Regions a program may register.
        public var maxRegistered: Int
        public init(maxActive: Int? = 20, maxRegistered: Int = 10_000) {
            self.maxActive = maxActive; self.maxRegistered = maxRegistered
        }
    }

    struct Slot: Sendable {
        var region: Region
        /// The centre's `Geodesy.unitVector`: most distances a fix is compared with are
        /// decided from the chord (`BoundedDistance`).
        var centerUnit: SIMD3<Double>
        var state: RegionState = .unknown
        /// Whether the last fix evaluated for this region was inside its circle (`nil`: none yet).
        var lastInside: Bool?
        /// Consecutive fixes deciding the side opposite to `state`, and the first of them.
        var evidence = 0
        var evidenceStart: Fix?
        /// The last fix deciding "outside" before a run of inside evidence: the start of a
        /// possible pass (enter and exit between two outside fixes).
        var anchor: Fix?
        var enteredAt: Timestamp?
        var dwellReported = false
        var stamp: UInt32 = 0
        /// Whether the slot is in the monitor's `watch` and `undecided` sets: an evaluation
        /// changes a set only when the membership changes (most leave it as it was).
        var inWatch = false, inUndecided = false

        var isSettled: Bool {
            // `case nil`: comparing the optional fix with `== nil` copied it first.
            guard state != .unknown, evidence == 0, case nil = anchor, let inside = lastInside else { return false }
            if inside != (state == .inside) { return false }
            if state == .inside, region.dwell != nil, !dwellReported { return false }
            return true
        }
    }

    public let limits: Limits
    var slots: [Slot] = []
    var slotByID: [String: Int] = [:]
    var index = RegionIndex()
    var indexDirty = false
    var active: [Int] = []
    /// Regions with business that cannot wait for rotation (see `Slot.isSettled`), whose
    /// state is known.
    var watch: Set<Int> = []
    /// Regions whose state is unknown: evaluated on every fix that can decide a side (one with
    /// an accuracy), skipped by one that cannot, to which they have nothing to answer. Watched
    /// with the others, every region of a receiver that reports no accuracy (an RMC-only log,
    /// a TPV without eph) would stay unknown and be evaluated at every fix: 10,000 a fix.
    var undecided: Set<Int> = []
    var reference: Coordinate?
    var safeDistance = 0.0
    var previous: Fix?
    /// `previous`'s `Geodesy.unitVector`.
    var previousUnit = SIMD3<Double>()
    var generation: UInt32 = 0
    var scratch: [RegionEvent] = []
    /// The slots one fix evaluates, kept from fix to fix so that a fix allocates nothing.
    var evaluating: [Int] = []
    /// Slots whose persistent part (state, entry time, dwell reported) changed since the last
    /// `drainChanges()`.
    var changed: Set<Int> = []
    /// Regions evaluated for the last fix (diagnostics, tests, benchmark).
    public private(set) var evaluatedLastFix = 0
    /// Times the active set was re-ranked (diagnostics, tests, benchmark).
    public private(set) var reranks = 0
    /// Distances are compared with this slack (metres) so rounding never skips a re-rank.
    static let slack = 1.0

    public init(limits: Limits = Limits()) { self.limits = limits }

    public var count: Int { slots.count }
    public var regions: [Region] { slots.map(\.region) }
    public var records: [RegionRecord] {
        slots.map { RegionRecord(region: $0.region, state: $0.state, enteredAt: $0.enteredAt, dwellReported: $0.dwellReported) }
    }
    public func state(of id: String) -> RegionState? { slotByID[id].map { slots[$0].state } }
    public func record(of id: String) -> RegionRecord? {
        slotByID[id].map { let s = slots[$0]; return RegionRecord(region: s.region, state: s.state, enteredAt: s.enteredAt, dwellReported: s.dwellReported) }
    }

    /// The records whose state changed since the last call (to persist them).
    public mutating func drainChanges() -> [RegionRecord] {
        guard !changed.isEmpty else { return [] }
        defer { changed.removeAll(keepingCapacity: true) }
        return changed.sorted().map { let s = slots[$0]; return RegionRecord(region: s.region, state: s.state, enteredAt: s.enteredAt, dwellReported: s.dwellReported) }
    }

    // MARK: Registration (all or nothing)

    /// Checks `regions` against the registered ones and the limits without changing anything.
    public func validate(_ regions: [Region]) throws(RegionError) {
        try validate(regions, limited: true)
    }

    /// `limited`: whether the registration limit applies (it does to new registrations, not to
    /// remembered ones).
    private func validate(_ regions: [Region], limited: Bool) throws(RegionError) {
        var seen = Set<String>()
        for r in regions {
            if let reason = r.invalidReason { throw RegionError(.invalidRegion, reason) }
            if slotByID[r.id] != nil { throw RegionError(.duplicateRegion, "region \(r.id) is already registered; remove it first (regions.remove) to change it, or give the new one another id") }
            if !seen.insert(r.id).inserted { throw RegionError(.duplicateRegion, "region \(r.id) is given twice in this request; give each region its own id") }
        }
        // An empty add registers nothing, so a program over a limit lowered since is not refused
        // it (docs/protocol.md, `regions.add`).
        if limited, !regions.isEmpty, slots.count + regions.count > limits.maxRegistered {
            throw RegionError(.tooManyRegions, "\(slots.count) registered + \(regions.count) new is more than the limit of \(limits.maxRegistered) regions per program")
        }
    }

    /// Registers `regions` (state unknown until a fix decides it), or none of them.
    public mutating func add(_ regions: [Region]) throws(RegionError) {
        try validate(regions)
        for r in regions { append(RegionRecord(region: r, state: .unknown)) }
    }

    /// Registers remembered regions with their state (after a restart). The first fix
    /// evaluates each of them once (the device may have moved meanwhile). All are kept even past
    /// a registration limit lowered since: the limit stops new registrations (until the program
    /// is below it), it does not delete what was registered.
    public mutating func restore(_ records: [RegionRecord]) throws(RegionError) {
        try validate(records.map(\.region), limited: false)
        for r in records { append(r) }
    }

    private mutating func append(_ record: RegionRecord) {
        var slot = Slot(region: record.region, centerUnit: Geodesy.unitVector(record.region.center))
        slot.state = record.state
        slot.enteredAt = record.state == .inside ? record.enteredAt : nil
        slot.dwellReported = record.dwellReported
        slotByID[record.region.id] = slots.count
        if slot.state == .unknown {
            undecided.insert(slots.count); slot.inUndecided = true
        } else {
            watch.insert(slots.count); slot.inWatch = true
        }
        slots.append(slot)
        indexDirty = true
    }

    /// Unregisters `ids` (all must be registered), or none.
    public mutating func remove(_ ids: [String]) throws(RegionError) {
        var doomed = Set<Int>()
        for id in ids {
            guard let s = slotByID[id] else { throw RegionError(.unknownRegion, "region \(id) is not registered") }
            doomed.insert(s)
        }
        guard !doomed.isEmpty else { return }
        var kept: [Slot] = []
        kept.reserveCapacity(slots.count - doomed.count)
        var remap = [Int](repeating: -1, count: slots.count)
        for (i, s) in slots.enumerated() where !doomed.contains(i) {
            remap[i] = kept.count
            kept.append(s)
        }
        slots = kept
        changed = []
        slotByID = [:]
        for (i, s) in slots.enumerated() { slotByID[s.region.id] = i }
        watch = Set(watch.compactMap { remap[$0] >= 0 ? remap[$0] : nil })
        undecided = Set(undecided.compactMap { remap[$0] >= 0 ? remap[$0] : nil })
        active = []
        reference = nil
        indexDirty = true
    }

    public mutating func removeAll() throws(RegionError) { try remove(slots.map(\.region.id)) }

    // MARK: Fixes

    /// Runs one fix through the regions, appending their events (sorted by time, then id).
    public mutating func handle(_ fix: Fix, into out: inout [RegionEvent]) {
        handle(fix, unit: Geodesy.unitVector(fix.coordinate), into: &out)
    }

    /// The same, with the fix's `Geodesy.unitVector` (computed once per fix by the engine).
    public mutating func handle(_ fix: Fix, unit: SIMD3<Double>, into out: inout [RegionEvent]) {
        // A fix without a position says nothing of where the device went: as `previous` it
        // would hide the segment from the last real position (no pass inferred across it).
        guard fix.coordinate.isValid else { return }
        // Where the device was, whatever its clock says: the regions it may have crossed since.
        let last = previous?.coordinate
        if let p = previous {
            switch fix.time.order(after: p.time) {
            case .later: break
            // One epoch, one evaluation. Out of order is not a clock jump: taken as a gap, each
            // such fix would decide a transition alone.
            case .sameEpoch, .outOfOrder: return
            case .jumpedBack: previous = nil            // the receiver's clock jumped back: a gap
            }
        }
        guard !slots.isEmpty else { previous = fix; previousUnit = unit; return }
        let prev = previous
        generation &+= 1
        evaluating.removeAll(keepingCapacity: true)
        if let cap = limits.maxActive, slots.count > cap {
            if indexDirty {
                index = RegionIndex(centers: slots.map(\.region.center), radii: slots.map(\.region.radius))
                indexDirty = false
                reference = nil
            }
            let moved = reference.map { Geodesy.distance($0, fix.coordinate) } ?? .infinity
            if moved >= safeDistance - RegionMonitor.slack {
                // Re-rank here. Every region whose boundary the segment from the previous fix
                // could have crossed is evaluated for this fix too, however many there are.
                let jump = last.map { Geodesy.distance($0, fix.coordinate) } ?? 0
                let near = index.nearest(to: fix.coordinate, k: cap + 1, within: jump + RegionMonitor.slack)
                active = near.prefix(cap).map(\.slot)
                safeDistance = near.count > cap ? near[cap].key : .infinity
                reference = fix.coordinate
                reranks += 1
                for n in near where slots[n.slot].stamp != generation { slots[n.slot].stamp = generation; evaluating.append(n.slot) }
            }
            for s in active where slots[s].stamp != generation { slots[s].stamp = generation; evaluating.append(s) }
            for s in watch where slots[s].stamp != generation { slots[s].stamp = generation; evaluating.append(s) }
            if RegionRules.canDecide(accuracy: fix.horizontalAccuracy) {
                for s in undecided where slots[s].stamp != generation { slots[s].stamp = generation; evaluating.append(s) }
            }
        } else {
            evaluating.append(contentsOf: slots.indices)
        }
        evaluatedLastFix = evaluating.count
        scratch.removeAll(keepingCapacity: true)
        var step = FixStep(fix: fix, unit: unit, previous: prev, previousUnit: previousUnit)
        for s in evaluating {
            // One access to the slot for all of it: reading its fields one by one around the
            // call copied the whole slot (region, strings and fixes) several times per region.
            let e = slots[s].evaluateRecording(&step, into: &scratch)
            if e.changed { changed.insert(s) }
            switch e.undecided {
            case true?: undecided.insert(s)
            case false?: undecided.remove(s)
            case nil: break
            }
            switch e.watch {
            case true?: watch.insert(s)
            case false?: watch.remove(s)
            case nil: break
            }
        }
        scratch.sort { a, b in
            if a.time != b.time { return a.time < b.time }
            if a.region != b.region { return a.region < b.region }
            return RegionMonitor.rank(a.kind) < RegionMonitor.rank(b.kind)
        }
        out.append(contentsOf: scratch)
        previous = fix
        previousUnit = unit
    }

    static func rank(_ k: RegionEventKind) -> Int {
        switch k {
        case .inside, .outside: 0
        case .enter: 1
        case .dwell: 2
        case .exit: 3
        }
    }
}

extension RegionMonitor.Slot {
    /// `evaluate`, and what the monitor's records and sets need to know of it: whether the
    /// persistent part changed, and whether the slot joins (true) or leaves (false)
    /// `undecided` and `watch`. A slot whose state is unknown is undecided; a known one is
    /// watched until settled.
    mutating func evaluateRecording(_ step: inout FixStep, into events: inout [RegionEvent])
        -> (changed: Bool, undecided: Bool?, watch: Bool?) {
        let before = (state, enteredAt, dwellReported)
        evaluate(&step, into: &events)
        var joinsUndecided: Bool?, joinsWatch: Bool?
        if state == .unknown {
            if !inUndecided { inUndecided = true; joinsUndecided = true }
        } else {
            if inUndecided { inUndecided = false; joinsUndecided = false }
            let watched = !isSettled
            if watched != inWatch { inWatch = watched; joinsWatch = watched }
        }
        return (before != (state, enteredAt, dwellReported), joinsUndecided, joinsWatch)
    }

    func emit(_ kind: RegionEventKind, _ time: Timestamp, _ c: Coordinate, inferred: Bool = false,
              into events: inout [RegionEvent]) {
        switch kind {
        case .enter: guard region.notifyOnEntry else { return }
        case .exit: guard region.notifyOnExit else { return }
        case .inside, .outside: guard region.notifyInitialState else { return }
        case .dwell: break
        }
        events.append(RegionEvent(region: region.id, kind: kind, time: time, coordinate: c, inferred: inferred))
    }

    /// `RegionRules.decidesOutside` for `f`, whose unit vector is `unit`.
    func decidesOutside(_ f: Fix, at unit: SIMD3<Double>) -> Bool {
        guard RegionRules.canDecide(accuracy: f.horizontalAccuracy), let a = f.horizontalAccuracy else { return false }
        var d = BoundedDistance(region.center, f.coordinate, Geodesy.distanceBounds(centerUnit, unit))
        return d.isAtLeast(RegionRules.outsideLimit(radius: region.radius, accuracy: a))
    }

    mutating func evaluate(_ step: inout FixStep, into events: inout [RegionEvent]) {
        let fix = step.fix, prev = step.previous
        let radius = region.radius
        var d = BoundedDistance(region.center, fix.coordinate, Geodesy.distanceBounds(centerUnit, step.unit))
        let a = fix.horizontalAccuracy
        let inside = d.isBelow(radius)
        // `RegionRules.decidesInside` and `decidesOutside`, on the bounded distance.
        var decIn = false, decOut = false
        if RegionRules.canDecide(accuracy: a), let a {
            decIn = d.isAtMost(RegionRules.insideLimit(radius: radius, accuracy: a))
            decOut = !decIn && d.isAtLeast(RegionRules.outsideLimit(radius: radius, accuracy: a))
        }
        let gap = prev.map { fix.time - $0.time }
        if let t = anchor?.time, fix.time - t > RegionRules.maxInferenceGap {
            anchor = nil
        }
        switch state {
        case .unknown:
            if decIn {
                state = .inside
                enteredAt = fix.time
                dwellReported = false
                emit(.inside, fix.time, fix.coordinate, into: &events)
            } else if decOut {
                state = .outside
                emit(.outside, fix.time, fix.coordinate, into: &events)
            }
        case .outside:
            if decIn {
                if evidence == 0 {
                    evidenceStart = fix
                    if case nil = anchor, let p = prev, fix.time - p.time <= RegionRules.maxInferenceGap,
                       decidesOutside(p, at: step.previousUnit) {
                        anchor = p
                    }
                }
                evidence += 1
                if RegionRules.confirms(evidence: evidence, span: fix.time - (evidenceStart ?? fix).time, gap: gap) {
                    let start = evidenceStart ?? fix
                    state = .inside
                    enteredAt = start.time
                    dwellReported = false
                    evidence = 0
                    evidenceStart = nil
                    anchor = nil
                    emit(.enter, start.time, start.coordinate, into: &events)
                }
            } else {
                evidence = 0
                evidenceStart = nil
                if decOut {
                    // Back outside for sure: did the way from the last sure-outside fix pass through?
                    let from = anchor ?? prev.flatMap { decidesOutside($0, at: step.previousUnit) ? $0 : nil }
                    anchor = nil
                    if let from { inferPass(from, &step, distance: &d, into: &events) }
                }
            }
        case .inside:
            if decOut {
                if evidence == 0 { evidenceStart = fix }
                evidence += 1
                if RegionRules.confirms(evidence: evidence, span: fix.time - (evidenceStart ?? fix).time, gap: gap) {
                    let start = evidenceStart ?? fix
                    state = .outside
                    enteredAt = nil
                    evidence = 0
                    evidenceStart = nil
                    emit(.exit, start.time, start.coordinate, into: &events)
                }
            } else {
                evidence = 0
                evidenceStart = nil
            }
        }
        // Not at a fix that may be the first of an exit (evidence pending): the exit would be
        // back-dated to before the dwell, which would tell of a stay that had already ended. If
        // the count resets instead, the fix that resets it is due.
        if state == .inside, evidence == 0, let dwell = region.dwell, !dwellReported,
           let entered = enteredAt, fix.time - entered >= dwell {
            dwellReported = true
            emit(.dwell, fix.time, fix.coordinate, into: &events)
        }
        lastInside = inside
    }

    /// Enter and exit of a region the straight segment `from → to` passes through, both ends
    /// being sure-outside fixes (docs/regions.md, "Crossings between fixes").
    /// `distance`: of `to` from the centre.
    mutating func inferPass(_ from: Fix, _ step: inout FixStep, distance: inout BoundedDistance,
                            into events: inout [RegionEvent]) {
        let to = step.fix
        let radius = region.radius
        let dt = to.time - from.time
        guard dt > 0, dt <= RegionRules.maxInferenceGap else { return }
        let length = step.length(from: from.coordinate)
        guard length / dt <= RegionRules.maxInferenceSpeed else { return }
        // No point of the segment is nearer the centre than `distance − length`: this settles
        // almost every region an outside fix is evaluated for without the plane's trigonometry
        // (and, x − length growing with x, mostly from the distance's lower bound).
        guard distance.low - length < radius, distance.exact() - length < radius else { return }
        guard let crossing = RegionGeometry.segmentCrossing(
            from: from.coordinate, to: to.coordinate, center: region.center, radius: radius) else { return }
        let margin = RegionRules.enterFactor * Swift.max(from.horizontalAccuracy ?? .infinity, to.horizontalAccuracy ?? .infinity)
        guard crossing.closest <= radius - margin else { return }
        let tIn = from.time.adding(seconds: crossing.enter * dt)
        let tOut = from.time.adding(seconds: crossing.exit * dt)
        emit(.enter, tIn, RegionGeometry.interpolate(from.coordinate, to.coordinate, crossing.enter), inferred: true, into: &events)
        if let dwell = region.dwell, (crossing.exit - crossing.enter) * dt >= dwell {
            let f = crossing.enter + dwell / dt
            emit(.dwell, from.time.adding(seconds: f * dt), RegionGeometry.interpolate(from.coordinate, to.coordinate, f), inferred: true, into: &events)
        }
        emit(.exit, tOut, RegionGeometry.interpolate(from.coordinate, to.coordinate, crossing.exit), inferred: true, into: &events)
    }
}

/// One fix as the regions evaluate it: the fix and the one before, their unit vectors, and the
/// segment between them, measured once for every region whose crossing it is checked against
/// (the same inputs give the same length).
struct FixStep {
    let fix: Fix
    let unit: SIMD3<Double>
    let previous: Fix?
    let previousUnit: SIMD3<Double>
    private var from: (UInt64, UInt64)?
    private var measured = 0.0

    init(fix: Fix, unit: SIMD3<Double>, previous: Fix?, previousUnit: SIMD3<Double>) {
        self.fix = fix; self.unit = unit; self.previous = previous; self.previousUnit = previousUnit
    }

    /// `Geodesy.distance(a, fix.coordinate)`.
    mutating func length(from a: Coordinate) -> Double {
        let key = (a.latitude.bitPattern, a.longitude.bitPattern)
        if let from, from == key { return measured }
        from = key
        measured = Geodesy.distance(a, fix.coordinate)
        return measured
    }
}

/// `Geodesy.distance(a, b)` known by its bounds from the chord (`Geodesy.distanceBounds`) until
/// a comparison they do not settle computes it: each comparison answers as it would on
/// `distance`, and most never need it.
struct BoundedDistance {
    let a: Coordinate, b: Coordinate
    private(set) var low: Double, high: Double

    init(_ a: Coordinate, _ b: Coordinate, _ bounds: (low: Double, high: Double)) {
        self.a = a; self.b = b; low = bounds.low; high = bounds.high
    }

    /// The distance itself (from then on the bounds are it).
    mutating func exact() -> Double {
        if low != high {
            let d = Geodesy.distance(a, b)
            low = d; high = d
        }
        return low
    }

    /// `distance < x`.
    mutating func isBelow(_ x: Double) -> Bool {
        if high < x { return true }
        if low >= x { return false }
        return exact() < x
    }

    /// `distance <= x`.
    mutating func isAtMost(_ x: Double) -> Bool {
        if high <= x { return true }
        if low > x { return false }
        return exact() <= x
    }

    /// `distance >= x`.
    mutating func isAtLeast(_ x: Double) -> Bool { !isBelow(x) }
}

/// Planar geometry near a region: an azimuthal equidistant plane about its centre, built from
/// unit vectors. An equirectangular plane collapses near a pole (every meridian meets there, so
/// two fixes on opposite meridians become one point and a pass over the pole is never seen);
/// this one has no seam at the poles or the antimeridian, and keeps distances from the centre
/// exact (the segments it is used on are at most a few kilometres long).
public enum RegionGeometry {
    /// `p` in metres east and north of the centre `c`, whose east and north unit vectors are
    /// `e` and `n`.
    static func plane(_ p: SIMD3<Double>, _ c: SIMD3<Double>, _ e: SIMD3<Double>, _ n: SIMD3<Double>) -> (x: Double, y: Double) {
        let x = (p * e).sum(), y = (p * n).sum()
        let s = (x * x + y * y).squareRoot()
        guard s > 0 else { return (0, 0) }
        let k = Geodesy.earthRadius * atan2(s, (p * c).sum()) / s
        return (x * k, y * k)
    }

    /// Where the segment meets the circle: fractions of the segment (0…1) at which it enters
    /// and leaves it, and its closest distance to the centre; `nil` if it misses the circle.
    public static func segmentCrossing(from a: Coordinate, to b: Coordinate, center: Coordinate, radius: Double)
        -> (enter: Double, exit: Double, closest: Double)? {
        let phi = Geodesy.radians(center.latitude), lambda = Geodesy.radians(center.longitude)
        let c = Geodesy.unitVector(center)
        let e = SIMD3(-sin(lambda), cos(lambda), 0)
        let n = SIMD3(-sin(phi) * cos(lambda), -sin(phi) * sin(lambda), cos(phi))
        let (ax, ay) = plane(Geodesy.unitVector(a), c, e, n)
        let (bx, by) = plane(Geodesy.unitVector(b), c, e, n)
        let dx = bx - ax, dy = by - ay
        let len2 = dx * dx + dy * dy
        guard len2 > 0 else { return nil }
        let tc = Swift.min(1, Swift.max(0, -(ax * dx + ay * dy) / len2))
        let cx = ax + tc * dx, cy = ay + tc * dy
        let closest = (cx * cx + cy * cy).squareRoot()
        guard closest < radius else { return nil }
        // |a + t d|² = R²  →  len2 t² + 2 (a·d) t + |a|² − R² = 0
        let bq = ax * dx + ay * dy, cq = ax * ax + ay * ay - radius * radius
        let disc = bq * bq - len2 * cq
        guard disc >= 0 else { return nil }
        let root = disc.squareRoot()
        let t1 = Swift.max(0, (-bq - root) / len2), t2 = Swift.min(1, (-bq + root) / len2)
        return (t1, t2, closest)
    }

    /// The point a fraction `t` of the way from `a` to `b`, along the great circle (a straight
    /// line in latitude and longitude would miss a pole the two lie either side of).
    public static func interpolate(_ a: Coordinate, _ b: Coordinate, _ t: Double) -> Coordinate {
        let p = Geodesy.unitVector(a) * (1 - t) + Geodesy.unitVector(b) * t
        let horizontal = (p.x * p.x + p.y * p.y).squareRoot()
        return Coordinate(latitude: atan2(p.z, horizontal) * (180 / Double.pi),
                          longitude: horizontal > 0 ? atan2(p.y, p.x) * (180 / Double.pi) : 0)
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
