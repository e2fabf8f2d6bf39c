import CSQLite
import LocationCore

/// Each program's places, kept across restarts so that their ids stay (docs/places.md). A
/// program's book is written whole, in one transaction, at the input whose visit changed it
/// (visits are minutes apart; a book holds at most `[store] max_places` rows).
public final class PlaceStore: @unchecked Sendable {
    public let database: Database

    public init(database: Database) throws {
        self.database = database
        try database.exec("""
            CREATE TABLE IF NOT EXISTS places (
              program TEXT NOT NULL, id INTEGER NOT NULL, x REAL NOT NULL, y REAL NOT NULL, z REAL NOT NULL,
              visits INTEGER NOT NULL, seconds REAL NOT NULL, first_visit INTEGER NOT NULL, last_visit INTEGER NOT NULL,
              PRIMARY KEY (program, id)) WITHOUT ROWID;
            CREATE TABLE IF NOT EXISTS place_books (
              program TEXT PRIMARY KEY, next_id INTEGER NOT NULL, counted_arrival INTEGER, counted_place INTEGER,
              counted_x REAL, counted_y REAL, counted_z REAL, counted_departed INTEGER) WITHOUT ROWID;
            """)
    }

    /// Every program's book, with `limit` as the bound from now on.
    public func load(limit: Int) throws -> [ProgramID: PlaceBook] {
        var places: [ProgramID: [Place]] = [:]
        let rows = try database.prepare("SELECT program, id, x, y, z, visits, seconds, first_visit, last_visit FROM places ORDER BY program, id")
        defer { sqlite3_finalize(rows) }
        while try database.step(rows) {
            let program = ProgramID(String(cString: sqlite3_column_text(rows, 0)))
            places[program, default: []].append(Place(
                id: UInt64(sqlite3_column_int64(rows, 1)),
                sum: SIMD3(sqlite3_column_double(rows, 2), sqlite3_column_double(rows, 3), sqlite3_column_double(rows, 4)),
                visits: Int(sqlite3_column_int64(rows, 5)), totalSeconds: sqlite3_column_double(rows, 6),
                firstVisit: Timestamp(nanoseconds: sqlite3_column_int64(rows, 7)), lastVisit: Timestamp(nanoseconds: sqlite3_column_int64(rows, 8))))
        }
        var books: [ProgramID: PlaceBook] = [:]
        let heads = try database.prepare("SELECT program, next_id, counted_arrival, counted_place, counted_x, counted_y, counted_z, counted_departed FROM place_books")
        defer { sqlite3_finalize(heads) }
        while try database.step(heads) {
            let program = ProgramID(String(cString: sqlite3_column_text(heads, 0)))
            var counted: PlaceBook.Counted?
            if sqlite3_column_type(heads, 2) != SQLITE_NULL {
                counted = PlaceBook.Counted(arrival: Timestamp(nanoseconds: sqlite3_column_int64(heads, 2)), place: UInt64(sqlite3_column_int64(heads, 3)),
                                            unit: SIMD3(sqlite3_column_double(heads, 4), sqlite3_column_double(heads, 5), sqlite3_column_double(heads, 6)),
                                            departed: sqlite3_column_int64(heads, 7) != 0)
            }
            books[program] = PlaceBook(limit: limit, places: places[program] ?? [], nextID: UInt64(sqlite3_column_int64(heads, 1)), counted: counted)
        }
        return books
    }

    /// Replaces what is kept of `program`'s places with `book`.
    func write(_ book: PlaceBook, of program: ProgramID) throws {
        try database.transaction {
            try database.replaceRows(of: program.rawValue, in: "places", columns: 9, book.places) { insert, p in
                sqlite3_bind_int64(insert, 2, Int64(clamping: p.id))
                sqlite3_bind_double(insert, 3, p.sum.x); sqlite3_bind_double(insert, 4, p.sum.y); sqlite3_bind_double(insert, 5, p.sum.z)
                sqlite3_bind_int64(insert, 6, Int64(p.visits))
                sqlite3_bind_double(insert, 7, p.totalSeconds)
                sqlite3_bind_int64(insert, 8, p.firstVisit.nanoseconds)
                sqlite3_bind_int64(insert, 9, p.lastVisit.nanoseconds)
            }
            let head = try database.prepare("INSERT OR REPLACE INTO place_books VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
            defer { sqlite3_finalize(head) }
            locationd_sqlite3_bind_text(head, 1, program.rawValue)
            sqlite3_bind_int64(head, 2, Int64(clamping: book.nextID))
            if let c = book.counted {
                sqlite3_bind_int64(head, 3, c.arrival.nanoseconds)
                sqlite3_bind_int64(head, 4, Int64(clamping: c.place))
                sqlite3_bind_double(head, 5, c.unit.x); sqlite3_bind_double(head, 6, c.unit.y); sqlite3_bind_double(head, 7, c.unit.z)
                sqlite3_bind_int64(head, 8, c.departed ? 1 : 0)
            }
            try database.run(head)
        }
    }
}
