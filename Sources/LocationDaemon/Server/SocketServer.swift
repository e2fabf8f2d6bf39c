import Glibc
import LocationCore
import LocationProtocol
import Logging
import NIOCore
import NIOPosix
import Synchronization

/// Errors preparing the socket path.
public enum SocketServerError: Error, Hashable, Sendable, CustomStringConvertible {
    case pathInUse(String)
    case notASocket(String)
    case system(String, errno: Int32)
    /// The socket file cannot be created: the directory is not the daemon user's to write.
    case cannotCreate(String, errno: Int32, user: String)
    /// The socket's directory (the first missing one on the way, `String`) cannot be made;
    /// `target` is the socket's directory, which the fix names.
    case cannotCreateDirectory(String, target: String, errno: Int32, user: String, uid: uid_t)
    /// The socket's directory, or one on the way to it, cannot be entered by the daemon's user
    /// (no search permission): why, and the fix (Database.unreachable).
    case unreachable(String, reason: String, fix: String)

    public var description: String {
        switch self {
        case .pathInUse(let p): "\(p): another server is listening there (another locationd?); stop it (systemctl stop locationd), or give this one another path with --socket or [socket] path"
        case .notASocket(let p): "\(p) exists and is not a socket; locationd will not remove it: remove it yourself if nothing needs it, or choose another path with --socket or [socket] path"
        case .system(let what, let e): "\(what): \(String(cString: strerror(e)))"
        case .cannotCreate(let p, let e, let user):
            "cannot create the socket \(p): \(String(cString: strerror(e))) (its directory \(Database.directory(of: p)) is not writable by user \(user)\(e == EROFS ? ", or is on a read-only filesystem" : "")); make the directory writable by the daemon's user, or set [socket] path (--socket) to a path in one it can write (under systemd, locationd.socket creates the socket)"
        case .unreachable(let p, let reason, let fix): "cannot create the socket \(p): \(reason); \(fix)"
        case .cannotCreateDirectory(let dir, let target, let e, let user, let uid):
            {
                let parent = Database.directory(of: dir)
                let why = switch e {
                case EACCES, EPERM: "the directory \(parent) is not writable by user \(user), uid \(uid)"
                case EROFS: "the directory \(parent) is on a filesystem mounted read-only"
                default: String(cString: strerror(e))
                }
                // `mkdir -p` fails the same way on a path through a file.
                if e == ENOTDIR {
                    return "\(dir): cannot create the socket's directory (\(why): a component of \(parent) is a file, not a directory); set [socket] path (--socket) to a path in a directory, or remove the file on the way"
                }
                return "\(dir): cannot create the socket's directory (\(why)); create \(target) for the daemon's user (\(Database.creating(target, for: user, mode: "0755")); under systemd, locationd.socket creates the socket and its directory), or set [socket] path (--socket) to a path in a directory it can write"
            }()
        }
    }
}

/// The NDJSON protocol server on a Unix domain socket. All its channels run on the hub's event
/// loop, so connections call the hub directly (no locks, no hops).
///
/// Socket file: the parent directory is created (mode 0755) when missing; an existing socket
/// file is removed only if connecting to it is refused (a stale file, nobody listening); the
/// new socket is chmod'ed to `socketMode` (default 0660: owner and group may connect; the
/// group is the daemon's, see systemd/ for the deployment that sets it). Between bind and chmod
/// the mode follows the process umask; the parent directory's permissions are the real fence.
public final class SocketServer: Sendable {
    public struct Configuration: Sendable {
        /// Socket path (at most 107 bytes).
        public var path: String
        public var socketMode: mode_t = 0o660
        /// Longest accepted request line, newline excluded.
        public var maxLineBytes: Int = LocationProtocol.maxLineBytes
        /// Flood limit: a token bucket of `floodBurst` requests refilled at `floodRate` per second.
        public var floodBurst: Int = 200
        public var floodRate: Double = 100
        /// Write buffer watermarks: above `high` a connection is "not writable" and events are
        /// held back (newest location and status only); below `low` it is writable again.
        public var writeBufferLowWatermark: Int = 32 * 1024
        public var writeBufferHighWatermark: Int = 64 * 1024
        /// A connection that stays not writable this long is closed.
        public var unwritableTimeout: TimeAmount = .seconds(30)
        /// Connections one user may have open (root and the daemon's own user excepted): one
        /// user's programs must not take every descriptor the daemon has and lock every other
        /// program out (8,000 idle connections of a denied user would).
        public var maxConnectionsPerUser: Int = 256
        /// Regions the programs of one user may register together (root and the daemon's own
        /// user excepted): each executable is a program with its own `max_registered`, and a user
        /// can make as many executables as it likes (copies, hard links), so only a bound per user
        /// bounds the database and the daemon's memory (three copies of a binary can hold 30,000
        /// regions, 786 MB resident).
        public var maxRegionsPerUser: Int = 20_000
        /// How often the loop's stall watch beats while connections are open: a beat this late or
        /// more tells the flood limit that requests waited in the sockets meanwhile
        /// (`LoopStallWatch`; docs/protocol.md, "Flood policy").
        public var stallBeat: TimeAmount = .seconds(1)
        /// How often the socket file this server made is looked at: one deleted while the daemon
        /// runs (an administrator's `rm`, a cleaner of /tmp or /run) is made again, so that
        /// programs can still connect.
        public var socketFileCheck: TimeAmount = .seconds(10)
        /// Runs a `reload` request (the daemon's reload, as for SIGHUP) and calls its argument
        /// with the outcome once the reload has finished; nil: `reload` is refused.
        public var reload: (@Sendable (@escaping @Sendable (ReloadOutcome) -> Void) -> Void)?
        /// The clock of the flood limiter, the stall watch and the paced warnings.
        public var clock = ShellClock.system

        public init(path: String) { self.path = path }
    }

    public let hub: Hub
    public let configuration: Configuration
    private let channel: any Channel
    let registry: ConnectionRegistry
    /// What is served, as logged: the path we bound, or the inherited descriptor.
    private let listening: Logger.Metadata
    private let logger: Logger

    /// The socket file this server bound, and its listener when it had to bind it again.
    private struct OwnSocket {
        /// The file (device and inode) it removes when it stops; nil for an inherited socket
        /// (systemd's, which the daemon neither watches nor removes).
        var file: FileIdentity?
        /// The listener bound when the first file was deleted (the first channel stays open:
        /// connections the kernel queued on it before are still accepted).
        var rebound: (any Channel)?
        /// The problem last logged about the file, so that each is logged once.
        var logged: String?
        var check: Scheduled<Void>?
        var stopped = false
    }
    private let own: Mutex<OwnSocket>

    private init(hub: Hub, configuration: Configuration, channel: any Channel, registry: ConnectionRegistry,
                 ownFile: FileIdentity?, listening: Logger.Metadata, logger: Logger) {
        self.hub = hub; self.configuration = configuration; self.channel = channel
        self.registry = registry; self.listening = listening; self.logger = logger
        own = Mutex(OwnSocket(file: ownFile))
        if ownFile != nil { scheduleSocketFileCheck() }
    }

    /// The next look at the socket file (a task rescheduled each time, which the gpsd source's
    /// retries already use: a repeated task's code would be resident in the idle daemon too).
    private func scheduleSocketFileCheck() {
        let next = hub.eventLoop.scheduleTask(in: configuration.socketFileCheck) { [self] in
            checkSocketFile()
            scheduleSocketFileCheck()
        }
        own.withLock { own in
            if own.stopped { next.cancel() } else { own.check = next }
        }
    }

    /// Makes the socket file again when it was deleted; logs (once) a file that is no longer
    /// this daemon's. On the loop.
    func checkSocketFile() {
        let path = configuration.path
        let (file, logged, stopped) = own.withLock { ($0.file, $0.logged, $0.stopped) }
        guard let file, !stopped else { return }
        var now = FileIdentity(path: path)
        if now == file { return }
        // A socket nobody listens on (left by a daemon that was killed) is stale, as at a start:
        // `prepareSocketPath` removes it, and the file is made again.
        var st = stat()
        let stale = now != nil && lstat(path, &st) == 0 && st.st_mode & S_IFMT == S_IFSOCK && !Self.isListening(path)
        if stale { now = nil }
        let what = stale ? "the socket file \(path) was replaced by one nobody listens on (its server gone)"
                         : "the socket file \(path) was deleted"
        func once(_ problem: String, _ log: () -> Void) {
            guard logged != problem else { return }
            own.withLock { $0.logged = problem }
            log()
        }
        if now != nil {
            once("replaced") {
                logger.error("the socket file \(path) is no longer the one this daemon made (replaced while it ran): programs reach whatever is there now; restart locationd to serve at \(path) again")
            }
            return
        }
        let descriptor: CInt
        do {
            try Self.prepareSocketPath(path)
            descriptor = try Self.bindSocket(path, mode: configuration.socketMode)
        } catch {
            once("\(error)") {
                logger.error("\(what) while locationd ran, and it cannot be made again: \(error); programs cannot connect until it can (retrying every \(configuration.socketFileCheck))")
            }
            return
        }
        let identity = FileIdentity(path: path) ?? file
        own.withLock { $0.file = identity; $0.logged = nil }
        Self.bootstrap(hub: hub, configuration: configuration, registry: registry, logger: logger)
            .withBoundSocket(descriptor)
            .whenComplete { [self] result in
                switch result {
                case .success(let channel):
                    // `close()` may have run meanwhile (from another thread): then this listener
                    // and its file are its to end, too late for it to see them.
                    let (previous, stopped) = own.withLock { own in
                        defer { if !own.stopped { own.rebound = channel } }
                        return (own.rebound, own.stopped)
                    }
                    if stopped {
                        channel.close(promise: nil)
                        if FileIdentity(path: path) == identity { unlink(path) }
                        return
                    }
                    previous?.close(promise: nil)
                    logger.warning("\(what) while locationd ran; made it again, and programs can connect")
                case .failure(let error):
                    if FileIdentity(path: path) == identity { unlink(path) }
                    own.withLock { $0.file = file }  // still missing: the next check tries again
                    logger.error("\(what) while locationd ran, and it cannot be made again: \(error)")
                }
            }
    }

    /// Binds `configuration.path` and starts accepting connections.
    public static func start(hub: Hub, configuration: Configuration, logger: Logger) async throws -> SocketServer {
        try prepareSocketPath(configuration.path)
        let registry = ConnectionRegistry(eventLoop: hub.eventLoop, configuration: configuration)
        // Bound here, not by NIO: NIO's listening socket unlinks whatever socket file is at the
        // path when it closes, another daemon's included; this server removes only its own.
        let descriptor = try bindSocket(configuration.path, mode: configuration.socketMode)
        guard let ownFile = FileIdentity(path: configuration.path) else {
            let e = errno
            Glibc.close(descriptor)
            throw SocketServerError.system("stat \(configuration.path)", errno: e)
        }
        let channel: any Channel
        do {
            channel = try await bootstrap(hub: hub, configuration: configuration, registry: registry, logger: logger)
                .withBoundSocket(descriptor).get()
        } catch {
            if FileIdentity(path: configuration.path) == ownFile { unlink(configuration.path) }
            throw error
        }
        let listening: Logger.Metadata = ["path": "\(configuration.path)"]
        logger.info("listening", metadata: listening)
        return SocketServer(hub: hub, configuration: configuration, channel: channel, registry: registry,
                            ownFile: ownFile, listening: listening, logger: logger)
    }

    /// Serves on an already bound and listening socket (e.g. from systemd socket activation);
    /// `configuration.path` is then informational and the file is left alone.
    public static func start(hub: Hub, boundSocket descriptor: CInt, configuration: Configuration,
                             logger: Logger) async throws -> SocketServer {
        let registry = ConnectionRegistry(eventLoop: hub.eventLoop, configuration: configuration)
        let channel = try await bootstrap(hub: hub, configuration: configuration, registry: registry, logger: logger)
            .withBoundSocket(descriptor).get()
        let listening: Logger.Metadata = ["fd": "\(descriptor)"]
        logger.info("listening on an inherited socket", metadata: listening)
        return SocketServer(hub: hub, configuration: configuration, channel: channel, registry: registry,
                            ownFile: nil, listening: listening, logger: logger)
    }

    private static func bootstrap(hub: Hub, configuration: Configuration, registry: ConnectionRegistry,
                                  logger: Logger) -> ServerBootstrap {
        ServerBootstrap.subscribers(on: hub.eventLoop, backlog: 128, writeBufferLow: configuration.writeBufferLowWatermark,
                                    writeBufferHigh: configuration.writeBufferHighWatermark)
            .serverChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(AcceptFailures(registry: registry, logger: logger))
                }
            }
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(
                        Connection(hub: hub, configuration: configuration, registry: registry, logger: logger))
                }
            }
    }

    /// How long the daemon waits before accepting again after accept() failed.
    static let acceptRetry = TimeAmount.seconds(1)

    /// Stops listening, closes every connection (which unsubscribes them) and removes the
    /// socket file it created.
    public func close() async {
        let (ownFile, rebound) = own.withLock { own in
            own.stopped = true
            own.check?.cancel()
            return (own.file, own.rebound)
        }
        try? await channel.close()
        try? await rebound?.close()
        try? await hub.eventLoop.submit { self.registry.all.forEach { $0.close() } }.get()
        await hub.processed()
        if let ownFile {
            // Only the file it bound: if it was removed meanwhile and another server bound the
            // path, that one's socket must stay.
            if FileIdentity(path: configuration.path) == ownFile {
                unlink(configuration.path)
            } else {
                logger.notice("the socket file is not the one this daemon created (removed or replaced while it ran); leaving it", metadata: ["path": "\(configuration.path)"])
            }
        }
        // Not the configured path when the socket was passed: that one was never ours.
        logger.info("stopped listening", metadata: listening)
    }

    /// A future that completes when the listening socket closes.
    public var closeFuture: EventLoopFuture<Void> { channel.closeFuture }

    /// The open connections' state (read on the loop).
    /// Puts a new access policy in force for new and open connections, and for what programs
    /// keep while they are away (a reload).
    public func applyPolicy(_ policy: Policy) async throws {
        try await hub.eventLoop.submit {
            self.hub.policy = policy
            // In subscription order, not the registry's hash order: who gets a background slot
            // the bound has left must not depend on the process's hash seed.
            let connections = self.registry.all.sorted { $0.id < $1.id }
            let refusedBefore = Set(self.hub.backgroundRefusedSubscribers)
            for c in connections { c.applyPolicy(policy) }
            self.hub.enforcePolicy()
            // Only now are the slots known that this reload freed (connections that lost
            // `always`, away programs it ended): every refused subscription is offered one.
            let refused = Set(self.hub.backgroundRefusedSubscribers)
            for c in connections where refused.contains(c.id) { c.keepAgain(warn: !refusedBefore.contains(c.id)) }
        }.get()
    }

    public func connectionStats() async throws -> [ConnectionStats] {
        try await hub.eventLoop.submit {
            self.registry.all.map(\.stats).sorted { $0.subscriber < $1.subscriber }
        }.get()
    }

    /// A new socket bound to `path`, with `mode`, listening (NIO takes it over).
    static func bindSocket(_ path: String, mode: mode_t) throws -> CInt {
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: addr.sun_path) else {
            throw SocketServerError.system("bind \(path)", errno: ENAMETOOLONG)
        }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw SocketServerError.system("socket", errno: errno) }
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard rc == 0 else {
            let e = errno
            Glibc.close(fd)
            if e == EACCES || e == EPERM || e == EROFS {
                if e == EACCES { try refuseUnreachable(path) }
                let user = Database.currentUser()
                throw SocketServerError.cannotCreate(path, errno: e, user: "\(user.name), uid \(user.uid)")
            }
            throw SocketServerError.system("bind \(path)", errno: e)
        }
        // Its mode before anyone can connect (bind gave it 0777 less the umask), and listening
        // at once: a bound socket that does not listen refuses connections, and another daemon
        // starting on the path would take it for a stale one and unlink it.
        func failed(_ step: String) -> SocketServerError {
            let e = errno
            Glibc.close(fd)
            unlink(path)
            return .system("\(step) \(path)", errno: e)
        }
        guard chmod(path, mode) == 0 else { throw failed("chmod") }
        guard listen(fd, 128) == 0 else { throw failed("listen") }
        return fd
    }

    /// Creates the parent directory and removes a stale socket file (one nobody listens on).
    static func prepareSocketPath(_ path: String) throws {
        // First, so that what follows does not fail with a bare "Permission denied" on a path
        // it cannot reach (or blame the directory's write permission).
        try refuseUnreachable(path)
        if let slash = path.lastIndex(of: "/"), slash != path.startIndex {
            try makeDirectories(String(path[..<slash]))
        }
        var st = stat()
        guard lstat(path, &st) == 0 else {
            if errno == ENOENT { return }
            throw SocketServerError.system("stat \(path)", errno: errno)
        }
        guard st.st_mode & S_IFMT == S_IFSOCK else { throw SocketServerError.notASocket(path) }
        if isListening(path) { throw SocketServerError.pathInUse(path) }
        guard unlink(path) == 0 || errno == ENOENT else { throw SocketServerError.system("unlink \(path)", errno: errno) }
    }

    /// Throws `unreachable` when a directory on the way to `path` (its own included) exists and
    /// the daemon's user may not enter it (Database.unreachable; root may enter any directory).
    static func refuseUnreachable(_ path: String) throws {
        let elsewhere = "set [socket] path (--socket) to a path it can reach (under systemd, locationd.socket creates the socket)"
        guard let (reason, fix) = Database.unreachable(Database.directory(of: path), mode: "0755", elsewhere: elsewhere) else { return }
        throw SocketServerError.unreachable(path, reason: reason, fix: fix)
    }

    /// Creates `dir` after its missing parents; `target` is the socket's directory, which the
    /// error's fix names.
    static func makeDirectories(_ dir: String, for target: String? = nil) throws {
        let target = target ?? dir
        var st = stat()
        if stat(dir, &st) == 0 { return }
        if let slash = dir.lastIndex(of: "/"), slash != dir.startIndex {
            try makeDirectories(String(dir[..<slash]), for: target)
        }
        guard mkdir(dir, 0o755) == 0 else {
            guard errno == EEXIST else {
                let code = errno
                let user = Database.currentUser()
                throw SocketServerError.cannotCreateDirectory(dir, target: target, errno: code, user: user.name, uid: user.uid)
            }
            return
        }
        // mkdir's mode is masked by the umask (0077 makes it 0700, and the group that may use the
        // socket could not reach it): the directory we created gets 0755 itself.
        guard chmod(dir, 0o755) == 0 else { throw SocketServerError.system("chmod \(dir)", errno: errno) }
    }

    /// Whether something accepts connections on the socket at `path`.
    static func isListening(_ path: String) -> Bool {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { Glibc.close(fd) }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: addr.sun_path) else { return false }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        return rc == 0
    }
}

/// A failed `accept()` (no descriptor left: EMFILE, ENFILE) leaves the connection in the listen
/// queue, so the socket stays readable; NIO keeps its read pending and retries at once, forever,
/// at 100 % CPU (its `AcceptBackoffHandler` only pauses when an accept of the same round
/// succeeded). So this handler stops reading from the listening socket for
/// `SocketServer.acceptRetry` after each failure. It logs a failure at most once a minute (the
/// first at once), and the next accept after failures at most once a minute too, with the number
/// of failed attempts since the last such notice (docs/systemd.md, "Open files").
final class AcceptFailures: ChannelInboundHandler {
    typealias InboundIn = any Channel

    let registry: ConnectionRegistry
    let logger: Logger
    /// Failed attempts since the last notice of recovery.
    private var failures = 0
    private var lastLogged: NIODeadline?
    private var lastRecoveryLogged: NIODeadline?
    private var retry: Scheduled<Void>?

    init(registry: ConnectionRegistry, logger: Logger) { self.registry = registry; self.logger = logger }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // At the limit with clients coming and going, every retry accepts one and fails again:
        // the recovery is told at most once a minute too, and neither resets the other's minute.
        if failures > 0, lastRecoveryLogged.map({ context.eventLoop.now - $0 >= .seconds(60) }) ?? true {
            logger.notice("accepting connections again after \(failures) failed attempts")
            failures = 0
            lastRecoveryLogged = context.eventLoop.now
        }
        context.fireChannelRead(data)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A peer that gave up before it was accepted: nothing to wait for.
        if (error as? IOError)?.errnoCode == ECONNABORTED {
            logger.debug("a connection was aborted before it was accepted")
            return
        }
        failures += 1
        let now = context.eventLoop.now
        if lastLogged.map({ now - $0 >= .seconds(60) }) ?? true {
            lastLogged = now
            logger.error("\(Self.describe(error, connections: registry.all.count, limit: DescriptorLimit.current()))")
        }
        guard retry == nil, context.channel.isActive else { return }
        try? context.channel.syncOptions?.setOption(ChannelOptions.autoRead, value: false)
        retry = context.eventLoop.assumeIsolated().scheduleTask(in: SocketServer.acceptRetry) { [self] in
            retry = nil
            try? context.channel.syncOptions?.setOption(ChannelOptions.autoRead, value: true)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        retry?.cancel()
        retry = nil
        context.fireChannelInactive()
    }

    /// What a person reads: the error, why, and the fix.
    static func describe(_ error: any Error, connections: Int, limit: DescriptorLimit?) -> String {
        let retry = "new connections wait in the listen queue; retrying every second"
        guard let code = (error as? IOError)?.errnoCode else {
            return "cannot accept a connection: \(error); \(retry)"
        }
        switch code {
        case EMFILE:
            let limitText = limit.map { "\($0)" } ?? "unknown"
            return "cannot accept a connection: the open-file limit (RLIMIT_NOFILE, \(limitText)) is reached with \(connections) connections open; \(retry); raise it: LimitNOFILE= in the unit (systemctl edit locationd), or ulimit -n before starting locationd"
        case ENFILE:
            return "cannot accept a connection: the system's open-file table is full (ENFILE, sysctl fs.file-max) with \(connections) connections open here; \(retry); raise fs.file-max or find the process holding the files"
        default:
            return "cannot accept a connection: \(String(cString: strerror(code))) (errno \(code)); \(retry)"
        }
    }
}
