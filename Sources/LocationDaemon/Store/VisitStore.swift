import CSQLite
import LocationCore

/// Each program's recent visits (docs/places.md, "Recent visits"), kept across restarts. A
/// program's history is written whole, in one transaction, at the input whose visit changed it
/// (visits are minutes apart; a history holds at most `[store] max_visits` rows and an open one).
public final class VisitStore: @unchecked Sendable {
    public let database: Database

    public init(database: Database) throws {
        self.database = database
        try database.exec("""
            CREATE TABLE IF NOT EXISTS recent_visits (
              program TEXT NOT NULL, arrival INTEGER NOT NULL, departure INTEGER,
              latitude REAL NOT NULL, longitude REAL NOT NULL, accuracy REAL NOT NULL, place INTEGER,
              PRIMARY KEY (program, arrival)) WITHOUT ROWID;
            """)
    }

    /// Every program's history, with `limit` as the bound from now on.
    public func load(limit: Int) throws -> [ProgramID: VisitHistory] {
        var visits: [ProgramID: [Visit]] = [:]
        let rows = try database.prepare("SELECT program, arrival, departure, latitude, longitude, accuracy, place FROM recent_visits ORDER BY program, arrival")
        defer { sqlite3_finalize(rows) }
        while try database.step(rows) {
            let program = ProgramID(String(cString: sqlite3_column_text(rows, 0)))
            let departure = sqlite3_column_type(rows, 2) == SQLITE_NULL ? nil : Timestamp(nanoseconds: sqlite3_column_int64(rows, 2))
            var visit = Visit(kind: departure == nil ? .arrival : .departure, arrival: Timestamp(nanoseconds: sqlite3_column_int64(rows, 1)),
                              departure: departure,
                              coordinate: Coordinate(latitude: sqlite3_column_double(rows, 3), longitude: sqlite3_column_double(rows, 4)),
                              horizontalAccuracy: sqlite3_column_double(rows, 5))
            if sqlite3_column_type(rows, 6) != SQLITE_NULL { visit.place = UInt64(sqlite3_column_int64(rows, 6)) }
            visits[program, default: []].append(visit)
        }
        return visits.mapValues { VisitHistory(limit: limit, visits: $0) }
    }

    /// Replaces what is kept of `program`'s recent visits with `history`.
    func write(_ history: VisitHistory, of program: ProgramID) throws {
        try database.replaceRows(of: program.rawValue, in: "recent_visits", columns: 7, history.visits) { insert, v in
            sqlite3_bind_int64(insert, 2, v.arrival.nanoseconds)
            if let departure = v.departure { sqlite3_bind_int64(insert, 3, departure.nanoseconds) } else { sqlite3_bind_null(insert, 3) }
            sqlite3_bind_double(insert, 4, v.coordinate.latitude)
            sqlite3_bind_double(insert, 5, v.coordinate.longitude)
            sqlite3_bind_double(insert, 6, v.horizontalAccuracy)
            if let place = v.place { sqlite3_bind_int64(insert, 7, Int64(clamping: place)) } else { sqlite3_bind_null(insert, 7) }
        }
    }
}
