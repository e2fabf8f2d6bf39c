import LocationCore
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Wires the shell together: one event loop for the hub and every connection, a position
/// source on its own thread, the socket server; runs until SIGTERM/SIGINT (or, for a replay
/// without `--loop`, until the log ends and subscribers have been sent everything).
public enum Daemon {
    public static let version = "0.1.0"

    public static func run(_ options: DaemonOptions, logger: Logger) async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let loop = group.next()
        let store = try options.databasePath.map { try RegionStore(path: $0) }
        let hub = Hub(eventLoop: loop, sourceDescription: describe(options.source), logger: logger, regionStore: store)
        defer { group.shutdownGracefully { _ in } }
        if let store { try await restoreRegions(from: store, into: hub, logger: logger) }
        // The socket is bound inside the service, after the group has installed its signal
        // handlers: a SIGTERM sent as soon as the socket exists must shut down gracefully.
        let service = DaemonService(options: options, hub: hub, logger: logger)
        let serviceGroup = ServiceGroup(configuration: .init(
            services: [.init(service: service, successTerminationBehavior: .gracefullyShutdownGroup)],
            gracefulShutdownSignals: [.sigterm, .sigint],
            logger: logger))
        try await serviceGroup.run()
    }

    /// Loads the remembered regions and states into the engine before anything is served.
    static func restoreRegions(from store: RegionStore, into hub: Hub, logger: Logger) async throws {
        let programs = try store.load()
        try await hub.eventLoop.submit {
            for p in programs {
                do { try hub.restoreRegions(p.records, for: p.program) } catch {
                    logger.error("cannot restore regions", metadata: ["program": "\(p.program)", "error": "\(error)"])
                }
            }
        }.get()
        logger.info("regions restored", metadata: ["programs": "\(programs.count)",
                                                   "regions": "\(programs.reduce(0) { $0 + $1.records.count })",
                                                   "database": "\(store.path)"])
    }

    static func describe(_ source: DaemonOptions.Source) -> String {
        switch source {
        case .gpsd(let host, let port): "gpsd \(host):\(port)"
        case .replay(let path, _, _): "replay \(path)"
        }
    }
}

/// The daemon's one service: starts the source, waits for shutdown, stops everything in order
/// (source first so no input arrives late, then the server after flushing subscribers).
final class DaemonService: Service {
    let options: DaemonOptions
    let hub: Hub
    let logger: Logger

    init(options: DaemonOptions, hub: Hub, logger: Logger) {
        self.options = options
        self.hub = hub
        self.logger = logger
    }

    func run() async throws {
        let server = try await SocketServer.start(
            hub: hub, configuration: SocketServer.Configuration(path: options.socketPath), logger: logger)
        logger.info("serving", metadata: ["socket": "\(options.socketPath)", "source": "\(hub.sourceDescription)"])
        let stopSource: () -> Void
        let (finishedStream, finished) = AsyncStream<Void>.makeStream()
        let logger = self.logger
        let hub = self.hub
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
                logger.info("source state", metadata: ["state": "\(state.rawValue)"])
            }
            hub.submit(input)
        }
        switch options.source {
        case .gpsd(let host, let port):
            let source = GPSDSource(configuration: .init(host: host, port: port), sink: sink)
            source.start()
            stopSource = { source.stop() }
        case .replay(let path, let speed, let loop):
            let source = ReplaySource(path: path, speed: speed, loop: loop, sink: sink)
            logger.info("replay waits for the first subscriber")
            hub.whenFirstSubscribed {
                source.start { error in
                    if let error { logger.error("replay failed: \(error)") } else { logger.info("replay finished") }
                    finished.finish()
                }
            }
            stopSource = { source.stop() }
        }
        // Runs until SIGTERM/SIGINT, or until a replay ends (returning then shuts the group down).
        await withTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try? await gracefulShutdown() }
            tasks.addTask { for await _ in finishedStream {} }
            await tasks.next()
            tasks.cancelAll()
        }
        stopSource()
        await hub.processed()
        await server.close()
        logger.info("stopped")
    }
}
