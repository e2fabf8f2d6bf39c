import Foundation
@testable import LocationCore
import Testing

/// The approximate-location stage against the attacks of docs/privacy.md: averaging, pooling,
/// reconnecting, boundary watching, and leaks through visits and significant changes.
@Suite struct ApproximateLocationTests {
    static let secret: UInt64 = 0x5EED_1234_ABCD_0001  // the fixed test seed
    static let grid = PrivacyGrid(secret: secret)

    /// `c` moved by metres north and east.
    static func offset(_ c: Coordinate, north: Double, east: Double) -> Coordinate {
        Coordinate(latitude: c.latitude + north / 111_320,
                   longitude: c.longitude + east / (111_320 * cos(c.latitude * .pi / 180)))
    }

    /// Deterministic gaussian noise (Box–Muller over splitmix64).
    struct Noise {
        var state: UInt64
        mutating func uniform() -> Double { Double(PrivacyGrid.splitMix(&state) >> 11) / Double(1 << 53) + 1e-12 }
        mutating func gaussian(_ sigma: Double) -> Double { sigma * (-2 * log(uniform())).squareRoot() * cos(2 * .pi * uniform()) }
    }

    /// 24 h of 1 Hz fixes of a stationary device at `truth` with 5 m (1σ) noise.
    static func stationary(at truth: Coordinate, seconds: Int = 86_400, seed: UInt64 = 7) -> [Fix] {
        var noise = Noise(state: seed)
        return (0..<seconds).map { i in
            let c = offset(truth, north: noise.gaussian(5), east: noise.gaussian(5))
            return fix(at: Double(i), c, accuracy: 12)
        }
    }

    static func engine() -> Engine {
        var e = Engine()
        e.privacy = ApproximateLocation(grid: grid)
        return e
    }

    static var approximate: SubscriptionOptions {
        var o = SubscriptionOptions()
        o.accuracy = .approximate
        return o
    }

    static func mean(_ cs: [Coordinate]) -> Coordinate {
        Coordinate(latitude: cs.map(\.latitude).reduce(0, +) / Double(cs.count),
                   longitude: cs.map(\.longitude).reduce(0, +) / Double(cs.count))
    }

    static func median(_ cs: [Coordinate]) -> Coordinate {
        func med(_ v: [Double]) -> Double { let s = v.sorted(); return s[s.count / 2] }
        return Coordinate(latitude: med(cs.map(\.latitude)), longitude: med(cs.map(\.longitude)))
    }

    /// A truth 1.1 km from the centre of its cell under the test secret. (No snapping can keep
    /// every position ≥ 1 km away: a device near a cell centre is reported near itself; what the
    /// stage guarantees is that averaging never gets closer than the cell centre. docs/privacy.md.)
    static var truth: Coordinate {
        let c = grid.centre(of: grid.cell(of: Coordinate(latitude: 52.52, longitude: 13.40)).cell)
        return offset(c, north: 780, east: -780)
    }

    @Test func averagingOnePersistentProgramAndThreePooledNeverBeatsTheCell() {
        var e = Self.engine()
        let a = SubscriberID(1), b = SubscriberID(2), c = SubscriberID(3)
        _ = e.handle(.subscribe(a, Self.approximate))
        var delivered: [SubscriberID: [Fix]] = [:]
        for (i, f) in Self.stationary(at: Self.truth).enumerated() {
            // b joins after 3 h; c reconnects every hour (a fresh subscription each time).
            if i == 3 * 3600 { _ = e.handle(.subscribe(b, Self.approximate)) }
            if i % 3600 == 0 { _ = e.handle(.unsubscribe(c)); _ = e.handle(.subscribe(c, Self.approximate)) }
            for d in e.handle(.fix(f)) { if case .location(let x) = d.event { delivered[d.subscriber, default: []].append(x) } }
        }
        let one = delivered[a]!.map(\.coordinate)
        let pooled = [a, b, c].flatMap { delivered[$0]!.map(\.coordinate) }
        // Rate limit: one fix per 10 minutes per subscription.
        #expect(delivered[a]!.count == 144)
        for (name, set) in [("one", one), ("pooled", pooled)] {
            let dMean = Geodesy.distance(Self.mean(set), Self.truth)
            let dMedian = Geodesy.distance(Self.median(set), Self.truth)
            #expect(dMean >= 1000 && dMedian >= 1000, "\(name): mean \(dMean) m, median \(dMedian) m")
        }
        // Every report is the same point (the cell centre): more samples add nothing.
        #expect(Set(pooled).count == 1)
        // Speed, course, altitude withheld; accuracy honest (the device is within it).
        let f = delivered[a]![0]
        #expect(f.speed == nil && f.course == nil && f.altitudeMSL == nil && f.altitudeHAE == nil && f.verticalAccuracy == nil)
        #expect(f.horizontalAccuracy! >= Geodesy.distance(f.coordinate, Self.truth))
    }

    /// For many positions and secrets: the average of a day of reports is exactly the cell
    /// centre — no closer to the truth than a single report.
    @Test func averagingConvergesToTheCellCentreNotTheTruth() {
        var noise = Noise(state: 99)
        for k in 0..<20 {
            var e = Engine()
            e.privacy = ApproximateLocation(grid: PrivacyGrid(secret: UInt64(k) &* 0x9E37_79B9))
            _ = e.handle(.subscribe(SubscriberID(1), Self.approximate))
            let truth = Self.offset(Coordinate(latitude: 48, longitude: 11), north: noise.uniform() * 20_000, east: noise.uniform() * 20_000)
            var reports: [Coordinate] = []
            for f in Self.stationary(at: truth, seconds: 6 * 3600, seed: UInt64(k)) {
                reports += e.handle(.fix(f)).locations(for: SubscriberID(1)).map(\.coordinate)
            }
            let single = Geodesy.distance(reports[0], truth)
            #expect(abs(Geodesy.distance(Self.mean(reports), truth) - single) < 1e-6)
            #expect(single <= e.privacy.grid.reportedAccuracy)
        }
    }

    /// Parked 5 m from a cell boundary, on either side, arriving from the same direction: the
    /// reports are the same, and a day of GPS noise across the boundary never flips the cell.
    @Test func parkedFiveMetresFromABoundaryDoesNotRevealTheSide() {
        // The boundary between the truth's cell and the cell south of it.
        let base = Self.grid.centre(of: Self.grid.cell(of: Coordinate(latitude: 52.52, longitude: 13.40)).cell)
        let boundary = Self.offset(base, north: -1000, east: 0)
        var outcomes: [[Coordinate]] = []
        for side in [5.0, -5.0] {
            var e = Self.engine()
            _ = e.handle(.subscribe(SubscriberID(1), Self.approximate))
            var reports: [Coordinate] = []
            // Drive in from 3 km north at 15 m/s, then park.
            for i in 0..<200 {
                let c = Self.offset(boundary, north: 3000 - Double(i) * 15 + side, east: 0)
                reports += e.handle(.fix(fix(at: Double(i), c, accuracy: 8))).locations(for: SubscriberID(1)).map(\.coordinate)
            }
            let parked = Self.offset(boundary, north: side, east: 0)
            var cells = Set<PrivacyGrid.Cell>()
            for f in Self.stationary(at: parked, seed: 3) {
                let g = Fix(time: f.time.adding(seconds: 200), coordinate: f.coordinate, mode: .threeD, horizontalAccuracy: 8)
                reports += e.handle(.fix(g)).locations(for: SubscriberID(1)).map(\.coordinate)
                cells.insert(e.privacy.cell!)
            }
            #expect(cells.count == 1, "the cell flipped while parked")
            outcomes.append(reports)
        }
        #expect(outcomes[0] == outcomes[1])
    }

    @Test func visitsAndSignificantChangesCarryOnlyTheCellAndCoarseTimes() {
        var e = Self.engine()
        var o = Self.approximate
        o.events = [.visits, .significant]
        _ = e.handle(.subscribe(SubscriberID(1), o))
        var events: [Event] = []
        // A 40-minute stay, a 5 km drive south, another stay.
        var t = 0.0
        var fixes: [Fix] = []
        for f in Self.stationary(at: Self.truth, seconds: 2400, seed: 5) { fixes.append(f); t = 2400 }
        for i in 0..<340 { fixes.append(fix(at: t + Double(i), Self.offset(Self.truth, north: -Double(i) * 15, east: 0), accuracy: 8)) }
        let second = Self.offset(Self.truth, north: -5100, east: 0)
        for f in Self.stationary(at: second, seconds: 2400, seed: 6) {
            fixes.append(Fix(time: f.time.adding(seconds: t + 340), coordinate: f.coordinate, mode: .threeD, horizontalAccuracy: 12))
        }
        for f in fixes { events += e.handle(.fix(f)).map(\.event) }
        var visits = 0, significant = 0
        for ev in events {
            switch ev {
            case .visit(let v):
                visits += 1
                #expect(Self.isCellCentre(v.coordinate))
                #expect(v.arrival.nanoseconds % 900_000_000_000 == 0)
                #expect(v.departure.map { $0.nanoseconds % 900_000_000_000 == 0 } ?? true)
                #expect(v.horizontalAccuracy == Self.grid.reportedAccuracy)
            case .significant(let f):
                significant += 1
                #expect(Self.isCellCentre(f.coordinate))
                #expect(f.time.nanoseconds % 900_000_000_000 == 0)
            default: break
            }
        }
        #expect(visits >= 2 && significant >= 2, "visits \(visits), significant \(significant)")
    }

    /// A device parked within GPS noise of the antimeridian (Taveuni, Fiji) keeps one cell: the
    /// cells go round the globe without a seam, so noise across ±180° flips nothing.
    @Test func parkedOnTheAntimeridianKeepsItsCell() {
        for secret in [Self.secret, 0, 42] {
            var privacy = ApproximateLocation(grid: PrivacyGrid(secret: secret))
            var changes = 0
            for i in 0..<100 {
                let longitude = i % 2 == 0 ? 179.99995 : -179.99995  // 10 m apart
                if privacy.offer(fix(at: Double(i), Coordinate(latitude: -16.8, longitude: longitude), accuracy: 8)) { changes += 1 }
            }
            #expect(changes == 1, "secret \(secret): the first fix sets the cell, nothing moves it")
        }
    }

    /// A drive east across the antimeridian changes cell as anywhere else, and every reported
    /// centre is a valid coordinate within the reported accuracy of the truth.
    @Test func crossingTheAntimeridianIsLikeCrossingAnyBoundary() {
        var privacy = ApproximateLocation(grid: Self.grid)
        var changes = 0
        var previous: PrivacyGrid.Cell?
        for i in 0...2000 {
            // 20 km at 10 m per fix, from 179.9° east to 179.91° west.
            var longitude = 179.9 + Double(i) * 10 / (111_320 * cos(16.8 * .pi / 180))
            if longitude >= 180 { longitude -= 360 }
            let truth = Coordinate(latitude: -16.8, longitude: longitude)
            if privacy.offer(fix(at: Double(i), truth, accuracy: 8)) { changes += 1 }
            let cell = privacy.cell!
            let centre = Self.grid.centre(of: cell)
            #expect((-180..<180).contains(centre.longitude))
            #expect(Geodesy.distance(centre, truth) <= Self.grid.reportedAccuracy, "fix \(i)")
            if let previous, previous != cell {
                #expect(Geodesy.distance(Self.grid.centre(of: previous), centre) < 2 * Self.grid.cellSize + 1)
            }
            previous = cell
        }
        // 20 km over ~2 km cells: about ten changes, none of them flips back.
        #expect((9...12).contains(changes), "\(changes) changes")
    }

    /// Every cell is at least `cellSize` wide (and the row around a pole is one cell), and every
    /// centre is a valid coordinate, at any latitude and longitude.
    @Test func cellsAreWholeAndCentresValidFromPoleToPole() {
        for secret: UInt64 in [Self.secret, 0, 1, 42, 0xFFFF_FFFF_FFFF_FFFF] {
            let grid = PrivacyGrid(secret: secret)
            var latitude = -90.0
            while latitude <= 90 {
                for longitude in stride(from: -180.0, to: 180.0, by: 7.3) + [179.9999999, -180] {
                    let c = Coordinate(latitude: latitude, longitude: longitude)
                    let (cell, inset) = grid.cell(of: c)
                    let centre = grid.centre(of: cell)
                    #expect((-90...90).contains(centre.latitude) && (-180..<180).contains(centre.longitude), "\(c) → \(centre)")
                    #expect(inset >= 0 && inset <= 2 * grid.cellSize + 1e-6)
                    #expect(grid.cell(of: centre).cell == cell, "\(c): the centre lies in its cell")
                    // The reported accuracy covers the whole cell, whatever its width.
                    #expect(Geodesy.distance(c, centre) <= grid.reportedAccuracy(of: cell), "\(c)")
                }
                latitude += 0.37
            }
            // A polar cap reaches at least a row from its pole, whatever the secret puts its edge:
            // no cell around a pole is smaller than a cell elsewhere.
            for north in [true, false] {
                let pole = Coordinate(latitude: north ? 90 : -90, longitude: 0)
                let cap = grid.cell(of: pole).cell
                let edge = Coordinate(latitude: north ? 90 - grid.cellSize / 111_320 : -90 + grid.cellSize / 111_320, longitude: 123)
                #expect(grid.cell(of: edge).cell == cap, "secret \(secret): the cap is smaller than a row")
                #expect(grid.centre(of: cap) == pole)
            }
        }
        // Near the south pole (where equal-angle cells would be a few hundred metres wide) a
        // cell is as wide as anywhere else.
        let grid = PrivacyGrid(secret: 0)
        let a = Coordinate(latitude: -89.9, longitude: 0)
        let row = grid.cell(of: a).cell.row
        let rowWidth = Geodesy.distance(Coordinate(latitude: grid.centre(of: grid.cell(of: a).cell).latitude, longitude: 0),
                                        Coordinate(latitude: grid.centre(of: grid.cell(of: a).cell).latitude, longitude: 1))
        let cellWidth = rowWidth * 360 / Double(grid.columns(row: row))
        #expect(grid.columns(row: row) == 1 || cellWidth >= grid.cellSize, "\(cellWidth) m")
    }

    /// A fix the grid calls `margin` inside its cell is that far from every point outside it,
    /// measured on the globe: the hysteresis promises 500 m, not 500 m of a column's share of
    /// its row. Columns are cut at a row's middle latitude, so near a pole a row's poleward
    /// edge is a third narrower than its middle; a fraction of the column there is fewer metres.
    @Test func aFixCalledMarginInsideIsThatFarFromTheCellsEdgesNearThePoles() {
        func destination(_ c: Coordinate, bearing: Double, metres: Double) -> Coordinate {
            let phi = c.latitude * .pi / 180, lambda = c.longitude * .pi / 180
            let d = metres / Geodesy.earthRadius, theta = bearing * .pi / 180
            let phi2 = asin(sin(phi) * cos(d) + cos(phi) * sin(d) * cos(theta))
            let lambda2 = lambda + atan2(sin(theta) * sin(d) * cos(phi), cos(d) - sin(phi) * sin(phi2))
            var longitude = lambda2 * 180 / .pi
            longitude -= 360 * ((longitude + 180) / 360).rounded(.down)
            return Coordinate(latitude: phi2 * 180 / .pi, longitude: longitude)
        }
        var checked = 0
        for secret: UInt64 in [Self.secret, 1, 7, 42] {
            let grid = PrivacyGrid(secret: secret)
            for north in [true, false] {
                for degreesFromPole in stride(from: 0.02, through: 0.3, by: 0.0023) {
                    for longitude in stride(from: -180.0, to: 180.0, by: 1.3) {
                        let c = Coordinate(latitude: north ? 90 - degreesFromPole : -90 + degreesFromPole, longitude: longitude)
                        let (cell, inset) = grid.cell(of: c)
                        guard inset >= grid.margin else { continue }
                        checked += 1
                        for bearing in stride(from: 0.0, to: 360, by: 15) {
                            // 1 % short: the grid's metres per degree are the equator's, 0.1 % more
                            // than the mean sphere's.
                            let d = destination(c, bearing: bearing, metres: grid.margin * 0.99)
                            guard grid.cell(of: d).cell == cell else {
                                Issue.record("secret \(secret): \(c) is called \(inset) m inside its cell, but \(d), \(Geodesy.distance(c, d)) m away, is in another")
                                return
                            }
                        }
                    }
                }
            }
        }
        #expect(checked > 500)
    }

    /// Walking out of a cell near a pole (to just inside the hysteresis margin) and round the
    /// pole, the device is never farther from its cell's centre than that cell's reported
    /// accuracy (what is shown is the cell at its epoch's start, when the same holds).
    @Test func nearAPoleTheReportedAccuracyHolds() {
        for secret: UInt64 in [Self.secret, 1, 7, 42, 99] {
            let grid = PrivacyGrid(secret: secret)
            var privacy = ApproximateLocation(grid: grid)
            var t = 0.0
            for latitude in stride(from: 90.0, through: 89.9, by: -0.0005) {
                for longitude in stride(from: -180.0, to: 180.0, by: 15) {
                    let c = Coordinate(latitude: latitude, longitude: longitude)
                    privacy.offer(fix(at: t, c, accuracy: 5))
                    t += 1
                    let cell = privacy.cell!
                    #expect(Geodesy.distance(grid.centre(of: cell), c) <= grid.reportedAccuracy(of: cell), "secret \(secret) at \(c)")
                }
            }
        }
    }

    /// An approximate visit's departure carries the cell its arrival was reported with, even when
    /// the fixes come back after a gap in another cell (where the device is by then).
    @Test func aDepartureAfterAGapRepeatsItsArrivalsCell() {
        var engine = Self.engine()
        var o = Self.approximate
        o.events = [.visits]
        var out: [Delivery] = []
        engine.handle(.subscribe(SubscriberID(1), o), into: &out)
        let home = Self.truth, away = Self.offset(Self.truth, north: 6000, east: 0)
        for i in 0..<900 { engine.handle(.fix(fix(at: Double(i), home, accuracy: 10)), into: &out) }
        // After an hour's gap, past the next publication (4200 s), which sends the departure.
        for i in 0..<660 { engine.handle(.fix(fix(at: 3600 + Double(i), away, accuracy: 10)), into: &out) }
        // (The stay away makes an arrival of its own, sent at 4200 s too.)
        let visits = out.compactMap { if case .visit(let v) = $0.event { v } else { nil } }
        #expect(visits.prefix(2).map(\.kind) == [.arrival, .departure])
        guard visits.count >= 2 else { return }
        #expect(visits[1].coordinate == visits[0].coordinate)
        #expect(Geodesy.distance(visits[0].coordinate, home) < Self.grid.reportedAccuracy)
        #expect(engine.privacy.cell.map { Self.grid.centre(of: $0) } != visits[0].coordinate, "the device is in another cell by then")
    }

    /// A program re-subscribing at every fix (each subscription's first fix comes at once) to
    /// time the device's cell change learns only the start of the publication epoch after it:
    /// every time it is shown is an epoch start, and the new cell first appears stamped with the
    /// epoch start after the change, at that epoch's first fix.
    @Test func aCellChangeIsShownOnlyFromTheNextEpochStartHoweverOftenAProgramResubscribes() throws {
        var engine = Self.engine()
        var o = Self.approximate
        o.distanceFilter = 1
        let home = Self.truth
        var shown: [(at: Timestamp, fix: Fix)] = []
        var changedAt: Timestamp?
        for i in 0..<2400 {
            // 1,000 s parked, then 150 s of driving north at 27 m/s, then parked again.
            let north = i < 1000 ? 0 : Double(min(i - 1000, 150)) * 27
            let f = fix(at: Double(i), Self.offset(home, north: north, east: 0), accuracy: 5)
            var out: [Delivery] = []
            engine.handle(.subscribe(SubscriberID(UInt64(i + 1)), o), into: &out)
            engine.handle(.fix(f), into: &out)
            engine.handle(.unsubscribe(SubscriberID(UInt64(i + 1))), into: &out)
            if changedAt == nil, let c = engine.privacy.cell, c != Self.grid.cell(of: home).cell { changedAt = f.time }
            for d in out { if case .location(let l) = d.event { shown.append((f.time, l)) } }
        }
        let change = try #require(changedAt, "the device never changed cell")
        #expect(shown.allSatisfy { ApproximateLocation.epochStart($0.fix.time) == $0.fix.time }, "a time that is no epoch start")
        let homeCentre = Self.grid.centre(of: Self.grid.cell(of: home).cell)
        let first = try #require(shown.first { $0.fix.coordinate != homeCentre })
        let epoch = ApproximateLocation.epochStart(change.adding(seconds: ApproximateLocation.publicationInterval))
        #expect(first.fix.time == epoch && first.at == epoch, "shown at \(first.at) stamped \(first.fix.time); changed at \(change)")
        #expect(Self.grid.centre(of: try #require(engine.privacy.cell)) == first.fix.coordinate)
    }

    /// A change made by an epoch's first fix is not shown at that fix: it waits for the next
    /// epoch, like any other.
    @Test func aChangeAtAnEpochsFirstFixWaitsForTheNextEpoch() {
        var privacy = ApproximateLocation(grid: Self.grid)
        let home = Self.truth, away = Self.offset(Self.truth, north: 6000, east: 0)
        let e1 = ApproximateLocation.epochStart(t0).adding(seconds: 2 * ApproximateLocation.publicationInterval)
        func at(_ t: Timestamp, _ c: Coordinate) -> Fix { Fix(time: t, coordinate: c, mode: .threeD, horizontalAccuracy: 5) }
        for s in stride(from: -900.0, to: 0, by: 1) { privacy.offer(at(e1.adding(seconds: s), home)) }
        let homeCentre = Self.grid.centre(of: Self.grid.cell(of: home).cell)
        privacy.offer(at(e1, away))
        #expect(privacy.publishedFix!.coordinate == homeCentre, "shown at the fix that made it")
        #expect(privacy.publishedFix!.time == e1)
        let e2 = e1.adding(seconds: ApproximateLocation.publicationInterval)
        privacy.offer(at(e2, away))
        #expect(privacy.publishedFix!.coordinate == Self.grid.centre(of: Self.grid.cell(of: away).cell))
        #expect(privacy.publishedFix!.time == e2)
    }

    /// An approximate significant change comes at the first fixes of the epoch that shows the
    /// new cell, not an epoch later (its detector confirms on the fixes' own times).
    @Test func anApproximateSignificantChangeComesWithTheEpochThatShowsTheNewCell() throws {
        var engine = Self.engine()
        var o = Self.approximate
        o.events = [.significant]
        _ = engine.handle(.subscribe(SubscriberID(1), o))
        let home = Self.truth, away = Self.offset(Self.truth, north: 6000, east: 0)
        var sentAt: [Timestamp] = []
        var movedAt: Timestamp?
        for i in 0..<3600 {
            let f = fix(at: Double(i), i < 1500 ? home : away, accuracy: 5)
            if i == 1500 { movedAt = f.time }
            for d in engine.handle(.fix(f)) { if case .significant = d.event { sentAt.append(f.time) } }
        }
        let shownFrom = ApproximateLocation.epochStart(try #require(movedAt)).adding(seconds: ApproximateLocation.publicationInterval)
        let change = try #require(sentAt.last, "no significant change")
        #expect(change >= shownFrom && change - shownFrom < 60, "sent at \(change), the new cell shown from \(shownFrom)")
    }

    /// A parked device whose receiver loses its fix twice: for 100 s inside one epoch, and from
    /// 1,150 s to 1,900 s, across two epoch starts. (t0 is an epoch start.)
    static func fixesWithGaps() -> [EngineInput] {
        (-100..<2500).map { i in
            let inGap = (100..<200).contains(i) || (1150..<1900).contains(i)
            return inGap ? .noFix(t0.adding(seconds: Double(i))) : .fix(fix(at: Double(i), truth, accuracy: 5))
        }
    }

    /// When a device loses or regains its fix says when it went indoors or came out: an
    /// approximate program hears of the state, and of locations again, only at epoch starts,
    /// stamped with them. A gap inside an epoch is never seen; the precise program sees both.
    @Test func approximateProgramsLearnOfALostFixOnlyAtEpochStarts() throws {
        var engine = Self.engine()
        var approximate = Self.approximate
        approximate.events = [.location, .significant]
        let (precise, coarse) = (SubscriberID(1), SubscriberID(2))
        _ = engine.handle(.subscribe(precise, SubscriptionOptions()))
        _ = engine.handle(.subscribe(coarse, approximate))
        var seen: [(at: Double, event: Event)] = []
        var preciseStates: [(at: Double, state: SourceState)] = []
        for input in Self.fixesWithGaps() {
            let at: Timestamp
            switch input {
            case .fix(let f): at = f.time
            case .noFix(let t): at = try #require(t)
            default: continue
            }
            for d in engine.handle(input) {
                if d.subscriber == coarse { seen.append((at - t0, d.event)) }
                if d.subscriber == precise, case .status(let s, _) = d.event { preciseStates.append((at - t0, s)) }
            }
        }
        let centre = Self.grid.centre(of: Self.grid.cell(of: Self.truth).cell)
        func shown(_ s: Double) -> Fix {
            Fix(time: t0.adding(seconds: s), coordinate: centre, mode: .twoD,
                horizontalAccuracy: Self.grid.reportedAccuracy(of: Self.grid.cell(of: Self.truth).cell))
        }
        let expected: [(at: Double, event: Event)] = [
            (-100, .status(.fix, time: t0.adding(seconds: -600))), (-100, .location(shown(-600))),
            (-100, .significant(Fix(time: ApproximateLocation.coarse(t0.adding(seconds: -600)), coordinate: centre, mode: .twoD,
                                    horizontalAccuracy: shown(0).horizontalAccuracy))),
            (0, .location(shown(0))), (600, .location(shown(600))),
            (1200, .status(.noFix, time: t0.adding(seconds: 1200))),
            (2400, .status(.fix, time: t0.adding(seconds: 2400))), (2400, .location(shown(2400))),
        ]
        #expect(seen.map(\.at) == expected.map(\.at))
        #expect(seen.map(\.event) == expected.map(\.event))
        #expect(preciseStates.map(\.at) == [-100, 100, 200, 1150, 1900])
        #expect(preciseStates.map(\.state) == [.fix, .noFix, .fix, .noFix, .fix])
    }

    /// A new approximate subscription is shown what is published, at once: the state and the
    /// location as of the epoch's start, not the last fix's time.
    @Test func anApproximateSubscriberIsShownWhatIsPublishedAtOnce() throws {
        var engine = Self.engine()
        var subscriber: UInt64 = 0
        func subscribe() -> [Event] {
            subscriber += 1
            return engine.handle(.subscribe(SubscriberID(subscriber), Self.approximate)).map(\.event)
        }
        let centre = Self.grid.centre(of: Self.grid.cell(of: Self.truth).cell)
        for input in Self.fixesWithGaps() {
            _ = engine.handle(input)
            guard case .fix(let f) = input, f.time == t0.adding(seconds: 1000) else {
                if case .noFix(let t) = input, t == t0.adding(seconds: 1500) {
                    #expect(subscribe() == [.status(.noFix, time: t0.adding(seconds: 1200))], "in the long gap")
                }
                continue
            }
            let events = subscribe()
            #expect(events.count == 2)
            #expect(events.first == .status(.fix, time: t0.adding(seconds: 600)))
            guard case .location(let l)? = events.last else { Issue.record("no location: \(events)"); continue }
            #expect(l.time == t0.adding(seconds: 600) && l.coordinate == centre)
        }
        #expect(engine.approximateStatus.state == .fix && engine.approximateStatus.time == t0.adding(seconds: 2400))
    }

    /// An engine with a precise subscriber 1 and an approximate one 2.
    static func withTwoSubscribers(_ events: EventKinds = [.location, .significant]) -> Engine {
        var engine = Self.engine()
        var o = Self.approximate
        o.events = events
        _ = engine.handle(.subscribe(SubscriberID(1), SubscriptionOptions()))
        _ = engine.handle(.subscribe(SubscriberID(2), o))
        return engine
    }

    /// Feeds the shell's ticks at the epoch starts from `from` to `to` (seconds after t0), as
    /// the hub does while reports are missing; returns what the approximate subscriber got.
    static func ticks(_ engine: inout Engine, from: Double, to: Double) -> [Event] {
        stride(from: from, through: to, by: ApproximateLocation.publicationInterval).flatMap { s in
            engine.handle(.tick(t0.adding(seconds: s + 0.001))).filter { $0.subscriber == SubscriberID(2) }.map(\.event)
        }
    }

    /// gpsd's reports without a fix may carry no time: the shell's clock publishes, so the fix
    /// that ends the gap is not the moment anything reaches an approximate program.
    @Test func untimedNoFixReportsAreShownAtTheShellsTicksNotAtTheRegainedFix() {
        var engine = Self.withTwoSubscribers()
        for i in 0..<100 { _ = engine.handle(.fix(fix(at: Double(i), Self.truth))) }
        for _ in 100..<600 { _ = engine.handle(.noFix(nil)) }
        #expect(Self.ticks(&engine, from: 600, to: 1800) == [.status(.noFix, time: t0.adding(seconds: 600))])
        let atRegain = engine.handle(.fix(fix(at: 2237, Self.truth))).filter { $0.subscriber == SubscriberID(2) }
        #expect(atRegain.isEmpty, "sent at the regained fix: \(atRegain.map(\.event))")
        let next = Self.ticks(&engine, from: 2400, to: 2400)
        #expect(next.first == .status(.fix, time: t0.adding(seconds: 2400)) && next.count == 2, "\(next)")
    }

    /// A receiver that has reported only untimed no-fix epochs since the daemon started (a cold
    /// receiver indoors: gpsd's mode 1 may carry no time): its first fix is no "very first
    /// report" to show at once, which would tell approximate programs the second the device came
    /// out: the first untimed report shows `noFix`, the first timed one starts the epochs, and
    /// the fix is shown at the next epoch's start.
    @Test func aFirstFixAfterUntimedNoFixReportsWaitsForTheNextEpoch() {
        for live in [true, false] {
            var engine = Self.withTwoSubscribers()
            engine.privacy.publishesAtReports = !live
            let atStart = engine.handle(.noFix(nil)).filter { $0.subscriber == SubscriberID(2) }.map(\.event)
            #expect(atStart == [.status(.noFix, time: nil)], "live \(live)")
            for _ in 1..<300 { _ = engine.handle(.noFix(nil)) }
            var atFirstFix: [Event] = []
            for i in 0..<163 {  // up to 2399 s: a fix at 2400 after a silent minute would be held as a jump
                atFirstFix += engine.handle(.fix(fix(at: 2237 + Double(i), Self.truth))).filter { $0.subscriber == SubscriberID(2) }.map(\.event)
            }
            #expect(atFirstFix.isEmpty, "live \(live): sent at the first fix: \(atFirstFix)")
            let next = live ? Self.ticks(&engine, from: 2400, to: 2400)
                : engine.handle(.fix(fix(at: 2400, Self.truth))).filter { $0.subscriber == SubscriberID(2) }.map(\.event)
            #expect(next.first == .status(.fix, time: t0.adding(seconds: 2400)) && next.count == 3, "live \(live): \(next)")
        }
    }

    /// A visit released before anything is published (the daemon stopping within the first
    /// epoch after a cold start, whose first report had no time) carries the current cell, moved
    /// with hysteresis, not the cell of the visit's own coordinate: parked 100 m past a boundary
    /// the device keeps the cell it came from, and the visit's own cell would tell the side.
    @Test func aVisitReleasedBeforeAnyPublicationCarriesTheHysteresisCell() {
        let base = Self.grid.cell(of: Coordinate(latitude: 52.52, longitude: 13.40)).cell
        let boundary = Self.offset(Self.grid.centre(of: base), north: -1000, east: 0)
        let parked = Self.offset(boundary, north: -100, east: 0)
        var a = ApproximateLocation(grid: Self.grid)
        a.publishesAtReports = false
        a.offerNoFix(at: nil)  // the first report, shown at once: no fix, no cell
        a.offer(fix(at: 0, Self.offset(boundary, north: 300, east: 0), accuracy: 8))
        a.offer(fix(at: 60, parked, accuracy: 8))
        #expect(a.published == nil && a.cell == base && Self.grid.cell(of: parked).cell != base)
        let visit = Visit(kind: .arrival, arrival: t0.adding(seconds: 60), departure: nil, coordinate: parked, horizontalAccuracy: 10)
        #expect(a.approximate(visit).coordinate == Self.grid.centre(of: base))
    }

    /// A receiver silent for half an hour: its last state is published at the ticks, and the
    /// first fix after the silence sends nothing.
    @Test func aSilentGapSendsNothingAtTheRegainedFix() {
        var engine = Self.withTwoSubscribers()
        for i in 0..<100 { _ = engine.handle(.fix(fix(at: Double(i), Self.truth))) }
        _ = Self.ticks(&engine, from: 600, to: 1800)
        let atRegain = engine.handle(.fix(fix(at: 2237, Self.truth))).filter { $0.subscriber == SubscriberID(2) }
        #expect(atRegain.isEmpty, "sent at the regained fix: \(atRegain.map(\.event))")
    }

    /// A receiver clock stepping back re-anchors the epochs without publishing: publications
    /// stay an epoch apart, so a change between them is not pinned to a few seconds.
    @Test func aClockJumpBackDoesNotPublishTwiceWithinAnEpoch() {
        var engine = Self.withTwoSubscribers([.location])
        let away = Self.offset(Self.truth, north: 6000, east: 0)
        var publishedAtInput: [Int] = []
        for i in 0..<1400 {
            // Real second i; the receiver's clock steps back 660 s at i = 1190.
            let t = i < 1190 ? Double(i) : Double(i - 660)
            let before = engine.privacy.publications
            _ = engine.handle(.fix(fix(at: t, i < 1200 ? Self.truth : away)))
            if engine.privacy.publications != before { publishedAtInput.append(i) }
        }
        let gaps = zip(publishedAtInput.dropFirst(), publishedAtInput).map { $0 - $1 }
        #expect(publishedAtInput.count >= 3 && gaps.allSatisfy { $0 >= 590 }, "publications at inputs \(publishedAtInput)")
    }

    /// After gpsd went away (or the receiver was released) nothing from before is shown as
    /// current: the state waits for a publication after the reconnect, and the cell yields to
    /// the first fix outside it, as after a restart (the device may have been carried away).
    @Test func afterTheSourceWasLostTheOldCellAndStateAreNotShownAsCurrent() throws {
        var engine = Self.withTwoSubscribers([.location])
        for i in 0..<100 { _ = engine.handle(.fix(fix(at: Double(i), Self.truth))) }
        _ = engine.handle(.source(.disconnected))
        _ = engine.handle(.source(.connected))
        #expect(engine.approximateStatus.state == .connected)
        let away = Self.offset(Self.truth, north: 6000, east: 0)
        var shown: [(at: Int, event: Event)] = []
        for i in 5000..<5500 {
            for d in engine.handle(.fix(fix(at: Double(i), away, accuracy: 900))) where d.subscriber == SubscriberID(2) { shown.append((i, d.event)) }
        }
        let awayCentre = Self.grid.centre(of: Self.grid.cell(of: away).cell)
        #expect(shown.map(\.at) == [5400, 5400], "\(shown)")
        #expect(shown.first?.event == .status(.fix, time: t0.adding(seconds: 5400)))
        guard case .location(let l)? = shown.last?.event else { Issue.record("no location"); return }
        #expect(l.coordinate == awayCentre && l.time == t0.adding(seconds: 5400))
    }

    /// `desiredAccuracy` is ignored for approximate subscriptions, so it must not keep a
    /// program's background significant-change detector from being handed back to it (a fresh
    /// one would report the same cell again).
    @Test func anApproximateSignificantDetectorIsHandedBackWhateverDesiredAccuracy() {
        var engine = Self.engine()
        var o = Self.approximate
        o.events = [.significant]
        o.desiredAccuracy = 100
        var significant = 0
        func collect(_ out: [Delivery]) { significant += out.filter { if case .significant = $0.event { true } else { false } }.count }
        collect(engine.handle(.subscribe(SubscriberID(1), o)))
        for i in 0..<700 { collect(engine.handle(.fix(fix(at: Double(i), Self.truth)))) }
        engine.handOver(SubscriberID(1), to: ProgramID("p"), options: o)
        var back = o
        back.desiredAccuracy = nil
        collect(engine.handle(.subscribe(SubscriberID(2), back)))
        engine.takeBack(ProgramID("p"), into: SubscriberID(2))
        for i in 700..<1900 { collect(engine.handle(.fix(fix(at: Double(i), Self.truth)))) }
        #expect(significant == 1, "the parked device's one cell reported \(significant) times")
    }

    /// Where and when each visit reached subscriber `id`: (input time after t0, visit).
    static func visits(_ out: [Delivery], to id: SubscriberID, at seconds: Double) -> [(at: Double, visit: Visit)] {
        out.compactMap { d in
            guard d.subscriber == id, case .visit(let v) = d.event else { return nil }
            return (seconds, v)
        }
    }

    /// An arrival is detected at its first fix plus the dwell, to the second: an approximate
    /// program is sent it at the next publication, as the published cell with 15-minute times,
    /// and likewise a departure; the precise program when detected.
    @Test func anApproximateVisitIsSentAtThePublicationAfterItsDetection() {
        var engine = Self.engine()
        var o = Self.approximate
        o.events = [.visits]
        _ = engine.handle(.subscribe(SubscriberID(1), SubscriptionOptions(events: [.visits])))
        _ = engine.handle(.subscribe(SubscriberID(2), o))
        let away = Self.offset(Self.truth, north: 6000, east: 0)
        var precise: [(at: Double, visit: Visit)] = [], coarse: [(at: Double, visit: Visit)] = []
        for i in 0..<1300 {
            let out = engine.handle(.fix(fix(at: Double(i), i < 1000 ? Self.truth : away, accuracy: 5)))
            precise += Self.visits(out, to: SubscriberID(1), at: Double(i))
            coarse += Self.visits(out, to: SubscriberID(2), at: Double(i))
        }
        #expect(precise.map(\.visit.kind) == [.arrival, .departure])
        #expect(precise.first.map { $0.at > 0 && $0.at < 600 } == true, "detected at \(precise.map(\.at))")
        #expect(coarse.map(\.at) == [600, 1200], "sent at \(coarse.map(\.at))")
        #expect(coarse.map(\.visit.kind) == [.arrival, .departure])
        let centre = Self.grid.centre(of: Self.grid.cell(of: Self.truth).cell)
        #expect(coarse.allSatisfy { $0.visit.coordinate == centre && $0.visit.arrival == t0 })
        #expect(coarse.last?.visit.departure == ApproximateLocation.coarse(precise.last!.visit.departure!))
    }

    /// A held visit is not lost when its program subscribes again (still wanting visits), goes
    /// to the background, comes back, or the daemon stops.
    @Test func aHeldVisitSurvivesResubscribingHandOverTakeBackAndStop() {
        var o = Self.approximate
        o.events = [.visits]
        func parked(_ engine: inout Engine, _ range: Range<Int>) -> [Delivery] {
            range.flatMap { engine.handle(.fix(fix(at: Double($0), Self.truth, accuracy: 5))) }
        }
        func arrivals(_ out: [Delivery], _ id: SubscriberID) -> Int {
            out.filter { if $0.subscriber == id, case .visit(let v) = $0.event { v.kind == .arrival } else { false } }.count
        }
        // Subscribing again at 400 s, after the arrival was detected and held.
        var engine = Self.engine()
        _ = engine.handle(.subscribe(SubscriberID(1), o))
        var out = parked(&engine, 0..<400)
        out += engine.handle(.subscribe(SubscriberID(1), o))
        out += parked(&engine, 400..<700)
        #expect(arrivals(out, SubscriberID(1)) == 1, "re-subscribed")
        // Held at 400 s, when its connection goes away.
        func handedOverAt400() -> Engine {
            var engine = Self.engine()
            _ = engine.handle(.subscribe(SubscriberID(1), o))
            _ = parked(&engine, 0..<400)
            engine.handOver(SubscriberID(1), to: ProgramID("p"), options: o)
            return engine
        }
        // Handed over at 400 s: the background monitor sends it at the publication.
        engine = handedOverAt400()
        _ = parked(&engine, 400..<700)
        var queued: [ProgramEvent] = []
        engine.drainProgramEvents(into: &queued)
        #expect(queued.filter { if case .visit = $0.event { true } else { false } }.count == 1, "handed over: \(queued)")
        // Handed over at 400 s and taken back at 450 s: the new subscription sends it.
        engine = handedOverAt400()
        _ = parked(&engine, 400..<450)
        out = engine.handle(.subscribe(SubscriberID(2), o))
        engine.takeBack(ProgramID("p"), into: SubscriberID(2))
        out += parked(&engine, 450..<700)
        #expect(arrivals(out, SubscriberID(2)) == 1, "taken back")
        // Handed over at 400 s, and the daemon stops at 450 s: queued at once.
        engine = handedOverAt400()
        _ = parked(&engine, 400..<450)
        engine.drainProgramEvents(into: &queued)
        engine.releaseHeldVisits()
        engine.drainProgramEvents(into: &queued)
        #expect(queued.count == 1, "stopped: \(queued)")
    }

    static func isCellCentre(_ c: Coordinate) -> Bool {
        Geodesy.distance(c, grid.centre(of: grid.cell(of: c).cell)) < 0.01
    }
}
