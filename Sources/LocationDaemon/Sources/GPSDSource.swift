import Glibc
import LocationCore

/// Reads fixes from gpsd through libgps on its own thread and reports them as `EngineInput`.
///
/// - Each TPV with a position (mode ≥ 2, finite latitude/longitude) and a time becomes one
///   `.fix`; a TPV with mode ≤ 1 becomes `.noFix(time)` (see `GPSDTPV.engineInput`).
/// - `.source(.connected)` after `gps_open` + `gps_stream` succeed; `.source(.disconnected)`
///   when the connection cannot be made or is lost, and on `stop()` if connected. Only
///   changes are reported: the first failed attempt reports `.disconnected`, later failed
///   retries report nothing.
/// - After a failure it retries with capped exponential backoff (`Configuration`).
/// - All sink calls come from the source's thread, in order; the sink must not block long
///   (gpsd drops a client that stops reading).
///
/// Thread-safe: `start()`, `stop()` and `statistics` may be called from any thread.
public final class GPSDSource: @unchecked Sendable {
    public struct Configuration: Hashable, Sendable {
        /// gpsd host (name or address).
        public var host: String
        /// gpsd port or service name; default `DEFAULT_GPSD_PORT` ("2947").
        public var port: String
        /// First reconnect delay, seconds.
        public var initialBackoff: Double
        /// Cap on the reconnect delay, seconds.
        public var maximumBackoff: Double
        /// How long one `gps_waiting` waits, seconds: bounds how late `stop()` is noticed.
        public var pollInterval: Double

        public init(
            host: String = "localhost", port: String = defaultGPSDPort,
            initialBackoff: Double = 0.1, maximumBackoff: Double = 1.0, pollInterval: Double = 0.1
        ) {
            self.host = host; self.port = port
            self.initialBackoff = initialBackoff; self.maximumBackoff = maximumBackoff
            self.pollInterval = pollInterval
        }
    }

    /// Counters, for logs, `locationctl status` and tests.
    public struct Statistics: Hashable, Sendable {
        /// Successful `gps_open` + `gps_stream`.
        public var connections = 0
        /// Failed connection attempts (gpsd absent, refused, …).
        public var failedAttempts = 0
        /// Established connections that were lost (`gps_read` -1, `gps_waiting` error).
        public var connectionsLost = 0
        /// Reports read (any class).
        public var messages = 0
        /// TPVs read.
        public var tpvs = 0
        /// `.fix` inputs reported.
        public var fixes = 0
        /// `.noFix` inputs reported.
        public var noFixes = 0
        /// TPVs that carried a mode ≥ 2 but no time or no usable position (not reported).
        public var ignoredTPVs = 0
        /// `DEVICE … "activated":0` reports (a replayed log's end).
        public var devicesDeactivated = 0
        /// The last libgps error, if any.
        public var lastError: GPSDError?
        public init() {}
    }

    public let configuration: Configuration
    private let sink: @Sendable (EngineInput) -> Void
    private let onDeviceDeactivated: (@Sendable (String) -> Void)?
    private let makeConnection: @Sendable () -> any GPSDConnection

    private let lock = ConditionLock()
    // Guarded by `lock`.
    private var thread: pthread_t?
    private var stopRequested = false
    private var stats = Statistics()
    private var wanted = true

    /// - Parameters:
    ///   - configuration: host, port, backoff.
    ///   - sink: receives fixes, no-fix epochs and `.source` changes (the daemon passes
    ///     `hub.submit`). Called on the source's thread.
    ///   - onDeviceDeactivated: called (on the source's thread, after the sink has seen every
    ///     earlier report) with the device path when gpsd reports `"activated":0` — for a
    ///     replayed log, its end.
    public convenience init(
        configuration: Configuration = Configuration(),
        sink: @escaping @Sendable (EngineInput) -> Void,
        onDeviceDeactivated: (@Sendable (String) -> Void)? = nil
    ) {
        self.init(configuration: configuration, connection: { LibGPSConnection() },
                  sink: sink, onDeviceDeactivated: onDeviceDeactivated)
    }

    /// Testing seam: `connection` makes a fresh connection for each attempt.
    init(
        configuration: Configuration,
        connection: @escaping @Sendable () -> any GPSDConnection,
        sink: @escaping @Sendable (EngineInput) -> Void,
        onDeviceDeactivated: (@Sendable (String) -> Void)? = nil
    ) {
        self.configuration = configuration
        self.makeConnection = connection
        self.sink = sink
        self.onDeviceDeactivated = onDeviceDeactivated
    }

    deinit { stop() }

    /// Starts the reader thread (no-op if already running). Returns `false` only if the
    /// thread could not be created.
    @discardableResult
    public func start() -> Bool {
        lock.withLock {
            if thread != nil { return true }
            stopRequested = false
            thread = spawnThread { [self] in run() }
            return thread != nil
        }
    }

    /// Stops the reader thread and waits for it to finish (at most about one
    /// `pollInterval`, or one `gps_open` attempt, later). Closes the connection with
    /// `gps_close`. Idempotent. Must not be called from the sink.
    public func stop() {
        let t: pthread_t? = lock.withLock {
            stopRequested = true
            lock.broadcast()
            defer { thread = nil }
            return thread
        }
        if let t { pthread_join(t, nil) }
    }

    public var isRunning: Bool { lock.withLock { thread != nil } }

    /// Receiver gating (docs/privacy.md, "Receiver"): with `false` the source closes its gpsd
    /// connection (so gpsd may close the device) and stays closed until `true` again.
    public func setWanted(_ value: Bool) {
        lock.withLock {
            wanted = value
            lock.broadcast()
        }
    }

    /// Whether the source holds (or tries to hold) a gpsd watch now.
    public var isWanted: Bool { lock.withLock { wanted } }

    private var shouldRead: Bool { lock.withLock { wanted && !stopRequested } }

    public var statistics: Statistics { lock.withLock { stats } }

    // MARK: - The reader thread

    private var shouldStop: Bool { lock.withLock { stopRequested } }

    private func count(_ update: (inout Statistics) -> Void) { lock.withLock { update(&stats) } }

    /// Sleeps `seconds` unless `stop()` is called meanwhile; returns whether to stop.
    private func pause(_ seconds: Double) -> Bool {
        lock.withLock { lock.wait(seconds: seconds) { stopRequested } }
    }

    private func run() {
        var backoff = Backoff(initial: configuration.initialBackoff,
                              maximum: configuration.maximumBackoff)
        var reported: SourceState?   // last `.source` state sent; nil before the first
        func report(_ state: SourceState) {
            guard reported != state else { return }
            reported = state
            sink(.source(state))
        }

        while !shouldStop {
            // Released: no connection to gpsd until someone needs fixes again.
            let stop = lock.withLock { () -> Bool in
                while !wanted && !stopRequested { _ = lock.wait(seconds: 1) { wanted || stopRequested } }
                return stopRequested
            }
            if stop { break }
            let connection = makeConnection()
            if let error = connection.open(host: configuration.host, port: configuration.port) {
                count { $0.failedAttempts += 1; $0.lastError = error }
                report(.disconnected)
                if pause(backoff.next()) { break }
                continue
            }
            count { $0.connections += 1 }
            backoff.reset()
            report(.connected)

            let lost = readLoop(connection)
            connection.close()
            if lost == nil { report(.disconnected) }  // released (or stopping)
            if let lost {
                count { $0.connectionsLost += 1; $0.lastError = lost }
                report(.disconnected)
                if pause(backoff.next()) { break }
            }
        }
        // Stopped: a consumer that stops the source should not keep believing it is connected.
        if reported == .connected { report(.disconnected) }
    }

    /// Reads until the connection fails (returns the error) or `stop()` (returns nil).
    private func readLoop(_ connection: any GPSDConnection) -> GPSDError? {
        while shouldRead {
            switch connection.wait(timeout: configuration.pollInterval) {
            case .timeout:
                continue
            case .failed(let error):
                return error
            case .ready:
                switch connection.read() {
                case .incomplete:
                    continue
                case .failed(let error):
                    return error
                case .message(let message):
                    handle(message)
                }
            }
        }
        return nil
    }

    private func handle(_ message: GPSDMessage) {
        switch message {
        case .tpv(let tpv):
            let input = tpv.engineInput
            count {
                $0.messages += 1; $0.tpvs += 1
                switch input {
                case .fix?: $0.fixes += 1
                case .noFix?: $0.noFixes += 1
                default: $0.ignoredTPVs += 1
                }
            }
            if let input { sink(input) }
        case .deviceDeactivated(let path):
            count { $0.messages += 1; $0.devicesDeactivated += 1 }
            onDeviceDeactivated?(path)
        case .other:
            count { $0.messages += 1 }
        }
    }
}
