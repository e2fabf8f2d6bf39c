#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A place a program's device keeps coming back to: the visits whose centres fell within
/// `PlaceBook.radius` of it (docs/places.md, "Places").
public struct Place: Hashable, Sendable {
    /// Never reused within a program; shown as `p7`.
    public var id: UInt64
    /// The sum of its visits' centres as unit vectors: the centre is its direction, and a new
    /// visit moves it by its share.
    public var sum: SIMD3<Double>
    public var visits: Int
    /// Time spent in its completed visits, seconds.
    public var totalSeconds: Double
    /// The first visit's arrival, and the latest visit's arrival or departure.
    public var firstVisit: Timestamp
    public var lastVisit: Timestamp
    /// The populated place nearest its centre, when listed by a daemon with a gazetteer
    /// (docs/places.md, "Locality"); not part of the book.
    public var locality: Locality?

    public init(id: UInt64, sum: SIMD3<Double>, visits: Int, totalSeconds: Double, firstVisit: Timestamp, lastVisit: Timestamp) {
        self.id = id; self.sum = sum; self.visits = visits; self.totalSeconds = totalSeconds
        self.firstVisit = firstVisit; self.lastVisit = lastVisit
    }

    public var name: String { "p\(id)" }

    /// The mean of its visits' centres.
    public var centre: Coordinate { PlaceBook.coordinate(sum) }
}

/// One program's places, built from the visits it is sent (precise ones only: the shell never
/// offers an approximate program's). Deterministic: the same visits make the same places.
///
/// A visit's arrival joins the place whose centre is nearest to the visit's, if within
/// `radius`, or starts a new place; its departure adds the stay's time and moves the place's
/// centre to the mean with the visit's final centre. The same visit reported again (another
/// connection of the program, its own detector) is counted once: visits are told apart by
/// their arrival time. At `limit` places, a new one first drops the one with the fewest
/// visits, the least recently visited of those.
public struct PlaceBook: Hashable, Sendable {
    /// Visits whose centres are this close to a place's centre are visits of it, metres: a
    /// building and its car park, not the neighbours (visits' own centres vary by tens of
    /// metres; docs/visits.md).
    public static let radius = 150.0
    public static let defaultLimit = 1000

    public var limit: Int
    /// Ascending id.
    public private(set) var places: [Place] = []
    public private(set) var nextID: UInt64 = 1
    /// The visit counted last: its arrival, its place, the centre it was counted with, and
    /// whether its departure came.
    public struct Counted: Hashable, Sendable {
        public var arrival: Timestamp
        public var place: UInt64
        public var unit: SIMD3<Double>
        public var departed: Bool
        public init(arrival: Timestamp, place: UInt64, unit: SIMD3<Double>, departed: Bool) {
            self.arrival = arrival; self.place = place; self.unit = unit; self.departed = departed
        }
    }
    public private(set) var counted: Counted?

    public init(limit: Int = PlaceBook.defaultLimit) { self.limit = max(1, limit) }

    /// A book as the store kept it. Past `limit` (lowered since), the places a new one would
    /// drop first are dropped.
    public init(limit: Int, places: [Place], nextID: UInt64, counted: Counted?) {
        self.limit = max(1, limit)
        self.places = places.sorted { $0.id < $1.id }
        self.nextID = max(nextID, (self.places.last?.id ?? 0) + 1)
        self.counted = counted
        while self.places.count > self.limit, let drop = leastVisited() { self.places.remove(at: drop) }
        if let c = counted, !self.places.contains(where: { $0.id == c.place }) { self.counted = nil }
    }

    /// Counts `visit` (once) and returns its place's id.
    public mutating func record(_ visit: Visit) -> UInt64 {
        let unit = Geodesy.unitVector(visit.coordinate)
        if let c = counted, c.arrival == visit.arrival, let i = places.firstIndex(where: { $0.id == c.place }) {
            if visit.kind == .departure && !c.departed, let departure = visit.departure {
                places[i].sum += unit - c.unit
                places[i].totalSeconds += max(0, departure - visit.arrival)
                places[i].lastVisit = max(places[i].lastVisit, departure)
                counted = Counted(arrival: c.arrival, place: c.place, unit: unit, departed: true)
            }
            return c.place
        }
        let i = join(unit, at: visit.arrival)
        if visit.kind == .departure, let departure = visit.departure {
            places[i].totalSeconds += max(0, departure - visit.arrival)
            places[i].lastVisit = max(places[i].lastVisit, departure)
        }
        counted = Counted(arrival: visit.arrival, place: places[i].id, unit: unit, departed: visit.kind == .departure)
        return places[i].id
    }

    /// The index of the place a visit centred at `unit` joins (a new one if none is near).
    mutating func join(_ unit: SIMD3<Double>, at arrival: Timestamp) -> Int {
        let at = Self.coordinate(unit)
        var best: Int?
        var bestDistance = Self.radius
        for (i, p) in places.enumerated() {
            let d = Geodesy.distance(p.centre, at)
            if d <= bestDistance { best = i; bestDistance = d }
        }
        if let i = best {
            places[i].sum += unit
            places[i].visits += 1
            places[i].lastVisit = max(places[i].lastVisit, arrival)
            return i
        }
        if places.count >= limit, let drop = leastVisited() {
            places.remove(at: drop)
        }
        places.append(Place(id: nextID, sum: unit, visits: 1, totalSeconds: 0, firstVisit: arrival, lastVisit: arrival))
        nextID += 1
        return places.count - 1
    }

    /// The place dropped first: the fewest visits, the least recently visited of those.
    func leastVisited() -> Int? {
        places.indices.min { a, b in
            (places[a].visits, places[a].lastVisit, places[a].id) < (places[b].visits, places[b].lastVisit, places[b].id)
        }
    }

    static func coordinate(_ v: SIMD3<Double>) -> Coordinate {
        let n = (v * v).sum().squareRoot()
        guard n > 0 else { return Coordinate(latitude: 0, longitude: 0) }
        let u = v / n
        return Coordinate(latitude: asin(max(-1, min(1, u.z))) * 180 / Double.pi, longitude: atan2(u.y, u.x) * 180 / Double.pi)
    }
}
