import Foundation
@testable import LocationDaemon
import Testing
#if canImport(Glibc)
import Glibc
#endif

extension SystemdTests {
    /// A stop while starting exits at once, without the graceful stop's checkpoint: what the
    /// start wrote (the tables, the version stamp) stays in the `-wal`, as after a kill. The
    /// file alone does not hold everything then (docs/regions.md, "Persistence").
    @Test func aStopWhileStartingLeavesTheWALAsAKillDoes() async throws {
        let (daemon, fd) = try await Self.heldInItsStart()
        defer { daemon.stop(); close(fd) }
        daemon.signal(SIGTERM)
        #expect(daemon.waitForExit(timeout: 5) == 0, "\(daemon.stderrText())")
        let wal = daemon.directory.appendingPathComponent("locationd.db-wal").path
        var st = stat()
        #expect(stat(wal, &st) == 0 && st.st_size > 0, "the -wal: \(st.st_size) bytes")
        let doc = try String(contentsOf: ConfigTests.repo.appendingPathComponent("docs/regions.md"), encoding: .utf8)
        #expect(doc.contains("A stop while the daemon is still starting"), "docs/regions.md does not say so")
    }
}
