/// Polls `condition` (a state another process, thread or the daemon's loop changes) every few
/// milliseconds until it holds or `timeout` seconds pass; returns whether it held. The tests'
/// one wait: the deadline only ends a hang, it orders nothing.
func waitUntil(timeout: Double = 10, _ condition: () async throws -> Bool) async rethrows -> Bool {
    let deadline = ContinuousClock.now + .milliseconds(Int(timeout * 1000))
    while ContinuousClock.now < deadline {
        if try await condition() { return true }
        try? await Task.sleep(for: .milliseconds(5))
    }
    return try await condition()
}
