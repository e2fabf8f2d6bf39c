import CSQLite
import LocationCore

/// The device's current approximate-location cell, kept across restarts (docs/privacy.md,
/// "Mechanism"): after a restart the hysteresis goes on from the cell approximate programs
/// were shown, instead of starting from the device's true cell. A device parked within 500 m of
/// a boundary, held in the cell it came from, would otherwise show the other one after a
/// reboot, telling a watcher it is within 500 m of that edge. One row; written on the hub's
/// loop, on its own, at the fix that changed the cell.
public final class PrivacyCellStore: @unchecked Sendable {
    public let database: Database

    public init(database: Database) throws {
        self.database = database
        try database.exec("""
            CREATE TABLE IF NOT EXISTS privacy_cell (
              id INTEGER PRIMARY KEY CHECK (id = 0), cell_row INTEGER NOT NULL, cell_column INTEGER NOT NULL)
            """)
    }

    /// The cell written last, if any.
    public func load() throws -> PrivacyGrid.Cell? {
        let stmt = try database.prepare("SELECT cell_row, cell_column FROM privacy_cell WHERE id = 0")
        defer { sqlite3_finalize(stmt) }
        guard try database.step(stmt) else { return nil }
        return PrivacyGrid.Cell(row: Int(sqlite3_column_int64(stmt, 0)), column: Int(sqlite3_column_int64(stmt, 1)))
    }

    func write(_ cell: PrivacyGrid.Cell) throws {
        let upsert = try database.prepare("""
            INSERT INTO privacy_cell (id, cell_row, cell_column) VALUES (0, ?, ?)
            ON CONFLICT (id) DO UPDATE SET cell_row = excluded.cell_row, cell_column = excluded.cell_column
            """)
        defer { sqlite3_finalize(upsert) }
        sqlite3_bind_int64(upsert, 1, Int64(cell.row))
        sqlite3_bind_int64(upsert, 2, Int64(cell.column))
        try database.run(upsert)
    }
}
