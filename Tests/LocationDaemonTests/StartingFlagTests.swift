import Foundation
@testable import LocationDaemon
import Synchronization
import TestSupport
import Testing

/// A stop signal while starting exits (`Daemon.run`); the start clears the flag before the
/// service runs. The check and the exit are one step: a `clear()` meanwhile waits for it, or
/// the daemon could send READY=1 and serve while the signal's thread runs exit(0).
@Suite struct StartingFlagTests {
    @Test func clearWaitsForAStopUnderWay() async throws {
        let flag = Daemon.StartingFlag()
        let cleared = Mutex(false)
        var clearedDuringBody = true
        let ran = flag.whileSet {
            let thread = Thread { flag.clear(); cleared.withLock { $0 = true } }
            thread.start()
            Thread.sleep(forTimeInterval: 0.2)  // time for clear() to slip in, were it not excluded
            clearedDuringBody = cleared.withLock { $0 }
        }
        #expect(ran)
        #expect(!clearedDuringBody, "clear() ran while the stop was under way")
        #expect(await waitUntil(timeout: 5) { cleared.withLock { $0 } })
        #expect(!flag.whileSet { Issue.record("ran after clear()") })
    }
}
