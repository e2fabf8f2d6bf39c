import CSQLite
import Logging
import LocationCore
import NIOCore

/// The identity each program had in its latest session: uid, groups and executable.
/// A program's regions, background monitors and queue outlive its connections, so a reload or
/// a restart matches the policy against this identity to decide what the program keeps while
/// it is away (docs/privacy.md, "Programs that are away"). The groups matter: a service started
/// with `SupplementaryGroups=` has groups the user database does not list.
///
/// Kept in memory (loaded at start) and in the daemon's database; used on the hub's loop only.
public final class ProgramIdentities: @unchecked Sendable {
    public let database: Database
    private var known: [ProgramID: PeerIdentity] = [:]
    /// Recorded in memory but not in the database (the write failed): written again at the
    /// next chance (`writeUnsaved`), or a restart would find no identity for an away program.
    private var unsaved: Set<ProgramID> = []

    public init(database: Database) throws {
        self.database = database
        try database.exec("""
            CREATE TABLE IF NOT EXISTS program_identity (
              program TEXT PRIMARY KEY, uid INTEGER NOT NULL, gid INTEGER NOT NULL,
              groups TEXT NOT NULL, executable TEXT) WITHOUT ROWID
            """)
        let stmt = try database.prepare("SELECT program, uid, gid, groups, executable FROM program_identity")
        defer { sqlite3_finalize(stmt) }
        while try database.step(stmt) {
            let program = ProgramID(String(cString: sqlite3_column_text(stmt, 0)))
            let groups = String(cString: sqlite3_column_text(stmt, 3)).split(separator: ",").compactMap { UInt32($0) }
            let stored = sqlite3_column_text(stmt, 4).map { String(cString: $0) }
            known[program] = PeerIdentity(
                pid: 0, uid: UInt32(truncatingIfNeeded: sqlite3_column_int64(stmt, 1)),
                gid: UInt32(truncatingIfNeeded: sqlite3_column_int64(stmt, 2)), groups: groups,
                executable: stored.map { $0.hasPrefix(Self.unverifiedMark) ? String($0.dropFirst()) : $0 },
                executableVerified: stored?.hasPrefix(Self.unverifiedMark) != true)
        }
    }

    /// Before the path of an executable that was not verified to be the file at it
    /// (`PeerIdentity.executableVerified`): no absolute path starts with it, and a row without it
    /// reads as verified.
    static let unverifiedMark = "?"

    /// Forgets the recorded identity of every program `unneeded` says is not needed.
    public func forget(where unneeded: (ProgramID) -> Bool) {
        for program in known.keys where unneeded(program) { forget(program) }
    }

    /// Forgets `program`'s recorded identity. A failed delete is reported; the row is then
    /// forgotten at the next start's pruning (it is only ever read for a program that keeps
    /// something).
    public func forget(_ program: ProgramID) {
        guard known.removeValue(forKey: program) != nil else { return }
        unsaved.remove(program)
        do {
            let delete = try database.prepare("DELETE FROM program_identity WHERE program = ?")
            defer { sqlite3_finalize(delete) }
            locationd_sqlite3_bind_text(delete, 1, program.rawValue)
            try database.run(delete)
        } catch {
            database.report("program identity", error)
        }
    }

    /// The recorded identity of `program`, or nil if none of its sessions was recorded.
    public func recorded(_ program: ProgramID) -> PeerIdentity? { known[program] }

    /// Remembers `identity` as its program's (one of its processes asked for a session). The
    /// pid is not kept: it names a process, and is reused once that process is gone. A failed
    /// write is reported and the identity kept in memory (it decides until the next restart),
    /// and written again at the next chance (`writeUnsaved`).
    public func record(_ identity: PeerIdentity) {
        var kept = identity
        kept.pid = 0
        let program = identity.program
        guard known[program] != kept || unsaved.contains(program) else { return }
        known[program] = kept
        write(program, kept)
    }

    /// Whether an identity is recorded in memory only.
    public var hasUnsaved: Bool { !unsaved.isEmpty }
    /// How many are.
    public var unsavedCount: Int { unsaved.count }
    private var lastAttempt: NIODeadline?

    /// `writeUnsaved` at most every `UnwrittenChanges.retryInterval`: from the fixes, so an
    /// identity is written even while nothing else is (a device standing still).
    func writeUnsaved(pacedAt now: NIODeadline) {
        if let lastAttempt, now - lastAttempt < UnwrittenChanges.retryInterval { return }
        lastAttempt = now
        writeUnsaved()
    }

    /// Tries again to write the identities whose write failed. *Reason:* written only when it
    /// changes, after one failure (a full disk at the session's start) the row would never come,
    /// and a restart would discard the away program's queue and suspend its regions as if it had
    /// never been recorded.
    public func writeUnsaved() {
        for program in unsaved {
            if let kept = known[program] { write(program, kept) } else { unsaved.remove(program) }
        }
    }

    private func write(_ program: ProgramID, _ kept: PeerIdentity) {
        do {
            let upsert = try database.prepare("""
                INSERT INTO program_identity (program, uid, gid, groups, executable) VALUES (?, ?, ?, ?, ?)
                ON CONFLICT (program) DO UPDATE SET uid = excluded.uid, gid = excluded.gid,
                  groups = excluded.groups, executable = excluded.executable
                """)
            defer { sqlite3_finalize(upsert) }
            locationd_sqlite3_bind_text(upsert, 1, program.rawValue)
            sqlite3_bind_int64(upsert, 2, Int64(kept.uid))
            sqlite3_bind_int64(upsert, 3, Int64(kept.gid))
            locationd_sqlite3_bind_text(upsert, 4, kept.groups.map(String.init).joined(separator: ","))
            if let exe = kept.executable {
                locationd_sqlite3_bind_text(upsert, 5, kept.executableVerified ? exe : Self.unverifiedMark + exe)
            } else {
                sqlite3_bind_null(upsert, 5)
            }
            try database.run(upsert)
            if unsaved.remove(program) != nil {
                Logger(label: "locationd").notice("database: program identity written after an earlier failure", metadata: ["program": "\(program.rawValue)"])
            }
        } catch {
            // Once per program until it is written: the retries come with every later write.
            if unsaved.insert(program).inserted { database.report("program identity", error) }
        }
    }
}
