import Dispatch
import LocationCore
import LocationProtocol
import Logging
import NIOCore
import NIOPosix
import Synchronization
import SystemdLogging
#if canImport(Glibc)
import Glibc
import TOMLConfig
#endif

/// Wires the shell together: one event loop for the hub, every connection and the gpsd source
/// (a replay source paces itself on its own thread), the socket server (bound here, or passed by systemd), systemd
/// notifications and the watchdog; runs until SIGTERM/SIGINT (or, for a replay without
/// `--loop`, until the log ends and subscribers have been sent everything). SIGHUP reloads the
/// config file. docs/systemd.md describes the whole life cycle.
public enum Daemon {
    public static let version = "0.1.0"

    public static func run(_ options: DaemonOptions, logControl: LogControl = LogControl(), logger: Logger) async throws {
        // The signals are caught first, before the database is opened and restored (seconds with
        // many regions). A SIGHUP sent before would take its default action on the main thread
        // (the only one not blocking it, parked in pause()): the daemon would die of it (status
        // 129), which systemd counts as a clean end that Restart=on-failure does not restart. What
        // comes meanwhile waits in `wakes`: a reload once the service runs. A SIGTERM or SIGINT
        // before the service runs ends the start at once (nothing is served yet, and SQLite's
        // writes survive an exit at any point): held back, a start stuck on its database (a hung
        // network filesystem) would wait for TimeoutStopSec='s SIGKILL.
        let (wakes, wake) = AsyncStream<DaemonService.Wake>.makeStream()
        let stall = DaemonService.testStallSignal()
        let starting = StartingFlag()
        let signals = ProcessSignals([SIGTERM, SIGINT, SIGHUP] + (stall.map { [$0] } ?? [])) { number in
            if number == SIGHUP {
                wake.yield(.reload(answer: nil))
            } else if number == stall {
                wake.yield(.stall)
            } else if !starting.whileSet({
                logger.notice("stopped while starting (signal \(number)): nothing was served yet")
                LogBackend.exit(0)
            }) {
                wake.yield(.stop)
            }
        }
        defer { signals.cancel() }
        raiseDescriptorLimit(logger: logger)
        if !ProgramIdentity.canIdentifyOtherUsers() { logger.warning("\(ProgramIdentity.cannotIdentifyWarning)") }
        for warning in options.warnings { logger.warning("\(warning)") }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let loop = group.next()
        // `--database none` keeps the same tables in memory: nothing survives a restart.
        // The lock first: a second daemon must not touch the file at all.
        let lock = try options.databasePath.map { try DatabaseLock(database: $0) }
        defer { withExtendedLifetime(lock) {} }
        let database = try Database(path: options.databasePath ?? ":memory:")
        try lock?.holdDatabaseFile()  // a file SQLite has just made
        let store = try RegionStore(database: database)
        let loaded = try options.gazetteer.isEmpty ? nil : GazetteerFile.load(options.gazetteer)
        if let notUsed = loaded?.indexNotUsed { logger.warning("gazetteer index not used", metadata: ["reason": "\(notUsed)"]) }
        if let loaded {
            logger.info("gazetteer", metadata: ["file": "\(loaded.index ?? options.gazetteer)", "places": "\(loaded.gazetteer.count)"])
        }
        let gazetteer = loaded?.gazetteer
        let queue = try EventQueue(database: database, limit: options.queueLimit, gazetteer: gazetteer)
        let identities = try ProgramIdentities(database: database)
        let privacyCells = try PrivacyCellStore(database: database)
        let placeStore = try PlaceStore(database: database)
        let places = try placeStore.load(limit: options.maxPlaces)
        let visitStore = try VisitStore(database: database)
        let visits = try visitStore.load(limit: options.maxVisits)
        let hub = Hub(eventLoop: loop, sourceDescription: describe(options.source), logger: logger,
                      regionLimits: options.regionLimits, maxBackgroundProgramsPerUser: options.maxBackgroundProgramsPerUser,
                      regionStore: store, queue: queue, identities: identities,
                      privacyCells: privacyCells, publicationTicks: options.source.isLive, gazetteer: gazetteer,
                      placeStore: placeStore, visitStore: visitStore)
        // The approximate-location grid: a fixed seed (replays, tests) or the device secret,
        // created once in the state directory (docs/privacy.md).
        let secret = try options.privacySeed ?? options.databasePath.map { try DeviceSecret.load(path: DeviceSecret.path(forDatabase: $0)) }
            ?? DeviceSecret.random()
        let cell = try privacyCells.load()
        try await loop.submit {
            hub.policy = options.policy
            hub.privacySecret = secret
            if let cell { hub.restorePrivacyCell(cell) }
            hub.restorePlaces(places, limit: options.maxPlaces)
            hub.restoreVisits(visits, limit: options.maxVisits)
        }.get()
        logger.info("policy", metadata: ["rules": "\(options.policy.rules.map(\.name))",
                                         "default": "\(options.policy.defaultRule.authorization.rawValue) \(options.policy.defaultRule.accuracy.rawValue)"])
        defer { group.shutdownGracefully { _ in } }
        try await restoreRegions(from: store, into: hub, logger: logger)
        try await restoreBackground(from: queue, into: hub, logger: logger)
        // The policy may have changed while the daemon was down.
        try await loop.submit { hub.enforcePolicy() }.get()
        let service = DaemonService(options: options, hub: hub, logControl: logControl, logger: logger)
        starting.clear()
        try await service.run(wakes: wakes, wake: wake)
    }

    /// Set until the service runs: what a stop signal does then (`run`). `whileSet` runs its
    /// body (the exit) under the lock, so `clear()` cannot slip in between the check and the
    /// exit: a start that cleared the flag goes on to serve (READY=1) only once no exit is under
    /// way, and a stop signal after `clear()` is always a `.stop` wake for the service.
    final class StartingFlag: Sendable {
        private let value = Mutex(true)
        var isSet: Bool { value.withLock { $0 } }
        /// Clears the flag; waits for a `whileSet` body under way (the exit: then never returns).
        func clear() { value.withLock { $0 = false } }
        /// Runs `body` under the lock if the flag is set; whether it ran.
        func whileSet(_ body: () -> Void) -> Bool {
            value.withLock { set in
                if set { body() }
                return set
            }
        }
    }

    /// One descriptor per subscriber: lift the soft open-file limit to the hard one, and say so
    /// when even that is too low for 1,000 subscribers (docs/systemd.md, "Open files").
    static func raiseDescriptorLimit(logger: Logger) {
        guard let result = DescriptorLimit.raise() else {
            logger.warning("cannot read the open-file limit (RLIMIT_NOFILE): \(String(cString: strerror(errno)))")
            return
        }
        if let error = result.error {
            logger.warning("cannot raise the open-file limit (RLIMIT_NOFILE) from \(result.before.soft) to \(result.before.hard): \(error)")
        }
        logger.info("open-file limit", metadata: ["soft": "\(result.after.soft)", "hard": "\(result.after.hard)",
                                                  "was": "\(result.before.soft)"])
        if DescriptorLimit.isShort(result.after) {
            logger.notice("open-file limit (RLIMIT_NOFILE) is \(result.after): one descriptor per subscriber, so 1,000 subscribers may not fit; raise it to at least \(DescriptorLimit.useful): LimitNOFILE=16384 in the unit (systemctl edit locationd), or ulimit -n 16384 before starting locationd")
        }
    }

    /// Loads the remembered regions and states into the engine before anything is served.
    static func restoreRegions(from store: RegionStore, into hub: Hub, logger: Logger) async throws {
        let programs = try store.load()
        // Counted as restored only when loaded: a program refused here is logged on its own.
        let (restored, regions) = try await hub.eventLoop.submit { () -> (Int, Int) in
            var restored = 0, regions = 0
            for p in programs {
                do {
                    try hub.restoreRegions(p.records, for: p.program)
                    restored += 1; regions += p.records.count
                } catch {
                    logger.error("cannot restore regions: kept as they are, unmonitored, and the program's region requests are refused (storeFailed) until a start loads them; correct or delete its rows in \(store.path) and restart locationd",
                                 metadata: ["program": "\(p.program)", "error": "\(error)"])
                }
            }
            return (restored, regions)
        }.get()
        var metadata: Logger.Metadata = ["programs": "\(restored)", "regions": "\(regions)", "database": "\(store.path)"]
        if restored < programs.count { metadata["failed"] = "\(programs.count - restored)" }
        logger.info("regions restored", metadata: metadata)
    }

    /// Restarts the background visit/significant monitors and durable subscriptions programs
    /// left running (fresh detectors and filters: their state is not kept, their queued events
    /// are).
    static func restoreBackground(from queue: EventQueue, into hub: Hub, logger: Logger) async throws {
        let monitors = try queue.loadBackground()
        let away = try queue.loadBackground(.durableAway)
        guard !monitors.isEmpty || !away.isEmpty else { return }
        try await hub.eventLoop.submit {
            for m in monitors { hub.restoreBackground(m.program, options: m.options) }
            for a in away { hub.restoreAway(a.program, options: a.options) }
        }.get()
        if !monitors.isEmpty { logger.info("background monitors restored", metadata: ["programs": "\(monitors.count)"]) }
        if !away.isEmpty { logger.info("durable subscriptions away restored", metadata: ["programs": "\(away.count)"]) }
    }

    static func describe(_ source: DaemonOptions.Source) -> String {
        switch source {
        case .gpsd(let host, let port): host.contains(":") ? "gpsd [\(host)]:\(port)" : "gpsd \(host):\(port)"
        case .replay(let path, _, _, _): "replay \(path)"
        }
    }
}

extension Daemon {
    /// Failures of a path that only an administrator can mend (a restart meets them again).
    static let administratorErrnos: Set<Int32> = [EACCES, EPERM, EROFS, ENOTDIR, ELOOP, ENAMETOOLONG]

    /// The exit status for what stopped the daemon: 78 (EX_CONFIG) for a file or directory only
    /// an administrator can mend, which the unit does not restart (`RestartPreventExitStatus=`):
    /// restarted every 2 s, such a start would fail in the same way for good, since that pace never
    /// reaches systemd's start limit; 75 (EX_TEMPFAIL) for a configuration whose check could not
    /// be made for now; 1 for anything that may pass, which the unit restarts.
    public static func exitStatus(for error: any Error) -> Int32 {
        switch error {
        case let e as ConfigError: e.temporary ? 75 : 78
        case let e as StoreError: e.needsAdministrator ? 78 : 1
        case let e as SocketServerError:
            switch e {
            case .notASocket, .cannotCreate, .unreachable: 78
            case .cannotCreateDirectory(_, _, let code, _, _), .system(_, let code): administratorErrnos.contains(code) ? 78 : 1
            case .pathInUse: 1  // another server that may be going away
            }
        default: 1
        }
    }
}

/// Why the daemon stopped on its own with a failure (it exits 1, logging this).
struct DaemonFailure: Error, CustomStringConvertible {
    var description: String
}

/// The daemon's one service: serves the socket, tells systemd it is ready, starts the source,
/// waits for shutdown, stops everything in order (source first so no input arrives late, then
/// the server after flushing subscribers).
final class DaemonService: Sendable {
    /// What wakes the service up: a signal, or the end of a replay.
    enum Wake: Sendable {
        /// SIGTERM or SIGINT, or a replay without `--loop` has ended.
        case stop
        /// The replay could not go on (the daemon stops, then exits 1 with this).
        case failed(String)
        /// SIGHUP, or a `reload` request, which `answer` answers once the reload has finished.
        case reload(answer: (@Sendable (ReloadOutcome) -> Void)?)
        /// The test hook's signal.
        case stall
    }

    let options: DaemonOptions
    let hub: Hub
    let logControl: LogControl
    let logger: Logger
    /// The settings in force (changed by reloads).
    let current: Mutex<DaemonOptions>

    init(options: DaemonOptions, hub: Hub, logControl: LogControl, logger: Logger) {
        self.options = options
        self.hub = hub
        self.logControl = logControl
        self.logger = logger
        current = Mutex(options)
    }

    func run(wakes: AsyncStream<Wake>, wake: AsyncStream<Wake>.Continuation) async throws {
        let supervisor = ServiceSupervisor(hub: hub, watchdog: options.watchdog, logger: logger)
        // The source and its receiver gating before the socket: a status reply to the very first
        // connection already says whether the receiver is watched.
        let stopSource: () -> Void
        let logger = self.logger
        let hub = self.hub
        let logControl = self.logControl
        // Log state changes of the source once each, alongside feeding the hub.
        let lastState = Mutex<SourceState?>(nil)
        let sink: @Sendable (EngineInput) -> Void = { input in
            let state: SourceState? = switch input {
            case .fix: .fix
            case .noFix: .noFix
            case .source(let s): s
            default: nil
            }
            if let state, lastState.withLock({ old in defer { old = state }; return old != state }) {
                if case .fix(let fix) = input {
                    // Rounded unless log.precise_coordinates (docs/configuration.md).
                    logger.info("source state", metadata: ["state": "\(state.rawValue)", "position": "\(logControl.describe(latitude: fix.coordinate.latitude, longitude: fix.coordinate.longitude))"])
                } else {
                    logger.info("source state", metadata: ["state": "\(state.rawValue)"])
                }
            }
            hub.submit(input)
        }
        // The gpsd-protocol listener starts after the source; the receiver's sky views reach
        // it from then on (docs/compatibility.md).
        let skyListener = Mutex<GPSDServer?>(nil)
        switch options.source {
        case .gpsd(let host, let port):
            let device = options.gpsdDevice.isEmpty ? nil : options.gpsdDevice
            let source = GPSDSource(configuration: .init(host: host, port: port, device: device), eventLoop: hub.eventLoop, sink: sink,
                                    onSky: { sky in skyListener.withLock { $0 }?.publish(sky) }, logger: logger)
            // Receiver gating: watch gpsd only while a session, subscription or region monitor
            // needs fixes (docs/privacy.md, "Receiver").
            source.setWanted(false)
            source.start()
            try await hub.eventLoop.submit { hub.onDemandChange { source.setWanted($0) } }.get()
            stopSource = { source.stop() }
        case .replay(let path, let speed, let loop, let decoding):
            let source = ReplaySource(path: path, speed: speed, loop: loop, decoding: decoding, consumer: hub.eventLoop,
                                      warning: { logger.warning("\($0)") }, sink: sink)
            logger.info("replay waits for the first subscriber")
            hub.whenFirstSubscribed {
                source.start { error in
                    if let error { wake.yield(.failed("replay failed: \(error)")) } else {
                        logger.info("replay finished")
                        wake.yield(.stop)
                    }
                }
            }
            stopSource = { source.stop() }
        }
        var configuration = SocketServer.Configuration(path: options.socketPath)
        configuration.floodBurst = options.floodBurst
        configuration.floodRate = options.floodRate
        configuration.unwritableTimeout = .milliseconds(Int64(options.unwritableTimeout * 1000))
        configuration.maxConnectionsPerUser = options.maxConnectionsPerUser
        configuration.maxRegionsPerUser = options.regionsMaxRegisteredPerUser
        configuration.reload = { answer in wake.yield(.reload(answer: answer)) }
        let server: SocketServer
        if let passed = try SocketActivation.listeningSocket() {
            if passed.count > 1 { logger.warning("systemd passed \(passed.count) sockets; serving the first only (\(passed.name))") }
            server = try await SocketServer.start(hub: hub, boundSocket: passed.fd, configuration: configuration, logger: logger)
            logger.info("serving", metadata: ["socket": "fd \(passed.fd) (\(passed.name)) from systemd", "source": "\(hub.sourceDescription)"])
        } else {
            server = try await SocketServer.start(hub: hub, configuration: configuration, logger: logger)
            logger.info("serving", metadata: ["socket": "\(options.socketPath)", "source": "\(hub.sourceDescription)"])
        }
        let compatibility = try await startCompatibilityServers()
        skyListener.withLock { $0 = compatibility.gpsd }
        // The socket accepts connections now, and the store was opened before the group started.
        supervisor.notify("READY=1\nMAINPID=\(getpid())\nSTATUS=\(try await supervisor.currentStatus())")
        supervisor.start()

        // Runs until SIGTERM/SIGINT, or until a replay ends; SIGHUP reloads meanwhile.
        var failure: String?
        waiting: for await reason in wakes {
            switch reason {
            case .stop: break waiting
            case .failed(let why): failure = why; break waiting
            case .reload(let answer):
                let outcome = await reload(supervisor, server: server, compatibility: compatibility)
                answer?(outcome)
            case .stall: stallLoop(supervisor)
            }
        }
        supervisor.notify("STOPPING=1\nSTATUS=stopping")
        logger.info("stopping")
        let deadline = ShutdownDeadline(seconds: options.shutdownTimeout, logger: logger)
        stopSource()
        await hub.processed()
        await server.close()
        await compatibility.gpsd?.close()
        await compatibility.nmea?.close()
        try? await hub.eventLoop.submit { hub.releaseHeldVisits() }.get()
        // The WAL into the file: after a stop the database file alone holds everything.
        if let database = hub.regionStore?.database {
            do { try await hub.eventLoop.submit { try database.checkpoint() }.get() } catch {
                logger.warning("cannot copy the write-ahead log into the database at stop: \(error); nothing is lost (the next start reads it), but a copy of the database needs its -wal too")
            }
        }
        await supervisor.stop()
        deadline.met()
        logger.info("stopped")
        if let failure { throw DaemonFailure(description: failure) }
    }

    /// The servers for programs that do not speak locationd's protocol (docs/compatibility.md),
    /// each when configured.
    struct CompatibilityServers {
        var gpsd: GPSDServer?
        var nmea: NMEAServer?
    }

    func startCompatibilityServers() async throws -> CompatibilityServers {
        var servers = CompatibilityServers()
        if let address = options.gpsdServerAddress {
            var configuration = GPSDServer.Configuration(host: address.host, port: address.port, device: hub.sourceDescription)
            configuration.revision = "locationd \(Daemon.version)"
            configuration.floodBurst = options.floodBurst
            configuration.floodRate = options.floodRate
            configuration.unwritableTimeout = .milliseconds(Int64(options.unwritableTimeout * 1000))
            servers.gpsd = try await GPSDServer.start(hub: hub, configuration: configuration, logger: logger)
        }
        if !options.nmeaServerSocket.isEmpty {
            servers.nmea = try await NMEAServer.start(hub: hub, configuration: .init(path: options.nmeaServerSocket), logger: logger)
        }
        return servers
    }

    /// SIGHUP or a `reload` request: re-read the config file (command-line flags still win), apply what can change
    /// live (log level, coordinate precision, the access policy), log what needs a restart. A
    /// file that does not parse changes nothing. Returns after READY=1, so systemd has both
    /// notifications before a `reload` request (`locationctl reload`, `ExecReload=`) is answered.
    func reload(_ supervisor: ServiceSupervisor, server: SocketServer, compatibility: CompatibilityServers) async -> ReloadOutcome {
        let start = SystemdNotifier.monotonicMicroseconds()
        supervisor.notify("RELOADING=1\nMONOTONIC_USEC=\(start)\nSTATUS=reloading configuration")
        let old = current.withLock { $0 }
        let outcome: ReloadOutcome
        do {
            let new = try old.reloaded()
            let changes = ConfigSchema.changes(from: old, to: new)
            for warning in new.warnings { logger.warning("reload: \(warning)") }
            var kept = old
            for change in changes {
                let meta: Logger.Metadata = ["key": "\(change.key.path)", "old": "\(change.old)", "new": "\(change.new)"]
                if change.key.live {
                    _ = change.key.set(&kept, change.new)
                    logger.notice("reload: applied", metadata: meta)
                } else {
                    logger.warning("reload: changed, applies after a restart (systemctl restart locationd)", metadata: meta)
                }
            }
            if new.policy != old.policy {
                // Access rules apply live, to new and open sessions (docs/privacy.md).
                kept.policy = new.policy
                try? await server.applyPolicy(new.policy)
                try? await compatibility.gpsd?.applyPolicy()
                try? await compatibility.nmea?.applyPolicy()
                logger.notice("reload: policy applied", metadata: ["rules": "\(new.policy.rules.map(\.name))"])
            }
            if let level = Logger.Level(rawValue: kept.logLevel) { logControl.level = level }
            logControl.preciseCoordinates = kept.preciseCoordinates
            current.withLock { $0 = kept }
            logger.info("reloaded", metadata: ["file": "\(new.configFile ?? "none")", "changes": "\(changes.count)"])
            outcome = .applied
        } catch {
            logger.error("reload failed; keeping the current configuration: \(error)")
            outcome = .refused("\(error)")
        }
        supervisor.notify("READY=1\nSTATUS=\((try? await supervisor.currentStatus()) ?? "reloaded")")
        return outcome
    }

    /// The test hook (`LOCATIOND_TEST_STALL_ON=SIGUSR2`): the signal blocks the event loop for
    /// good, as a deadlock would, so tests can see the watchdog pings stop.
    static func testStallSignal() -> Int32? {
        guard let value = getenv("LOCATIOND_TEST_STALL_ON").map({ String(cString: $0) }) else { return nil }
        switch value {
        case "SIGUSR1": return SIGUSR1
        case "SIGUSR2": return SIGUSR2
        default: return nil
        }
    }

    func stallLoop(_ supervisor: ServiceSupervisor) {
        logger.warning("test hook: stalling the event loop")
        hub.eventLoop.execute {
            supervisor.notify("STATUS=stalled by test hook")
            while true { pause() }
        }
    }
}

/// The bound on a graceful shutdown (`daemon.shutdown_timeout`): a stop that has not finished by
/// then (a subscriber that takes no more data and is not yet timed out, a stuck event loop) is
/// abandoned, and the process exits with status 1 after saying so. systemd's `TimeoutStopSec=`
/// stays the last word.
final class ShutdownDeadline: Sendable {
    private let finished = Mutex(false)

    init(seconds: Double, logger: Logger) {
        DispatchQueue.global().asyncAfter(deadline: .now() + seconds) { [self] in
            guard !finished.withLock({ $0 }) else { return }
            logger.critical("shutdown did not finish within \(seconds) s (daemon.shutdown_timeout); exiting")
            LogBackend.exit(1)
        }
    }

    func met() {
        finished.withLock { $0 = true }
    }
}
