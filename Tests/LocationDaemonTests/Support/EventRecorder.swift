import Foundation
import LocationCore

/// Records what a source reports (through its sink and `onDeviceDeactivated`) and lets a test
/// await a specific event. Waiting is driven by the events themselves: each recorded event
/// wakes the waiters whose condition it satisfies. The timeout is only a failure guard.
final class EventRecorder: @unchecked Sendable {
    enum Event: Hashable, Sendable {
        case input(EngineInput)
        case deviceDeactivated(String)
    }

    private struct Waiter {
        var from: Int
        var match: @Sendable (Event) -> Bool
        var continuation: CheckedContinuation<Int?, Never>
    }

    private let lock = NSLock()
    private var recorded: [Event] = []
    private var waiters: [UInt64: Waiter] = [:]
    private var nextID: UInt64 = 0

    /// Pass as `GPSDSource`'s sink.
    var sink: @Sendable (EngineInput) -> Void { { [self] in record(.input($0)) } }
    /// Pass as `GPSDSource`'s `onDeviceDeactivated`.
    var deviceDeactivated: @Sendable (String) -> Void { { [self] in record(.deviceDeactivated($0)) } }

    var events: [Event] { lock.withLock { recorded } }
    var count: Int { lock.withLock { recorded.count } }

    var fixes: [Fix] {
        events.compactMap { if case .input(.fix(let f)) = $0 { return f } else { return nil } }
    }

    func record(_ event: Event) {
        let (index, ready): (Int, [CheckedContinuation<Int?, Never>]) = lock.withLock {
            recorded.append(event)
            let index = recorded.count - 1
            var ready: [CheckedContinuation<Int?, Never>] = []
            for (id, w) in waiters where index >= w.from && w.match(event) {
                waiters[id] = nil
                ready.append(w.continuation)
            }
            return (index, ready)
        }
        for c in ready { c.resume(returning: index) }
    }

    /// Index of the first event at index ≥ `from` that satisfies `match`, waiting for it up to
    /// `timeout` seconds; nil on timeout.
    func first(from: Int = 0, timeout: Double = 10,
               where match: @escaping @Sendable (Event) -> Bool) async -> Int? {
        let id: UInt64 = lock.withLock { nextID += 1; return nextID }
        return await withCheckedContinuation { (c: CheckedContinuation<Int?, Never>) in
            let found: Int? = lock.withLock {
                if from < recorded.count,
                   let i = recorded[from...].firstIndex(where: match) { return i }
                waiters[id] = Waiter(from: from, match: match, continuation: c)
                return nil
            }
            if let found { c.resume(returning: found); return }
            Task { [self] in
                try? await Task.sleep(nanoseconds: UInt64(timeout * 1e9))
                let w: Waiter? = lock.withLock { waiters.removeValue(forKey: id) }
                w?.continuation.resume(returning: nil)
            }
        }
    }

    /// `first(from:timeout:where:)` for one exact input.
    func first(_ input: EngineInput, from: Int = 0, timeout: Double = 10) async -> Int? {
        await first(from: from, timeout: timeout) { $0 == .input(input) }
    }

    /// The first `.fix` at index ≥ `from`.
    func firstFix(from: Int = 0, timeout: Double = 10) async -> Int? {
        await first(from: from, timeout: timeout) {
            if case .input(.fix) = $0 { return true } else { return false }
        }
    }

    /// The first end-of-replay marker at index ≥ `from`.
    func firstDeviceDeactivated(from: Int = 0, timeout: Double = 10) async -> Int? {
        await first(from: from, timeout: timeout) {
            if case .deviceDeactivated = $0 { return true } else { return false }
        }
    }
}
