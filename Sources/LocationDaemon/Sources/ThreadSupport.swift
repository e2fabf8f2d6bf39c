import Glibc

/// A mutex plus condition variable (pthread), for the few shell components that run on
/// their own thread instead of the Swift concurrency pool.
final class ConditionLock: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let cond = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    init() {
        pthread_mutex_init(mutex, nil)
        var attr = pthread_condattr_t()
        pthread_condattr_init(&attr)
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC)
        pthread_cond_init(cond, &attr)
        pthread_condattr_destroy(&attr)
    }

    deinit {
        pthread_cond_destroy(cond)
        pthread_mutex_destroy(mutex)
        cond.deallocate()
        mutex.deallocate()
    }

    func withLock<R>(_ body: () throws -> R) rethrows -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }

    /// Wakes every waiter (call with or without the lock held).
    func broadcast() { pthread_cond_broadcast(cond) }

    /// Waits, with the lock held by the caller inside `withLock`, until `done()` or until
    /// `seconds` have passed. Returns `done()`.
    func wait(seconds: Double, until done: () -> Bool) -> Bool {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let total = Int64(now.tv_nsec) + Int64(max(0, seconds) * 1e9)
        var deadline = timespec(tv_sec: now.tv_sec + Int(total / 1_000_000_000),
                                tv_nsec: Int(total % 1_000_000_000))
        while !done() {
            if pthread_cond_timedwait(cond, mutex, &deadline) == ETIMEDOUT { return done() }
        }
        return true
    }
}

/// Starts `body` on a new joinable pthread (not a Swift concurrency thread).
func spawnThread(_ body: @escaping @Sendable () -> Void) -> pthread_t? {
    final class Box { let body: @Sendable () -> Void; init(_ b: @escaping @Sendable () -> Void) { body = b } }
    let context = Unmanaged.passRetained(Box(body)).toOpaque()
    var thread = pthread_t()
    let rc = pthread_create(&thread, nil, { raw in
        let box = Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue()
        box.body()
        return nil
    }, context)
    if rc != 0 {
        Unmanaged<Box>.fromOpaque(context).release()
        return nil
    }
    return thread
}
