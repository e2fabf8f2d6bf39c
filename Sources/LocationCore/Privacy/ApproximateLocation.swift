#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Approximate location (docs/privacy.md, "Approximate location"): positions snapped to the
/// centre of a ~2 km cell of a grid shifted by a secret per-device offset.
///
/// - The grid and the current cell are **device-wide**: every approximate program, however many
///   fixes it collects, however it pools with others or reconnects, sees the same cell centre
///   for the same device position, so averaging converges to the cell centre, never to the
///   position inside the cell.
/// - **Hysteresis**: the device's cell changes only once a fix is at least `margin` inside the
///   new cell (or outside the current cell grown by `margin`), so a device parked near a
///   boundary does not flip between the two cells and so reveal where the boundary is.
/// - Per subscription, a **rate limit** (one location per `interval` of fix time), and
///   speed, course, altitude and their accuracies withheld.
public struct PrivacyGrid: Hashable, Sendable {
    /// Cell side, metres.
    public var cellSize: Double
    /// How far inside a new cell a fix must be before the device moves to it, metres.
    public var margin: Double
    /// The secret offset of the grid, as fractions of a cell (0..<1), north and east.
    public var offsetNorth: Double
    public var offsetEast: Double

    static let metresPerDegree = 111_320.0

    /// `secret`: the per-device secret (the daemon's state directory; a fixed seed in replays).
    public init(secret: UInt64, cellSize: Double = 2000, margin: Double = 500) {
        self.cellSize = cellSize
        self.margin = margin
        var s = secret
        offsetNorth = Double(Self.splitMix(&s) >> 11) / Double(1 << 53)
        offsetEast = Double(Self.splitMix(&s) >> 11) / Double(1 << 53)
    }

    public static func splitMix(_ state: inout UInt64) -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    public struct Cell: Hashable, Sendable {
        public var row: Int
        public var column: Int
        public init(row: Int, column: Int) { self.row = row; self.column = column }
    }

    var rowHeight: Double { cellSize / Self.metresPerDegree }  // degrees of latitude

    /// The row of `latitude`. Within a row of each pole, rows merge into its **polar cap**, one
    /// cell around the pole: the row that holds the pole may reach only metres onto the globe
    /// (where the secret offset puts its edge), and a cell must be ~`cellSize` across everywhere.
    func row(of latitude: Double) -> Int {
        let r = Int((latitude / rowHeight + offsetNorth).rounded(.down))
        return min(max(r, capRow(north: false)), capRow(north: true))
    }

    /// The row that is the polar cap: the one holding the latitude a row short of the pole.
    func capRow(north: Bool) -> Int {
        Int(((north ? 90 - rowHeight : -90 + rowHeight) / rowHeight + offsetNorth).rounded(.down))
    }

    /// The latitudes a row spans on the globe (a cap reaches to its pole).
    func span(row: Int) -> (south: Double, north: Double) {
        let south = row == capRow(north: false) ? -90 : (Double(row) - offsetNorth) * rowHeight
        let north = row == capRow(north: true) ? 90 : (Double(row) + 1 - offsetNorth) * rowHeight
        return (south, north)
    }

    /// How many cells `row` has: a whole number, so that they go round the globe without a seam
    /// at the antimeridian, each at least `cellSize` wide at the row's middle latitude; a polar
    /// cap is one.
    func columns(row: Int) -> Int {
        if row == capRow(north: true) || row == capRow(north: false) { return 1 }
        let (south, north) = span(row: row)
        let circumference = 360 * Self.metresPerDegree * cos((south + north) / 2 * .pi / 180)
        return max(1, Int((circumference / cellSize).rounded(.down)))
    }

    /// Where `c` falls in `row`'s geometry: the row (y) and column (x) coordinates in cells,
    /// x counted eastwards from the antimeridian (not yet wrapped), and the row's cell count.
    func position(of c: Coordinate, row: Int) -> (y: Double, x: Double, columns: Int) {
        let n = columns(row: row)
        return (c.latitude / rowHeight + offsetNorth, (c.longitude + 180) / 360 * Double(n) + offsetEast, n)
    }

    /// The cell containing `c`, and how far (metres) `c` is from that cell's nearest edge.
    public func cell(of c: Coordinate) -> (cell: Cell, inset: Double) {
        let row = row(of: c.latitude)
        let (y, x, n) = position(of: c, row: row)
        let column = Int(x.rounded(.down))
        let fy = y - Double(row), fx = x - Double(column)
        // In metres on the globe, which is what the hysteresis promises. A fraction of the
        // column is not: columns are cut at the row's middle latitude, so towards a pole a row's
        // poleward edge is narrower than its middle (a third narrower next to a polar cap).
        let rowMetres = rowHeight * .pi / 180 * Geodesy.earthRadius
        let inset: Double
        if row == capRow(north: true) {
            inset = fy * rowMetres  // a cap's one edge is on the equator's side
        } else if row == capRow(north: false) {
            inset = (1 - fy) * rowMetres
        } else {
            // A column's edge is a meridian: the distance to its great circle, R·asin(cos φ·sin Δλ),
            // is never more than to the edge itself.
            let columnRadians = 2 * Double.pi / Double(n)
            let cosLatitude = cos(c.latitude * .pi / 180)
            func toMeridian(_ f: Double) -> Double {
                Geodesy.earthRadius * asin(min(1, cosLatitude * sin(min(f * columnRadians, .pi / 2))))
            }
            inset = min(min(fy, 1 - fy) * rowMetres, toMeridian(fx), toMeridian(1 - fx))
        }
        return (Cell(row: row, column: ((column % n) + n) % n), inset)
    }

    /// A cell's centre: a polar cap's is its pole.
    public func centre(of cell: Cell) -> Coordinate {
        if cell.row == capRow(north: true) { return Coordinate(latitude: 90, longitude: 0) }
        if cell.row == capRow(north: false) { return Coordinate(latitude: -90, longitude: 0) }
        let (south, north) = span(row: cell.row)
        let n = Double(columns(row: cell.row))
        var longitude = (Double(cell.column) + 0.5 - offsetEast) / n * 360 - 180
        if longitude < -180 { longitude += 360 } else if longitude >= 180 { longitude -= 360 }
        return Coordinate(latitude: (south + north) / 2, longitude: longitude)
    }

    /// The 95 % radius reported with a cell centre where cells are `cellSize` square: the device
    /// is inside the current cell grown by `margin` (hysteresis), so at most this far from its
    /// centre. (1000 + 500)·√2 ≈ 2122 m for the defaults.
    public var reportedAccuracy: Double { ((cellSize / 2 + margin) * 2.0.squareRoot()).rounded(.up) }

    /// The same bound for `cell` as it is: its cells are wider where a row's circumference is
    /// not a whole number of cells (up to twice as wide near the poles), and a polar cap reaches
    /// from the pole to its edge. Never less than `reportedAccuracy`.
    public func reportedAccuracy(of cell: Cell) -> Double {
        let (south, north) = span(row: cell.row)
        if cell.row == capRow(north: true) { return ((90 - south) * Self.metresPerDegree + margin).rounded(.up) }
        if cell.row == capRow(north: false) { return ((north + 90) * Self.metresPerDegree + margin).rounded(.up) }
        // The grown cell is widest at its latitude nearest the equator.
        let grown = margin / Self.metresPerDegree
        let low = south - grown, high = north + grown
        let widestLatitude = low <= 0 && high >= 0 ? 0 : min(abs(low), abs(high))
        let n = Double(columns(row: cell.row))
        let halfWidth = 360 / n * Self.metresPerDegree * cos(widestLatitude * .pi / 180) * (0.5 + margin / cellSize)
        let halfHeight = cellSize / 2 + margin
        return max(reportedAccuracy, (halfWidth * halfWidth + halfHeight * halfHeight).squareRoot().rounded(.up))
    }

    /// Whether `c` is outside the square of `cell` grown by `margin`.
    func outside(_ c: Coordinate, grown cell: Cell) -> Bool {
        let (y, x, n) = position(of: c, row: cell.row)
        let dy = y - Double(cell.row)
        let m = margin / cellSize
        // A cap has no edge on its pole's side.
        if cell.row == capRow(north: true) { return dy < -m }
        if cell.row == capRow(north: false) { return dy > 1 + m }
        // East or west of the cell the short way round (across the antimeridian if need be).
        var dx = x - Double(cell.column)
        dx -= Double(n) * ((dx - 0.5) / Double(n) + 0.5).rounded(.down)
        return dy < -m || dy > 1 + m || (n > 1 && (dx < -m || dx > 1 + m))
    }
}

/// The device's approximate position: the current cell, moved with hysteresis, and what
/// approximate programs are shown of it: the cell and the receiver's state (`fix`/`noFix`) as
/// they were at the start of the current publication epoch (engine-wide; docs/privacy.md,
/// "Publication epochs").
public struct ApproximateLocation: Sendable {
    public var grid: PrivacyGrid
    public private(set) var cell: PrivacyGrid.Cell?
    /// Fixes less accurate than this never move the cell (metres, 95 %).
    public var maximumAccuracy: Double = 500
    /// The cell approximate programs are shown, and the start of the epoch it was taken at.
    public private(set) var published: PrivacyGrid.Cell?
    public private(set) var publishedAt: Timestamp?
    /// The receiver's state now (`fix` or `noFix`; nil before its first report), and as
    /// approximate programs are shown it.
    private(set) var receiver: SourceState?
    public private(set) var publishedReceiver: SourceState?
    /// Counts publications (each epoch start, and the first report), whether or not what is
    /// shown changed: the engine looks for one with one comparison per input.
    public private(set) var publications: UInt64 = 0
    /// Whether an epoch's first report publishes (a replay), or only the shell's ticks do
    /// after the very first report (a live source): then no publication ever happens at the
    /// moment of a report, so none is timed by what the receiver did then (its fix regained,
    /// or a clock glitch), only by the clock.
    public var publishesAtReports = true

    /// Approximate programs learn of a cell change only at the next multiple of this many
    /// seconds of fix time, stamped with it: however many subscriptions a program opens, a
    /// change is timed to within 10 minutes, not to the fix that made it.
    public static let publicationInterval = SubscriptionOptions.approximateInterval

    public init(grid: PrivacyGrid) { self.grid = grid }

    /// The cell remembered from before a restart (`PrivacyCellStore`), before the first fix:
    /// the hysteresis goes on from it. A cell of another grid (the secret was replaced) is left
    /// at the first fix that is outside it grown by the margin, as after any jump.
    public mutating func restore(cell remembered: PrivacyGrid.Cell) {
        // A row the grid has no centre for (a secret with another polar cap) is not a cell.
        guard cell == nil, grid.centre(of: remembered).isValid else { return }
        cell = remembered
        restored = true
    }

    /// The cell came from before a restart and no fix has confirmed it yet: the first fix
    /// outside it grown by the margin moves it, whatever its accuracy (the device may have been
    /// carried away meanwhile), as the very first fix sets a cell.
    private var restored = false

    /// Feeds a precise fix; returns whether the device's cell changed.
    @discardableResult
    public mutating func offer(_ fix: Fix) -> Bool {
        // What is published at an epoch's first input is the state from before that input: a
        // change is never shown at the fix that made it.
        let first = !reported
        if publishesAtReports || first { publish(at: fix.time) } else if publishedAt == nil { startEpochs(at: fix.time) }
        if restored, let current = cell {
            restored = false
            // Carried away while the daemon was down: this fix sets the cell, as a first fix.
            if grid.outside(fix.coordinate, grown: current) { cell = nil }
        }
        receiver = .fix
        defer { if first { showFirst() } }
        guard fix.horizontalAccuracy.map({ $0 <= maximumAccuracy }) ?? false || cell == nil else { return false }
        let (candidate, inset) = grid.cell(of: fix.coordinate)
        guard let current = cell else { cell = candidate; return true }
        guard candidate != current else { return false }
        if inset >= grid.margin || grid.outside(fix.coordinate, grown: current) {
            cell = candidate
            return true
        }
        return false
    }

    /// The receiver reported an epoch without a position (at `time`, when it said): the
    /// state approximate programs are shown follows at the next epoch, as a cell change does.
    public mutating func offerNoFix(at time: Timestamp?) {
        let first = !reported
        if let time {
            if publishesAtReports || first { publish(at: time) } else if publishedAt == nil { startEpochs(at: time) }
        }
        receiver = .noFix
        if first { showFirst() }
    }

    /// The shell's clock says the epoch holding `t` (the time of the last report plus the time
    /// since, by the monotonic clock) has begun: a receiver that went silent, or reports no fix
    /// without a time, does not hold the publication back to the moment its fix returns.
    public mutating func tick(at t: Timestamp) {
        guard publishedAt != nil else { return }
        publish(at: t)
    }

    /// The source went away (gpsd gone, or the receiver released): what the receiver said is
    /// no longer known, and is shown again only from a publication after it reports. The
    /// device may be carried away meanwhile, so the cell is held as after a restart.
    public mutating func sourceLost() {
        receiver = nil
        publishedReceiver = nil
        if cell != nil { restored = true }
    }

    /// At the first input of a new epoch, the current cell and state become the ones shown.
    /// After the clock stepped back by `Timestamp.clockJumpBack` or more, the epochs follow the
    /// new times from where they are, without publishing (a publication then would be one a
    /// few seconds after the last, timing a change to within them).
    mutating func publish(at t: Timestamp) {
        let start = Self.epochStart(t)
        if let at = publishedAt, start <= at {
            if t - at < -Timestamp.clockJumpBack { publishedAt = start }
            return
        }
        published = cell
        publishedReceiver = receiver
        publishedAt = start
        publications &+= 1
    }

    /// The very first report's cell and state are shown at once: there is no earlier one to
    /// show, and no change to time. (Only the first: after the source was lost, what is shown
    /// waits for a publication.)
    private mutating func showFirst() {
        reported = true
        published = cell
        publishedReceiver = receiver
        publications &+= 1
    }

    /// Whether the first report has been shown (`showFirst`).
    private var reported = false

    /// The first report with a time, after untimed ones (a cold receiver's no-fix epochs): the
    /// epochs start from its time, publishing nothing. Shown at once, as a first report, its fix
    /// would tell approximate programs the second the device first had one (came outdoors).
    private mutating func startEpochs(at t: Timestamp) {
        publishedAt = Self.epochStart(t)
    }

    /// The start of the publication epoch after the one `t` falls in (when the shell's next
    /// tick is due).
    public static func nextEpochStart(after t: Timestamp) -> Timestamp {
        epochStart(t).adding(seconds: publicationInterval)
    }

    /// The start of the publication epoch `t` falls in.
    public static func epochStart(_ t: Timestamp) -> Timestamp {
        let q = Int64(publicationInterval) * 1_000_000_000
        let n = t.nanoseconds
        return Timestamp(nanoseconds: (n >= 0 ? n / q : (n - q + 1) / q) * q)
    }

    /// The location approximate programs are shown now: the published cell's centre, stamped
    /// with its epoch's start, an honest accuracy, no altitude, speed or course; nil when the
    /// receiver had no fix at that start.
    public var publishedFix: Fix? {
        guard publishedReceiver == .fix, let shown = published, let at = publishedAt else { return nil }
        return Fix(time: at, coordinate: grid.centre(of: shown), mode: .twoD,
                   altitudeHAE: nil, altitudeMSL: nil, horizontalAccuracy: grid.reportedAccuracy(of: shown),
                   verticalAccuracy: nil, speed: nil, course: nil)
    }

    /// A visit as an approximate program receives it, at a publication: the published cell's
    /// centre (before one is published, the current cell's, which the hysteresis moved: also
    /// when the epochs have begun without one, as after untimed first reports; the visit's own
    /// cell only if there is no cell at all), so a stay next to a boundary does not reveal the
    /// side the hysteresis hides, and the visit shows no cell the location events do not; times
    /// rounded down to 15 minutes. (A departure repeats its arrival's cell: `SubscriptionExtras`.)
    public func approximate(_ v: Visit) -> Visit {
        let shown = published ?? cell ?? grid.cell(of: v.coordinate).cell
        return Visit(kind: v.kind, arrival: Self.coarse(v.arrival), departure: v.departure.map(Self.coarse),
                     coordinate: grid.centre(of: shown), horizontalAccuracy: grid.reportedAccuracy(of: shown))
    }

    /// Times in coarse events: rounded down to 15 minutes.
    public static func coarse(_ t: Timestamp) -> Timestamp {
        let q: Int64 = 900 * 1_000_000_000
        let n = t.nanoseconds
        return Timestamp(nanoseconds: (n >= 0 ? n / q : (n - q + 1) / q) * q)
    }
}
