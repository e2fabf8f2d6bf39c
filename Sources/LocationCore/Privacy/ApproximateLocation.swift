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
    }

    var rowHeight: Double { cellSize / Self.metresPerDegree }  // degrees of latitude

    /// Degrees of longitude of one cell in `row` (cells stay ~`cellSize` wide at any latitude).
    func columnWidth(row: Int) -> Double {
        let lat = (Double(row) + 0.5 - offsetNorth) * rowHeight
        let c = max(cos(lat * .pi / 180), 0.01)
        return min(rowHeight / c, 360)
    }

    /// The cell containing `c`, and how far (metres) `c` is from that cell's nearest edge.
    public func cell(of c: Coordinate) -> (cell: Cell, inset: Double) {
        let y = c.latitude / rowHeight + offsetNorth
        let row = Int(y.rounded(.down))
        let w = columnWidth(row: row)
        let x = c.longitude / w + offsetEast
        let column = Int(x.rounded(.down))
        let fy = y - Double(row), fx = x - Double(column)
        let inset = min(fy, 1 - fy, fx, 1 - fx) * cellSize
        return (Cell(row: row, column: column), inset)
    }

    public func centre(of cell: Cell) -> Coordinate {
        let w = columnWidth(row: cell.row)
        return Coordinate(latitude: (Double(cell.row) + 0.5 - offsetNorth) * rowHeight,
                          longitude: (Double(cell.column) + 0.5 - offsetEast) * w)
    }

    /// The 95 % radius reported with a cell centre: the device is inside the current cell grown
    /// by `margin` (hysteresis), so at most this far from its centre.
    public var reportedAccuracy: Double { ((cellSize / 2 + margin) * 2.0.squareRoot()).rounded(.up) }

    /// Distance (metres) of `c` outside the square of `cell` grown by `margin` (0 if inside).
    func outside(_ c: Coordinate, grown cell: Cell) -> Bool {
        let y = c.latitude / rowHeight + offsetNorth - Double(cell.row)
        let x = c.longitude / columnWidth(row: cell.row) + offsetEast - Double(cell.column)
        let m = margin / cellSize
        return y < -m || y > 1 + m || x < -m || x > 1 + m
    }
}

/// The device's approximate position: the current cell, moved with hysteresis (engine-wide).
public struct ApproximateLocation: Sendable {
    public var grid: PrivacyGrid
    public private(set) var cell: PrivacyGrid.Cell?
    /// Fixes less accurate than this never move the cell (metres, 95 %).
    public var maximumAccuracy: Double = 500

    public init(grid: PrivacyGrid) { self.grid = grid }

    /// Feeds a precise fix; returns whether the device's cell changed.
    @discardableResult
    public mutating func offer(_ fix: Fix) -> Bool {
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

    /// `fix` as an approximate program receives it: the current cell's centre, an honest
    /// accuracy, no altitude, speed or course.
    public func approximate(_ fix: Fix) -> Fix {
        let centre = cell.map { grid.centre(of: $0) } ?? grid.centre(of: grid.cell(of: fix.coordinate).cell)
        return Fix(time: fix.time, coordinate: centre, mode: .twoD, altitudeHAE: nil, altitudeMSL: nil,
                   horizontalAccuracy: grid.reportedAccuracy, verticalAccuracy: nil, speed: nil, course: nil)
    }

    /// A visit as an approximate program receives it: the cell of its centre (no hysteresis
    /// needed: the stay is long), times rounded down to 15 minutes.
    public func approximate(_ v: Visit) -> Visit {
        Visit(kind: v.kind, arrival: Self.coarse(v.arrival), departure: v.departure.map(Self.coarse),
              coordinate: cell.map { grid.centre(of: $0) } ?? grid.centre(of: grid.cell(of: v.coordinate).cell),
              horizontalAccuracy: grid.reportedAccuracy)
    }

    /// Times in coarse events: rounded down to 15 minutes.
    public static func coarse(_ t: Timestamp) -> Timestamp {
        let q: Int64 = 900 * 1_000_000_000
        let n = t.nanoseconds
        return Timestamp(nanoseconds: (n >= 0 ? n / q : (n - q + 1) / q) * q)
    }
}
