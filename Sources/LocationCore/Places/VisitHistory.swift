/// One program's recent visits as it was sent them (docs/places.md, "Recent visits"): the last
/// `limit` ones, oldest first, plus the newest while it is still open. Deterministic, like the
/// places it sits beside: the same visits make the same history.
///
/// A visit is one entry however often it is reported (another connection of the program, its
/// background detector): entries are told apart by their arrival time, and a departure
/// replaces its arrival (never the other way round).
public struct VisitHistory: Hashable, Sendable {
    /// Visits kept per program unless the configuration says otherwise (`[store] max_visits`).
    public static let defaultLimit = 100

    public var limit: Int
    /// Ascending arrival.
    public private(set) var visits: [Visit] = []

    public init(limit: Int = VisitHistory.defaultLimit) { self.limit = max(1, limit) }

    /// A history as the store kept it, trimmed to `limit` (lowered since).
    public init(limit: Int, visits: [Visit]) {
        self.limit = max(1, limit)
        self.visits = visits.sorted { $0.arrival < $1.arrival }
        trim()
    }

    /// Keeps `visit`; returns whether the history changed.
    @discardableResult
    public mutating func record(_ visit: Visit) -> Bool {
        if let i = visits.lastIndex(where: { $0.arrival == visit.arrival }) {
            guard visits[i].kind == .arrival, visit.kind == .departure else { return false }
            visits[i] = visit
        } else if let i = visits.lastIndex(where: { $0.arrival < visit.arrival }) {
            visits.insert(visit, at: i + 1)
        } else {
            visits.insert(visit, at: 0)
        }
        trim()
        return true
    }

    /// Drops the oldest past `limit`, the newest open visit not counted.
    mutating func trim() {
        let open = visits.last?.kind == .arrival ? 1 : 0
        if visits.count > limit + open { visits.removeFirst(visits.count - limit - open) }
    }
}
