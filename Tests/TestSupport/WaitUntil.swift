import Foundation

/// What a test helper throws when a process or socket it drives fails.
public struct TestFailure: Error, CustomStringConvertible {
    public var description: String
    public init(description: String) { self.description = description }
}

/// Polls `condition` (a state another process, thread or the daemon's loop changes) every few
/// milliseconds until it holds or `timeout` seconds pass; returns whether it held. The tests'
/// one wait: the deadline only ends a hang, it orders nothing.
public func waitUntil(timeout: Double = 10, _ condition: () async throws -> Bool) async rethrows -> Bool {
    let deadline = ContinuousClock.now + .milliseconds(Int(timeout * 1000))
    while ContinuousClock.now < deadline {
        if try await condition() { return true }
        try? await Task.sleep(for: .milliseconds(5))
    }
    return try await condition()
}

/// The same wait for synchronous tests: throws after `timeout` seconds, naming `what` with
/// `detail()` (a process's log).
public func waitUntil(_ what: String, timeout: Double = 30, detail: () -> String = { "" }, _ condition: () throws -> Bool) throws {
    let deadline = ContinuousClock.now + .milliseconds(Int(timeout * 1000))
    while try !condition() {
        guard ContinuousClock.now < deadline else { throw TestFailure(description: "timed out waiting for \(what)\n\(detail())") }
        usleep(5_000)
    }
}
