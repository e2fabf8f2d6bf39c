/// A visit: the device stayed at one place (docs/semantics.md, "Visits").
public struct Visit: Hashable, Sendable {
    public enum Kind: String, Hashable, Sendable { case arrival, departure }
    public var kind: Kind
    /// Time of the first fix of the stay (back-dated; the event is emitted later).
    public var arrival: Timestamp
    /// Time of the last fix of the stay; `nil` in an `arrival` event.
    public var departure: Timestamp?
    /// Robust centre of the stay's fixes.
    public var coordinate: Coordinate
    /// 95 % radius, metres, of the stay's fixes around `coordinate`.
    public var horizontalAccuracy: Double
    /// The id of the program's place it belongs to (docs/places.md); named by the engine's
    /// places part after detection, nil for an approximate program's.
    public var place: UInt64? = nil

    public init(kind: Kind, arrival: Timestamp, departure: Timestamp?, coordinate: Coordinate, horizontalAccuracy: Double) {
        self.kind = kind; self.arrival = arrival; self.departure = departure
        self.coordinate = coordinate; self.horizontalAccuracy = horizontalAccuracy
    }
}

/// Streaming visit detection with O(1) state per subscription (docs/semantics.md, "Visits").
///
/// A *stay* is a run of fixes within `radius` of the stay's running centre. It becomes a visit
/// (an `arrival` event, back-dated) once its still fixes span `dwell` seconds; it ends (a
/// `departure` event) once the fixes outside it outweigh indoor jitter and re-acquisition
/// (`departureIsCertain`) — never because fixes stop. All state is a fixed number of scalars plus
/// fixed-capacity buffers of early fixes, of the recent path and of its half-minute means
/// allocated once at init, so offering a fix never allocates.
public struct VisitDetector: Sendable {
    public struct Parameters: Hashable, Sendable {
        /// A fix farther than this from the stay's centre is outside it, metres.
        public var radius: Double
        /// Fixes of a stay must span this long before the arrival is emitted, seconds.
        public var dwell: Double
        /// The stay's own fixes are those within this distance of its centre: arrival is the
        /// first of them, departure the last, metres.
        public var coreRadius: Double
        /// Consecutive outside fixes needed to end a stay…
        public var departureFixes: Int
        /// …spanning at least this long, seconds (a stay not yet reported as a visit).
        public var departureSeconds: Double
        /// A reported visit ends on outside fixes at least this far from its centre, metres…
        public var departureDistance: Double
        /// …that span this long, seconds…
        public var farDepartureSeconds: Double
        /// …or on outside fixes nearer than that spanning this long, whose own centre is
        /// outside the radius too, seconds.
        public var nearDepartureSeconds: Double
        /// A fix whose receiver reports at least this speed (Doppler) is moving, m/s…
        public var movingSpeed: Double
        /// …and a stay whose early fixes moved more often than this share is not a visit yet.
        public var maximumMovingShare: Double
        /// Without a reported speed, a fix is moving when the stay's early fixes made steady
        /// progress over the last `progressWindow` seconds: at least this speed, net, m/s…
        public var progressSpeed: Double
        /// …over this window, seconds (jitter is bounded: its net displacement does not grow
        /// with the window; walking's does).
        public var progressWindow: Double
        /// Fixes with a 95 % accuracy worse than this are ignored (treated as fix loss), metres.
        public var maximumAccuracy: Double
        /// Until its arrival is emitted, a stay's centre forgets older fixes with this time
        /// constant, so it follows a moving device instead of lagging behind it, seconds.
        public var candidateMemory: Double
        /// A fix within the radius that comes this long or longer after the fix before it is
        /// one of the stay's own, still (a logger that sleeps while it stands), seconds.
        public var sparseGap: Double
        /// Without a speed, a fix is creeping when the fixes this long around it are
        /// `movingSpeed` × their time apart, seconds…
        public var briskWindow: Double
        /// …and at least this far, metres;
        public var briskDistance: Double
        /// or when the fixes this long around it are `progressSpeed` × their time apart, seconds.
        public var symmetricWindow: Double
        /// Without a speed, fixes whose half-minute means (`briskWindow` each) wander round one
        /// point for this long — within `coreRadius` of it, doubling back, making no progress —
        /// are a stay from the first of them, whatever the movement rules say, seconds.
        public var wanderWindow: Double

        public init(radius: Double = 100, dwell: Double = 300, coreRadius: Double = 50,
                    departureFixes: Int = 3, departureSeconds: Double = 10,
                    departureDistance: Double = 200, farDepartureSeconds: Double = 30, nearDepartureSeconds: Double = 300,
                    movingSpeed: Double = 0.5, maximumMovingShare: Double = 0.1,
                    progressSpeed: Double = 0.25, progressWindow: Double = 120,
                    maximumAccuracy: Double = 200, candidateMemory: Double = 30, sparseGap: Double = 120,
                    briskWindow: Double = 30, briskDistance: Double = 25, symmetricWindow: Double = 180,
                    wanderWindow: Double = 600) {
            self.movingSpeed = movingSpeed; self.maximumMovingShare = maximumMovingShare
            self.progressSpeed = progressSpeed; self.progressWindow = progressWindow
            self.radius = radius; self.dwell = dwell; self.coreRadius = coreRadius
            self.departureFixes = departureFixes; self.departureSeconds = departureSeconds
            self.departureDistance = departureDistance
            self.farDepartureSeconds = farDepartureSeconds; self.nearDepartureSeconds = nearDepartureSeconds
            self.maximumAccuracy = maximumAccuracy
            self.candidateMemory = candidateMemory
            self.sparseGap = sparseGap
            self.briskWindow = briskWindow; self.briskDistance = briskDistance
            self.symmetricWindow = symmetricWindow
            self.wanderWindow = wanderWindow
        }
    }

    /// One stay's running statistics in a local east/north plane (metres) around its first fix:
    /// the plane tangent to the globe there, points projected onto it along the Earth's radius.
    /// A stay spans a few hundred metres, where that projection shortens distances by a few
    /// parts in a billion; unlike a latitude/longitude grid scaled by cos(latitude) it has no
    /// seam at the antimeridian and does not collapse near a pole (where every meridian meets,
    /// so fixes either side of the pole became far apart or one point, and a device standing
    /// at the South Pole station departed and arrived again, its centre 24 m off).
    @usableFromInline struct Stay: Hashable, Sendable {
        /// The first fix's latitude and longitude as cosines and sines: its unit vector (up) and
        /// the east and north ones there follow from them (four numbers, not nine: a stay is
        /// copied at every fix).
        var cosLat: Double, sinLat: Double, cosLon: Double, sinLon: Double
        var start: Timestamp
        var lastInside: Timestamp
        /// Last fix within the core radius of the centre (departure time).
        var lastCore: Timestamp
        /// Last of its own fixes known to be still: with a Doppler speed, its last own fix;
        /// without one, the last the movement rules have judged (`symmetricWindow` / 2 later)
        /// and found neither moving nor creeping, or that made too little progress to be
        /// judged at all. The dwell is counted to it.
        var lastStill: Timestamp
        /// The last fix before a silence of at least the dwell that ended within the radius: a
        /// logger that writes nothing while still stood there all along.
        var stoodFrom: Timestamp?
        /// The dwell is counted from no earlier than this: the end of the latest silence the
        /// device moved in (`movedInSilence`).
        var stillFrom: Timestamp
        /// The first of half-minute means that wandered round the stay for `wanderWindow`
        /// (`judgeWander`): the stay's arrival when the movement rules find none.
        var wanderedFrom: Timestamp?
        var count: Int = 0
        // Weighted Welford: weight sum, mean, sum of weighted squared deviations.
        var weight: Double = 0
        var meanX: Double = 0, meanY: Double = 0
        var m2: Double = 0
        var fastX: Double = 0, fastY: Double = 0

        /// A stay starting at `fix`, whose unit vector is `unit`.
        init(_ fix: Fix, _ unit: SIMD3<Double>) {
            // At a pole, where every direction is south or north, east is taken along the
            // meridian 0.
            let h = (unit.x * unit.x + unit.y * unit.y).squareRoot()
            cosLat = h; sinLat = unit.z
            (cosLon, sinLon) = h > 1e-12 ? (unit.x / h, unit.y / h) : (1, 0)
            start = fix.time; lastInside = fix.time; lastCore = fix.time
            lastStill = fix.time
            stillFrom = fix.time
        }

        /// `p` (a unit vector) in the stay's plane, metres east and north of its first fix:
        /// its components along east (−sin λ, cos λ, 0) and north (−sin φ cos λ, −sin φ sin λ,
        /// cos φ). A point on the far hemisphere would fold back onto the plane: it is put out
        /// of reach. Inlined, as `distanceFromCentre`: called out of line, every subscription's
        /// detector copied its stay to the stack to pass it, twice a fix.
        @inline(__always)
        func local(_ p: SIMD3<Double>) -> (x: Double, y: Double) {
            let along = p.x * cosLon + p.y * sinLon  // towards the first fix's meridian
            guard cosLat * along + sinLat * p.z > 0 else { return (.infinity, .infinity) }
            return (Geodesy.earthRadius * (p.y * cosLon - p.x * sinLon),
                    Geodesy.earthRadius * (cosLat * p.z - sinLat * along))
        }

        /// Distance between two points in the stay's plane, metres.
        func distance(_ p: SIMD3<Double>, _ q: SIMD3<Double>) -> Double {
            Self.planarDistance(local(p), local(q))
        }

        /// Distance between two points already in a stay's plane (`local`), metres.
        @inline(__always)
        static func planarDistance(_ a: (x: Double, y: Double), _ b: (x: Double, y: Double)) -> Double {
            ((a.x - b.x) * (a.x - b.x) + (a.y - b.y) * (a.y - b.y)).squareRoot()
        }

        @inline(__always)
        func distanceFromCentre(_ p: SIMD3<Double>) -> Double {
            let q = local(p)
            let dx = q.x - meanX, dy = q.y - meanY
            return (dx * dx + dy * dy).squareRoot()
        }

        /// The centre as a unit vector (to measure it in another stay's plane).
        var centreUnit: SIMD3<Double> { Geodesy.unitVector(centre) }

        var centre: Coordinate {
            let x = meanX / Geodesy.earthRadius, y = meanY / Geodesy.earthRadius
            let u = (1 - x * x - y * y).squareRoot()
            // u·up + x·east + y·north
            let along = u * cosLat - y * sinLat
            let p = SIMD3(along * cosLon - x * sinLon, along * sinLon + x * cosLon, u * sinLat + y * cosLat)
            let horizontal = (p.x * p.x + p.y * p.y).squareRoot()
            return Coordinate(latitude: atan2(p.z, horizontal) * (180 / Double.pi),
                              longitude: horizontal > 0 ? atan2(p.y, p.x) * (180 / Double.pi) : 0)
        }

        /// 95 % radius of the fixes around the centre: for a 2-D normal spread the 95 % radius
        /// is 2.45 σ and the RMS distance √2 σ, so 1.73 × RMS.
        var spread95: Double { weight > 0 ? 1.731 * (m2 / weight).squareRoot() : 0 }

        /// Adds an inside fix: weight 1/accuracy², softly trimmed beyond half the radius so one
        /// far fix cannot drag the centre. Until the stay is confirmed (`memory` > 0), a fast
        /// average with that time constant runs beside the mean; when the two part by more than
        /// the core radius the mean restarts from the fast one, so a device on the move does not
        /// leave a trail of old fixes in the centre.
        mutating func add(_ fix: Fix, _ unit: SIMD3<Double>, distance: Double, radius: Double, coreRadius: Double,
                          memory: Double = 0, stepCap: Double, own: Bool = false) {
            let p = local(unit)
            if memory > 0 {
                if count == 0 {
                    fastX = p.x; fastY = p.y
                } else {
                    // A gap counts as at most `stepCap`: a sparse logger (a fix every few minutes
                    // while still) moves the average a fraction per fix, not all the way.
                    let a = 1 - exp(-min(max(0, fix.time - lastInside), stepCap) / memory)
                    fastX += a * (p.x - fastX); fastY += a * (p.y - fastY)
                    let dx = fastX - meanX, dy = fastY - meanY
                    if (dx * dx + dy * dy).squareRoot() > coreRadius {
                        meanX = fastX; meanY = fastY
                        weight *= 0.05
                        m2 *= 0.05
                    }
                }
            }
            let accuracy = max(fix.horizontalAccuracy ?? VisitDetector.unknownAccuracy, 3)
            var w = 1 / (accuracy * accuracy)
            let half = radius / 2
            if count >= 3 && distance > half { w *= (half / distance) * (half / distance) }
            count += 1
            weight += w
            let dx = p.x - meanX, dy = p.y - meanY
            meanX += dx * w / weight
            meanY += dy * w / weight
            m2 += w * (dx * (p.x - meanX) + dy * (p.y - meanY))
            lastInside = fix.time
            if distance <= coreRadius || own {
                lastCore = fix.time
                if fix.speed != nil || own { lastStill = fix.time }
            }
        }
    }

    public let parameters: Parameters
    @usableFromInline var current: Stay?
    @usableFromInline var confirmed = false
    /// The arrival time emitted for the current stay (its departure repeats it).
    @usableFromInline var arrival = Timestamp(nanoseconds: 0)
    /// Outside fixes since the last inside one, and the tentative next stay they form.
    @usableFromInline var outsideCount = 0
    @usableFromInline var firstOutside = Timestamp(nanoseconds: 0)
    /// Evidence of a departure from a visit, seconds: the time the run of outside fixes spans,
    /// and the time its latest fixes at least `departureDistance` from the centre span (with
    /// how many they are), each step between fixes counted for at most `departureSeconds` so a
    /// dropout inside the run adds little.
    @usableFromInline var outsideEvidence = 0.0
    @usableFromInline var farEvidence = 0.0
    @usableFromInline var farCount = 0
    /// The latest time the device was seen moving: a path fix the movement rules marked moving
    /// or creeping, or the last of `departureFixes` fixes in a row whose receiver reported
    /// `movingSpeed` (one such fix is Doppler noise), and how many are in the current row.
    @usableFromInline var lastMoved = Timestamp(nanoseconds: Int64.min)
    @usableFromInline var movingRow = 0
    /// Whether the run's first fix came after a gap in fixes longer than `departureSeconds`.
    @usableFromInline var runAfterGap = false
    /// The previous fix's time (the step that adds evidence) and unit vector, and the step
    /// before it (the source's cadence).
    @usableFromInline var previousFix = Timestamp(nanoseconds: 0)
    @usableFromInline var previousStep = 0.0
    /// How many steps in a row, up to the previous one, each lasted as long as the one before
    /// it (to a second): a logger writing on a timer.
    @usableFromInline var steadySteps = 0
    /// Whether the previous step covered at least `briskDistance` at `progressSpeed` or more.
    @usableFromInline var previousStepMoved = false
    @usableFromInline var previousUnit = SIMD3<Double>(0, 0, 0)
    /// Whether the previous fix (without a speed) repeated the one before it exactly.
    @usableFromInline var previousRepeated = false
    /// Whether the current fix, and the previous one, ended a step the device walked
    /// (`walkedStep`).
    @usableFromInline var stepWalked = false
    @usableFromInline var previousStepWalked = false
    @usableFromInline var pending: Stay?
    /// Early fixes of the current (unconfirmed) stay, one per `dwell / capacity` seconds, to
    /// back-date the arrival to the first fix near the final centre. Fixed capacity.
    var early = RingBuffer<EarlyFix>(capacity: VisitDetector.earlyCapacity)
    var pendingEarly = RingBuffer<EarlyFix>(capacity: VisitDetector.earlyCapacity)
    /// The recent path, one fix per `dwell / capacity` seconds, whatever stay each belongs to
    /// (fixed capacity: it spans the dwell, more than two progress windows).
    var path = RingBuffer<EarlyFix>(capacity: VisitDetector.earlyCapacity)
    /// The newest path fix judged still or moving (`track`).
    @usableFromInline var judgedUntil = Timestamp(nanoseconds: Int64.min)
    /// The newest path fix the brisk rule has judged (`walkedBriskly`).
    @usableFromInline var briskJudgedUntil = Timestamp(nanoseconds: Int64.min)
    /// The latest standing silence: a step of `briskWindow` or more whose ends are within a
    /// still receiver's scatter (`briskDistance`), a logger paused while the device stood (its
    /// first and last fix's times). Its time is no time to make progress in.
    @usableFromInline var standingSilence = (from: Timestamp(nanoseconds: Int64.min), until: Timestamp(nanoseconds: Int64.min),
                                             unit: SIMD3<Double>(0, 0, 0))
    /// The newest path fix the three-minute rule has judged (`progressed`).
    @usableFromInline var progressJudgedUntil = Timestamp(nanoseconds: Int64.min)
    /// Half-minute means of the recent fixes without a speed, over `wanderWindow`
    /// (`judgeWander`); and the half-minute being summed: its first fix's time and, for each
    /// of its thirds, the sum and count of its fixes' unit vectors.
    var halves: RingBuffer<HalfMinute>
    @usableFromInline var halfStart = Timestamp(nanoseconds: 0)
    @usableFromInline var thirdSums = (SIMD3<Double>(0, 0, 0), SIMD3<Double>(0, 0, 0), SIMD3<Double>(0, 0, 0))
    @usableFromInline var thirdCounts = (0, 0, 0)
    /// The fixes either side of the latest silence of `sparseGap` or more in which fixes were
    /// lost (after fixes every few seconds, or a timer's on the move: `fixesLostOnTheMove`):
    /// the movement rules see only one side of the fixes next to it, so those are not judged
    /// still for want of movement (`track`).
    @usableFromInline var lostFrom = Timestamp(nanoseconds: 0)
    @usableFromInline var lostUntil = Timestamp(nanoseconds: 0)
    /// Whether a fix since the buffer's last entry reported movement (for its next entry).
    @usableFromInline var movedSinceEarly = false
    @usableFromInline var movedSincePendingEarly = false
    static let earlyCapacity = 64
    static let steadyCadenceSteps = 2
    /// The 95 % accuracy a fix without one is taken for, metres (its weight in the centre).
    static let unknownAccuracy = 50.0
    /// Faster than anyone walks (a brisk walk is 1.4–2 m/s): riding or driving, m/s.
    static let ridingSpeed = 2.0
    /// An early fix: its time, its unit vector, and whether the receiver reported movement
    /// (`movingSpeed`) at it or at any fix since the entry before it.
    @usableFromInline typealias EarlyFix = (time: Timestamp, unit: SIMD3<Double>, moved: Bool, crept: Bool)
    /// The fixes of `briskWindow` seconds: the first one's time, their mean as a unit vector,
    /// their RMS distance from it, metres, and the cosine between the steps from the mean of
    /// its first third to its second's and on to its last's (nil when a third has no fix).
    @usableFromInline typealias HalfMinute = (time: Timestamp, unit: SIMD3<Double>, scatter: Double, turning: Double?)
    /// The receiver's clock can jump back (gpsd's bt451 log: 52 minutes). The detector then
    /// takes the fix as one second after the latest and keeps that shift for the fixes after it
    /// (nanoseconds added to their times), so durations go on counting and its events stay in
    /// order, instead of ignoring every fix until the clock is back where it was. A fix less
    /// than `Timestamp.clockJumpBack` older is only out of order and ignored, or the shift
    /// would grow by a second for each.
    @usableFromInline var clockShift: Int64 = 0
    @usableFromInline var latest: Timestamp?

    public init(parameters: Parameters = Parameters()) {
        self.parameters = parameters
        // One more than the window's half-minutes; one (no judgement) for none or past 10,000.
        let n = parameters.wanderWindow / parameters.briskWindow
        halves = RingBuffer(capacity: n.isFinite && n > 0 && n < 10_000 ? Int(n.rounded(.up)) + 1 : 1)
    }

    /// Whether an arrival has been emitted for the current stay (and no departure yet).
    public var isVisiting: Bool { confirmed }

    /// Offers one fix; calls `emit` with an arrival or departure when one is decided.
    public mutating func offer(_ received: Fix, _ emit: (Visit) -> Void) {
        offer(received, unit: Geodesy.unitVector(received.coordinate), emit)
    }

    /// The same, with the fix's unit vector (`Geodesy.unitVector`) computed once per fix by
    /// the caller for every detector: each stay's plane takes the fix as this vector.
    public mutating func offer(_ received: Fix, unit: SIMD3<Double>, _ emit: (Visit) -> Void) {
        if let a = received.horizontalAccuracy, a > parameters.maximumAccuracy { return }
        var fix = received
        fix.time.nanoseconds &+= clockShift
        if let latest {
            // gpsd reports an epoch several times while it fills in: one epoch, one fix (two
            // copies of one outside fix must not count as two of the departure's three).
            switch fix.time.order(after: latest) {
            case .later: break
            case .sameEpoch, .outOfOrder: return
            case .jumpedBack:
                clockShift &+= latest.nanoseconds &- fix.time.nanoseconds &+ 1_000_000_000
                fix.time = latest.adding(seconds: 1)
            }
        }
        latest = fix.time  // from here on every fix is later than every one before it
        if let speed = fix.speed {
            movingRow = speed >= parameters.movingSpeed ? movingRow + 1 : 0
            if movingRow >= parameters.departureFixes { lastMoved = fix.time }
        }
        defer {
            let step = fix.time - previousFix
            steadySteps = abs(step - previousStep) <= 1 ? steadySteps + 1 : 0
            let metres = Geodesy.chordDistance(previousUnit, unit)
            previousStepMoved = metres >= max(parameters.briskDistance, parameters.progressSpeed * step)
            previousStep = step; previousFix = fix.time; previousUnit = unit
        }
        previousStepWalked = stepWalked
        stepWalked = current != nil && walkedStep(fix, unit)
        if fix.speed == nil && fix.time - previousFix >= parameters.sparseGap && (fixesLostOnTheMove || previousStep < parameters.briskWindow / 2) {
            lostFrom = previousFix; lostUntil = fix.time
        }
        // The current stay is changed in place (`current!`), not copied out and back: nearly
        // every fix of every subscription comes here.
        guard case .some = current else { start(fix, unit); track(fix, unit); return }
        track(fix, unit)
        // The movement rules may just have judged the stay's earlier fixes still, completing
        // its dwell: decide that before this fix moves its centre or begins an outside run.
        confirmIfDwelt(emit)
        let d = current!.distanceFromCentre(unit)
        let resumed = d > parameters.radius && resumesAfterStanding(fix, unit, in: current!)
        if d <= parameters.radius || resumed {
            if previousFix >= current!.start && movedInSilence(fix, unit) { current!.stillFrom = fix.time }
            // A sparse still fix moves the centre a step's worth, not all the way to itself.
            let sparse = isSparseStill(fix, unit) || resumed
            if !confirmed && (resumed || (sparse && sleptThrough(fix) && previousFix >= current!.start)) {
                current!.stoodFrom = current!.stoodFrom ?? previousFix
            }
            current!.add(fix, unit, distance: d, radius: parameters.radius, coreRadius: parameters.coreRadius,
                         memory: confirmed ? 0 : parameters.candidateMemory,
                         stepCap: sparse ? parameters.departureSeconds : .infinity, own: sparse)
            // An unconfirmed stay whose centre has moved a radius from its first fix is a device
            // on the move: start afresh here. (Three radii: multipath wander does not get that far.)
            if !confirmed && (current!.meanX * current!.meanX + current!.meanY * current!.meanY).squareRoot() > 3 * parameters.radius {
                start(fix, unit)
                return
            }
            outsideCount = 0
            farCount = 0; outsideEvidence = 0
            if case .some = pending { pending = nil }
            if confirmed {
                return
            }
            remember(fix, unit, in: &early, moved: &movedSinceEarly, stay: current!)
            confirmIfDwelt(emit)
            return
        }
        let stay = current!
        // Outside: one outlier does not end a stay; a confirmed run of outside fixes does.
        if outsideCount == 0 {
            let gap = fix.time - previousFix
            // A gap is a dropout: longer than `departureSeconds` and than twice the step
            // before it (a logger's cadence of a fix every minute or two is no dropout).
            runAfterGap = gap > parameters.departureSeconds && gap > 2 * previousStep
            // Unseen movement: fixes lost while the device went on (out of a building, through
            // a tunnel) come back farther than a slow walk or a drift gets in that time.
            if runAfterGap,
               stay.distance(previousUnit, unit) >= max(parameters.movingSpeed * gap, parameters.coreRadius) {
                lastMoved = fix.time
            }
        }
        let step = outsideCount == 0 ? 0 : min(fix.time - previousFix, parameters.departureSeconds)
        outsideCount += 1
        outsideEvidence += step
        if d >= parameters.departureDistance {
            // A sparse logger's fix that crept there from a reported visit (a silence of
            // `sparseGap` or more, crossed slower than a slow walk) is no evidence of leaving:
            // the far run starts again at it.
            if farCount == 0 || (confirmed && isSparseStill(fix, unit)
                    && stay.distance(previousUnit, unit) < parameters.progressSpeed * (fix.time - previousFix)) {
                farEvidence = 0
                farCount = 1
            } else {
                farEvidence += step
                farCount += 1
            }
        } else {
            farCount = 0
        }
        var standingEndsStay = false
        if outsideCount == 1 {
            firstOutside = fix.time
            pending = Stay(fix, unit)
            pending!.add(fix, unit, distance: 0, radius: parameters.radius, coreRadius: parameters.coreRadius,
                         stepCap: parameters.departureSeconds)
            pendingEarly.removeAll()
            movedSincePendingEarly = false
            remember(fix, unit, in: &pendingEarly, moved: &movedSincePendingEarly, stay: pending!)
        } else if var p = pending {
            let dp = p.distanceFromCentre(unit)
            standingEndsStay = resumesAfterStanding(fix, unit, in: p)
            if dp <= parameters.radius || standingEndsStay {
                if standingEndsStay || (isSparseStill(fix, unit) && sleptThrough(fix) && previousFix >= p.start) {
                    p.stoodFrom = p.stoodFrom ?? previousFix
                }
                p.add(fix, unit, distance: dp, radius: parameters.radius, coreRadius: parameters.coreRadius,
                      memory: parameters.candidateMemory, stepCap: parameters.departureSeconds,
                      own: isSparseStill(fix, unit) || standingEndsStay)
                remember(fix, unit, in: &pendingEarly, moved: &movedSincePendingEarly, stay: p)
            } else {
                p = Stay(fix, unit)
                p.add(fix, unit, distance: 0, radius: parameters.radius, coreRadius: parameters.coreRadius,
                      stepCap: parameters.departureSeconds)
                pendingEarly.removeAll()
                movedSincePendingEarly = false
                remember(fix, unit, in: &pendingEarly, moved: &movedSincePendingEarly, stay: p)
            }
            pending = p
            // A reported visit ends so only when the place stood at is another one.
            if standingEndsStay && confirmed {
                standingEndsStay = lastMoved >= stay.lastCore && stay.distanceFromCentre(p.centreUnit) > parameters.radius
            }
        }
        // A silence spanning the dwell at the tentative next stay, with no progress over it, is
        // the device standing there: a stay not yet reported has ended, however short the run.
        guard standingEndsStay || (outsideCount >= parameters.departureFixes
                        && fix.time - firstOutside >= parameters.departureSeconds) else { return }
        // A reported visit, and any stay whose outside run began as fixes came back after a
        // dropout (a receiver re-acquiring off), needs the stronger evidence.
        if !standingEndsStay && (confirmed || runAfterGap) && !departureIsCertain(from: stay, at: fix.time) {
            if confirmed && hasDrifted(from: stay, at: fix.time) { followDrift() }
            return
        }
        if confirmed {
            emit(Visit(kind: .departure, arrival: arrival, departure: stay.lastCore,
                       coordinate: stay.centre, horizontalAccuracy: stay.spread95))
        }
        current = pending
        swap(&early, &pendingEarly)
        pendingEarly.removeAll()
        movedSinceEarly = movedSincePendingEarly
        pending = nil
        confirmed = false
        outsideCount = 0
        farCount = 0; outsideEvidence = 0
        // The new stay may already have spanned the dwell (e.g. a stop whose first fixes came
        // in as an outside run): decide it now.
        confirmIfDwelt(emit)
    }

    /// Whether the current run of outside fixes ends a reported visit: its latest fixes are
    /// far (`departureDistance`) and span `farDepartureSeconds`, or the whole run spans
    /// `nearDepartureSeconds` (or, sparse, `sparseDepartureFixes` fixes over twice that) and
    /// the tentative next stay it forms is itself outside the radius. Indoor multipath that wanders 100–115 m out for a minute or two, or a receiver
    /// re-acquiring a few hundred metres off for seconds after a dropout, is neither.
    func departureIsCertain(from stay: Stay, at time: Timestamp) -> Bool {
        if farCount >= parameters.departureFixes && farEvidence >= parameters.farDepartureSeconds { return true }
        return (!confirmed || lastMoved >= stay.lastCore) && nearRunIsLong(from: stay, at: time)
    }

    /// The run of outside fixes forms a place of its own: its centre is outside the radius and
    /// it spans `nearDepartureSeconds` of evidence (or, sparse, `sparseDepartureFixes` fixes
    /// over twice that).
    func nearRunIsLong(from stay: Stay, at time: Timestamp) -> Bool {
        guard let p = pending, stay.distanceFromCentre(p.centreUnit) > parameters.radius else { return false }
        return outsideEvidence >= parameters.nearDepartureSeconds
            || (outsideCount >= sparseDepartureFixes && time - firstOutside >= 2 * parameters.nearDepartureSeconds)
    }

    /// A reported visit's fixes that settled outside its radius with no movement since its
    /// last fix within the core: the position drifted (indoor multipath, a receiver's slow
    /// drift), the device did not leave.
    func hasDrifted(from stay: Stay, at time: Timestamp) -> Bool {
        lastMoved < stay.lastCore && nearRunIsLong(from: stay, at: time)
    }

    /// Moves the visit's centre to where its fixes drifted (the tentative next stay's centre),
    /// keeping the visit: the run's fixes become its own, and its core is judged from there.
    mutating func followDrift() {
        guard var s = current, let p = pending else { return }
        let q = s.local(p.centreUnit)
        s.meanX = q.x; s.meanY = q.y
        s.weight = p.weight; s.m2 = p.m2
        s.count += p.count
        s.lastInside = p.lastInside
        s.lastCore = max(s.lastCore, p.lastCore)
        s.lastStill = max(s.lastStill, p.lastStill)
        current = s
        pending = nil
        outsideCount = 0
        farCount = 0; outsideEvidence = 0
    }

    /// A sparse logger (a fix every few minutes) never gathers `nearDepartureSeconds` of
    /// evidence counted `departureSeconds` a step: its run of outside fixes ends a visit once
    /// it has this many fixes spanning twice that time, a stay next door in its own right.
    var sparseDepartureFixes: Int { parameters.departureFixes + 2 }

    /// Emits the arrival once the stay's own fixes — from the first to the last within the
    /// core radius — span the dwell time. The cheap check on the whole stay's span comes first;
    /// the scan of the early fixes (≤ 64) runs only once that has passed.
    mutating func confirmIfDwelt(_ emit: (Visit) -> Void) {
        guard !confirmed, let s = current, s.count >= 2 else { return }
        var found: Timestamp?
        if s.lastStill - s.start >= parameters.dwell {
            found = arrivalTime(of: s)
            if let a = found, s.count < 3 || s.lastStill - max(a, firstStill(of: s, from: a), s.stillFrom) < parameters.dwell {
                found = nil
            }
            // A silence spanning the dwell at the place is the stay, whatever the fixes round it.
            if found == nil { found = s.stoodFrom }
        }
        // Fixes wandering round the place are the stay from the first of them, not before.
        if found == nil { found = s.wanderedFrom }
        guard let arrival = found else { return }
        confirmed = true
        self.arrival = arrival
        emit(Visit(kind: .arrival, arrival: arrival, departure: nil, coordinate: s.centre, horizontalAccuracy: s.spread95))
    }

    mutating func start(_ fix: Fix, _ unit: SIMD3<Double>) {
        var s = Stay(fix, unit)
        s.add(fix, unit, distance: 0, radius: parameters.radius, coreRadius: parameters.coreRadius,
              stepCap: parameters.departureSeconds)
        current = s
        confirmed = false
        outsideCount = 0
        farCount = 0; outsideEvidence = 0
        pending = nil
        early.removeAll()
        movedSinceEarly = false
        remember(fix, unit, in: &early, moved: &movedSinceEarly, stay: s)
    }

    /// Keeps at most `earlyCapacity` early fixes of `stay`, spaced `dwell / capacity` apart. When
    /// the buffer is full its oldest fix gives way if it is no longer near the stay's centre,
    /// moved, or more than `maximumMovingShare` of the buffer moved: a stay that followed the
    /// device on a slow walk (its centre moves, unconfirmed), or that it paced about before it
    /// settled, would otherwise fill the buffer with the walk, and the fixes where it stops —
    /// its arrival — would never be kept. The oldest still fix near the centre, with few moving
    /// after it, stays: it is the arrival.
    func remember(_ fix: Fix, _ unit: SIMD3<Double>, in buffer: inout RingBuffer<EarlyFix>, moved: inout Bool, stay: Stay) {
        if let speed = fix.speed, speed >= parameters.movingSpeed { moved = true }
        if let last = buffer.last, fix.time - last.time < parameters.dwell / Double(Self.earlyCapacity) { return }
        if buffer.isFull {
            guard buffer[0].moved || stay.distanceFromCentre(buffer[0].unit) > parameters.coreRadius
                    || movedMoreThanShare(buffer) else { return }
            buffer.removeFirst()
        }
        buffer.append((fix.time, unit, moved, false))
        moved = false
    }

    /// Whether more than `maximumMovingShare` of the fixes in `buffer` moved.
    func movedMoreThanShare(_ buffer: RingBuffer<EarlyFix>) -> Bool {
        var moved = 0
        for e in buffer where e.moved { moved += 1 }
        return Double(moved) > parameters.maximumMovingShare * Double(buffer.count)
    }

    /// Whether `fix` (without a speed) ends a silence of at least the dwell that began at
    /// `stay`'s latest fix, no farther from that fix than half the progress a slow walk makes
    /// in the silence (`progressSpeed` × the time / 2, the still-at-once test of `track`) and
    /// three radii: a logger that writes nothing while still wakes as the device moves on and
    /// writes its first fix late, up to a few hundred metres on. A walk or a drive with the
    /// fix lost gets farther.
    func resumesAfterStanding(_ fix: Fix, _ unit: SIMD3<Double>, in stay: Stay) -> Bool {
        let silence = fix.time - previousFix
        guard fix.speed == nil, sleptThrough(fix), stay.lastInside == previousFix else { return false }
        let apart = stay.distance(previousUnit, unit)
        // After fixes every few seconds the logger paused as the device stopped (a bike
        // computer's auto-pause): a silence crossed slower than a slow walk, within the radius,
        // is the stay (the rider walked the bike off).
        if previousStep < parameters.briskWindow / 2 && apart <= min(parameters.progressSpeed * silence, parameters.radius) {
            return true
        }
        return apart <= min(parameters.progressSpeed * silence / 2, 3 * parameters.radius)
    }

    /// Whether the fixes stopped right after a step made on the move by a logger on a timer:
    /// the last `steadyCadenceSteps` + 1 steps as long as one another (to a second), the last
    /// covering `briskDistance` at `progressSpeed` or more. A timer writes while standing as
    /// while moving, so its silence mid-walk is fixes lost and says nothing of where the
    /// device went; one that pauses when the device stops (a bike computer) does so after a
    /// still step.
    var fixesLostOnTheMove: Bool { steadySteps >= Self.steadyCadenceSteps && previousStepMoved }

    /// Whether `fix` ends a silence of fixes lost (`sparseGap` or more after fixes every few
    /// seconds) farther from the fix before it than a still receiver's fixes scatter (the
    /// radius) and than a slow walk gets meanwhile: the device moved in it.
    func movedInSilence(_ fix: Fix, _ unit: SIMD3<Double>) -> Bool {
        let silence = fix.time - previousFix
        return silence >= parameters.sparseGap && previousStep < parameters.briskWindow / 2
            && Geodesy.chordDistance(previousUnit, unit) >= max(parameters.progressSpeed * silence, parameters.radius)
    }

    /// Whether `fix` ends a silence of at least the dwell that the logger slept through.
    func sleptThrough(_ fix: Fix) -> Bool {
        fix.time - previousFix >= parameters.dwell && !fixesLostOnTheMove
    }

    /// Whether `fix` is a sparse logger's still fix: without a speed (a receiver with Doppler
    /// says whether it moves), `sparseGap` or more after the fix before it, not at the end of a
    /// walked step (`walkedStep`). After fixes every
    /// few seconds (a step before under `briskWindow` / 2), a silence is fixes lost, and the
    /// fix is still only when nearer than a slow walk (`progressSpeed`) gets meanwhile; after
    /// a timer logger's step made on the move (`fixesLostOnTheMove`), it is fixes lost too,
    /// and the fix is not known still: the silence says nothing of where the device went.
    func isSparseStill(_ fix: Fix, _ unit: SIMD3<Double>) -> Bool {
        let silence = fix.time - previousFix
        return fix.speed == nil && !stepWalked && silence >= parameters.sparseGap
            && (previousStep >= parameters.briskWindow / 2 ? !fixesLostOnTheMove
                : Geodesy.chordDistance(previousUnit, unit) < parameters.progressSpeed * silence)
    }

    /// Whether `fix` (without a speed) ends a step of at least `briskWindow` — no fix inside it
    /// for the brisk rule to see — and no longer than twice `progressWindow` (a logger asleep is
    /// no evidence), covered at walking speed: the fix before it at least `movingSpeed` × the
    /// step, `briskDistance` and twice the fix's accuracy away (50 m without one, the accuracy
    /// such a fix is taken for). A still receiver's jitter does not grow with the time between
    /// fixes; a walk's displacement does.
    func walkedStep(_ fix: Fix, _ unit: SIMD3<Double>) -> Bool {
        let step = fix.time - previousFix
        guard fix.speed == nil, step >= parameters.briskWindow, step <= 2 * parameters.progressWindow else { return false }
        return Geodesy.chordDistance(previousUnit, unit)
            >= max(parameters.movingSpeed * step, parameters.briskDistance, fix.horizontalAccuracy.map { 2 * $0 } ?? Self.unknownAccuracy)
    }

    /// The first early fix from `arrival` on within the core and neither moving nor creeping:
    /// the dwell counts from it (the arrival is back-dated further, to where the device got to).
    func firstStill(of stay: Stay, from arrival: Timestamp) -> Timestamp {
        early.first(where: { $0.time >= arrival && !$0.moved && !$0.crept
                              && stay.distanceFromCentre($0.unit) <= parameters.coreRadius })?.time ?? arrival
    }

    /// The stay's first own fix: the first remembered fix within the core radius of the
    /// centre that did not move; `nil` when none is — the device was moving through, not
    /// staying — or when more than `maximumMovingShare` of the remembered fixes since then
    /// moved: stop-and-go through a car park, a market or a queue, not a stay.
    func arrivalTime(of stay: Stay) -> Timestamp? {
        guard let first = early.firstIndex(where: { !$0.moved && stay.distanceFromCentre($0.unit) <= parameters.coreRadius })
        else { return nil }
        var moved = 0
        for e in early[first...] where e.moved { moved += 1 }
        guard Double(moved) <= parameters.maximumMovingShare * Double(early.count - first) else { return nil }
        return max(early[first].time, stay.start)
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
