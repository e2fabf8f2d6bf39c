import CSQLite
import Glibc
import LocationCore

/// Registrations and last states in the daemon's SQLite database (docs/regions.md,
/// "Persistence"). Writes are synchronous on the hub's loop: registrations and state changes are
/// rare (a state change is a region event), and a row update takes tens of microseconds.
/// Its writes throw: the hub undoes a registration that was not stored, and rolls back a fix's
/// transaction as a whole.
public final class RegionStore: @unchecked Sendable {
    public let database: Database
    public var path: String { database.path }

    public convenience init(path: String) throws {
        try self.init(database: Database(path: path))
    }

    public init(database: Database) throws {
        self.database = database
        try database.exec("""
            CREATE TABLE IF NOT EXISTS regions (
              program TEXT NOT NULL, id TEXT NOT NULL, position INTEGER NOT NULL,
              latitude REAL NOT NULL, longitude REAL NOT NULL, radius REAL NOT NULL,
              notify_entry INTEGER NOT NULL, notify_exit INTEGER NOT NULL, notify_initial INTEGER NOT NULL,
              dwell REAL, metadata TEXT,
              state TEXT NOT NULL, entered_at INTEGER, dwell_reported INTEGER NOT NULL,
              PRIMARY KEY (program, id))
            """)
    }

    private func prepare(_ sql: String) throws -> OpaquePointer { try database.prepare(sql) }
    private func transaction(_ body: () throws -> Void) throws { try database.transaction(body) }
    private var db: OpaquePointer? { database.handle }

    /// Every program's remembered regions, in registration order.
    public func load() throws -> [(program: ProgramID, records: [RegionRecord])] {
        let stmt = try prepare("""
            SELECT program, id, latitude, longitude, radius, notify_entry, notify_exit, notify_initial,
                   dwell, metadata, state, entered_at, dwell_reported FROM regions ORDER BY program, position
            """)
        defer { sqlite3_finalize(stmt) }
        var out: [(program: ProgramID, records: [RegionRecord])] = []
        while try database.step(stmt) {
            func text(_ i: Int32) -> String? { sqlite3_column_text(stmt, i).map { String(cString: $0) } }
            func isNull(_ i: Int32) -> Bool { sqlite3_column_type(stmt, i) == SQLITE_NULL }
            let program = ProgramID(text(0) ?? "")
            let region = Region(
                id: text(1) ?? "", center: Coordinate(latitude: sqlite3_column_double(stmt, 2), longitude: sqlite3_column_double(stmt, 3)),
                radius: sqlite3_column_double(stmt, 4), notifyOnEntry: sqlite3_column_int(stmt, 5) != 0,
                notifyOnExit: sqlite3_column_int(stmt, 6) != 0, notifyInitialState: sqlite3_column_int(stmt, 7) != 0,
                dwell: isNull(8) ? nil : sqlite3_column_double(stmt, 8), metadata: text(9))
            let record = RegionRecord(
                region: region, state: RegionState(rawValue: text(10) ?? "") ?? .unknown,
                enteredAt: isNull(11) ? nil : Timestamp(nanoseconds: sqlite3_column_int64(stmt, 11)),
                dwellReported: sqlite3_column_int(stmt, 12) != 0)
            if out.last?.program == program { out[out.count - 1].records.append(record) } else { out.append((program, [record])) }
        }
        return out
    }

    /// Adds `records` (new registrations of `program`) after its others, in one transaction.
    /// Only the new rows are written: a program may hold 10,000 regions, and rewriting them all
    /// for each registration blocked the loop for tens of milliseconds a request.
    func insertRegions(of program: ProgramID, _ records: [RegionRecord]) throws {
        try transaction {
            let last = try prepare("SELECT COALESCE(MAX(position), -1) FROM regions WHERE program = ?")
            defer { sqlite3_finalize(last) }
            locationd_sqlite3_bind_text(last, 1, program.rawValue)
            guard try database.step(last) else { throw StoreError(description: "\(path): \(database.lastError)") }
            let first = sqlite3_column_int64(last, 0) + 1
            let insert = try prepare("""
                INSERT INTO regions (program, id, position, latitude, longitude, radius, notify_entry, notify_exit,
                  notify_initial, dwell, metadata, state, entered_at, dwell_reported)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """)
            defer { sqlite3_finalize(insert) }
            for (i, r) in records.enumerated() {
                sqlite3_reset(insert)
                locationd_sqlite3_bind_text(insert, 1, program.rawValue)
                locationd_sqlite3_bind_text(insert, 2, r.region.id)
                sqlite3_bind_int64(insert, 3, first + Int64(i))
                sqlite3_bind_double(insert, 4, r.region.center.latitude)
                sqlite3_bind_double(insert, 5, r.region.center.longitude)
                sqlite3_bind_double(insert, 6, r.region.radius)
                sqlite3_bind_int(insert, 7, r.region.notifyOnEntry ? 1 : 0)
                sqlite3_bind_int(insert, 8, r.region.notifyOnExit ? 1 : 0)
                sqlite3_bind_int(insert, 9, r.region.notifyInitialState ? 1 : 0)
                if let d = r.region.dwell { sqlite3_bind_double(insert, 10, d) } else { sqlite3_bind_null(insert, 10) }
                if let m = r.region.metadata { locationd_sqlite3_bind_text(insert, 11, m) } else { sqlite3_bind_null(insert, 11) }
                bindState(insert, r, state: 12, entered: 13, dwell: 14)
                guard sqlite3_step(insert) == SQLITE_DONE else { throw StoreError(description: String(cString: sqlite3_errmsg(db))) }
            }
        }
    }

    /// Replaces all of `program`'s registrations with `records`, in one transaction.
    func writeRegions(of program: ProgramID, _ records: [RegionRecord]) throws {
        try transaction {
            try deleteRegions(of: program, nil)
            try insertRegions(of: program, records)
        }
    }

    /// Deletes `program`'s registrations `ids` (nil: all of them), in one transaction.
    func deleteRegions(of program: ProgramID, _ ids: [String]?) throws {
        try transaction {
            let delete = try prepare(ids == nil ? "DELETE FROM regions WHERE program = ?"
                                                : "DELETE FROM regions WHERE program = ? AND id = ?")
            defer { sqlite3_finalize(delete) }
            for id in ids ?? [""] {
                sqlite3_reset(delete)
                locationd_sqlite3_bind_text(delete, 1, program.rawValue)
                if ids != nil { locationd_sqlite3_bind_text(delete, 2, id) }
                guard sqlite3_step(delete) == SQLITE_DONE else { throw StoreError(description: String(cString: sqlite3_errmsg(db))) }
            }
        }
    }

    /// The states of `records`, inside the caller's transaction when there is one.
    func writeStates(of program: ProgramID, _ records: [RegionRecord]) throws {
        try transaction {
            let update = try prepare("UPDATE regions SET state = ?, entered_at = ?, dwell_reported = ? WHERE program = ? AND id = ?")
            defer { sqlite3_finalize(update) }
            for r in records {
                sqlite3_reset(update)
                bindState(update, r, state: 1, entered: 2, dwell: 3)
                locationd_sqlite3_bind_text(update, 4, program.rawValue)
                locationd_sqlite3_bind_text(update, 5, r.region.id)
                try database.run(update)
            }
        }
    }

    private func bindState(_ stmt: OpaquePointer, _ r: RegionRecord, state: Int32, entered: Int32, dwell: Int32) {
        locationd_sqlite3_bind_text(stmt, state, r.state.rawValue)
        if let e = r.enteredAt { sqlite3_bind_int64(stmt, entered, e.nanoseconds) } else { sqlite3_bind_null(stmt, entered) }
        sqlite3_bind_int(stmt, dwell, r.dwellReported ? 1 : 0)
    }
}
