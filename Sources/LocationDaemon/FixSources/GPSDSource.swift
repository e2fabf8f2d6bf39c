import Glibc
import GPSDProtocol
import LocationCore
import LocationProtocol
import Logging
import NIOCore
import NIOPosix
import Synchronization

/// Reads fixes from gpsd and reports them as `EngineInput`, on an event loop.
///
/// The socket to gpsd is a NIO channel on the loop it is given — the daemon gives the hub's — so a
/// report goes from gpsd's socket through the engine to the subscribers' sockets in one pass on one
/// thread, with no hop between threads (such a hop would be most of the latency locationd adds over
/// reading gpsd directly; docs/gpsd.md). libgps decodes each JSON line (`GPSDLineDecoder`), exactly
/// as `gps_read` would.
///
/// - Each TPV with a position (mode ≥ 2, finite latitude/longitude) and a time is a `.fix`; a
///   TPV with mode ≤ 1 a `.noFix(time)` (see `GPSDTPV.engineInput`); an epoch gpsd reports in
///   pieces is passed on once, whole (`GPSDEpochPieces`, docs/gpsd.md "Epochs in pieces").
/// - `.source(.connected)` once connected and gpsd has sent its first line (its VERSION banner,
///   which it sends at once): a gpsd that accepts and says nothing (stopped, hung) is not
///   reported connected, so subscribers do not see it come and go at every retry;
///   `.noFix(nil)` when the receiver has sent no report for two idle checks while gpsd answers
///   (`checkReceiver`), or gpsd reports the last receiver that reported gone;
///   `.source(.disconnected)` when
///   the connection cannot be made or is lost, and on `stop()` or release if connected. Only
///   changes are reported: the first failed attempt reports `.disconnected`, later failed
///   retries report nothing.
/// - After a failure it retries with capped exponential backoff (`Configuration`).
/// - It logs why it cannot connect (host:port, the reason, that it keeps retrying) as a warning
///   at the first failure and whenever the reason changes, not at every retry (each retry is a
///   trace line); a notice once gpsd speaks again after a warning; a warning for each new
///   error report gpsd sends (`{"class":"ERROR"}`); a warning when no receiver has reported
///   for a while (`checkReceiver`) and a notice when one reports again. Warnings start over
///   when the source is released or stopped.
/// - A SKY of the receiver the last TPV came from goes to `onSky` as it is (satellites are
///   no position: not an engine input).
/// - All sink calls are made on the loop, in order; the sink must not block (gpsd drops a
///   client that stops reading, and the loop serves every subscriber).
///
/// Thread-safe: every method may be called from any thread.
public final class GPSDSource: Sendable {
    public struct Configuration: Hashable, Sendable {
        /// gpsd host (name or address).
        public var host: String
        /// gpsd port number or TCP service name; default `DEFAULT_GPSD_PORT` ("2947").
        public var port: String
        /// First reconnect delay, seconds.
        public var initialBackoff: Double
        /// Cap on the reconnect delay, seconds.
        public var maximumBackoff: Double
        /// How long one connection attempt may take, seconds (a host that drops SYNs).
        public var connectTimeout: Double
        /// How often the connection is looked at: silent since the last look, it is asked
        /// `?VERSION;`; still silent at the next, it is dropped and made again (gpsd answers that
        /// at once even with no receiver, so a gpsd that does not is hung; docs/gpsd.md,
        /// "Talking to gpsd"), seconds.
        public var idleProbe: Double
        /// The one device of gpsd's to watch (its path as gpsd names it); nil: all of them.
        public var device: String?

        /// `host:port`, an IPv6 address in brackets: what the log names.
        public var address: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

        public init(
            host: String = "localhost", port: String = defaultGPSDPort,
            initialBackoff: Double = 0.1, maximumBackoff: Double = 1.0, connectTimeout: Double = 2,
            idleProbe: Double = 10, device: String? = nil
        ) {
            self.host = host; self.port = port
            self.initialBackoff = initialBackoff; self.maximumBackoff = maximumBackoff
            self.connectTimeout = connectTimeout
            self.idleProbe = idleProbe
            self.device = device
        }
    }

    /// Counters, for logs, `locationctl status` and tests.
    public struct Statistics: Hashable, Sendable {
        /// Connections made (the watch request sent).
        public var connections = 0
        /// Failed connection attempts (gpsd absent, refused, …).
        public var failedAttempts = 0
        /// Established connections that were lost (gpsd closed it, a socket error, a line
        /// longer than `GPSDSource.maximumLineLength`, no answer to an idle probe).
        public var connectionsLost = 0
        /// `?VERSION;` probes sent on silent connections.
        public var idleProbes = 0
        /// Times the receiver fell silent while gpsd answered (`.noFix(nil)` reported).
        public var receiverSilences = 0
        /// Reports read (any class).
        public var messages = 0
        /// TPVs read.
        public var tpvs = 0
        /// TPVs read as a fix, and as no fix (an epoch in pieces counts each piece; what is
        /// passed on is one per epoch, `epochPiecesDropped` the pieces that came too late).
        public var fixes = 0
        public var noFixes = 0
        /// TPVs that carried a mode ≥ 2 but no time or no usable position (not reported).
        public var ignoredTPVs = 0
        /// TPVs libgps could not decode all of (a gpsd speaking another protocol).
        public var undecodableTPVs = 0
        /// Pieces of an epoch gpsd reported after the epoch was passed on (docs/gpsd.md,
        /// "Epochs in pieces").
        public var epochPiecesDropped = 0
        /// `DEVICE … "activated":0` reports (a replayed log's end).
        public var devicesDeactivated = 0
        /// The last error, if any.
        public var lastError: GPSDError?
        /// The delay before the last retry scheduled, seconds.
        public var lastRetryDelay: Double?
        public init() {}
    }

    /// A line longer than this is not gpsd speaking (its longest report is
    /// GPS_JSON_RESPONSE_MAX, 10,240 bytes): the connection is dropped and made again.
    public static let maximumLineLength = 64 * 1024

    public let configuration: Configuration
    public let eventLoop: any EventLoop
    private let sink: @Sendable (EngineInput) -> Void
    private let onDeviceDeactivated: (@Sendable (String) -> Void)?
    private let onSky: (@Sendable (GPSDSky) -> Void)?
    private let logger: Logger
    /// What an epoch in pieces is timed by.
    private let clock: ShellClock

    /// What other threads may read.
    private struct Shared {
        var running = false
        var wanted = true
        var stats = Statistics()
    }
    private let shared = Mutex(Shared())

    /// The connection's state, touched on `eventLoop` only.
    private final class LoopState {
        var running = false
        var wanted = true
        /// Advanced by every connection attempt and every teardown: a callback carrying an
        /// older value belongs to a connection that is gone and is ignored.
        var generation = 0
        var channel: (any Channel)?
        var connecting = false
        var retry: Scheduled<Void>?
        var backoff: Backoff
        /// The last `.source` state sent; nil before the first.
        var reported: SourceState?
        /// Reads on the connection (counted instead of timed: no clock read per report), the
        /// count the idle check saw last, and whether a probe is unanswered.
        var reads: UInt64 = 0
        var readsChecked: UInt64 = 0
        var probing = false
        /// TPVs on the connection and the count the idle check saw last, the checks in a row
        /// that saw none, the most such checks a report has come after (the receiver's own
        /// pace), and whether the receiver has been reported silent.
        var tpvs: UInt64 = 0
        var tpvsChecked: UInt64 = 0
        var quietChecks = 0
        var longestQuiet = 0
        var receiverSilent = false
        /// The receivers (gpsd's device paths) that sent TPVs on the connection and that gpsd has
        /// not reported deactivated since, and whether the last TPV's device is among them (so
        /// that a TPV is looked up in the set only when its device changed or came back).
        var tpvDevices: Set<String> = []
        var lastDeviceTracked = false
        var idleCheck: RepeatedTask?
        /// Whether the connection has sent a line (gpsd's VERSION banner comes at once).
        var heard = false
        /// Whether it has sent more than the banner (the answer to the watch request, a
        /// report): only then is gpsd taken as back (`received`).
        var proven = false
        /// The reason last warned about, nil when none was or gpsd has spoken beyond its banner
        /// since (`proven`): a retry that fails the same way is not logged again.
        var problem: String?
        /// Failed connection attempts since gpsd last spoke.
        var failures = 0
        /// The last error report of gpsd warned about.
        var gpsdError: String?
        /// The last incompatible VERSION warned about, and whether a TPV libgps could not
        /// decode has been.
        var versionProblem: String?
        var undecodableWarned = false
        /// The epoch gpsd is reporting in pieces, held until complete, and the timer that passes
        /// it on if it is not (docs/gpsd.md, "Epochs in pieces").
        var pieces = GPSDReceiversPieces()
        var piecesTimer: Scheduled<Void>?
        let decoder = GPSDLineDecoder()
        init(backoff: Backoff) { self.backoff = backoff }
    }
    private let state: NIOLoopBoundBox<LoopState>

    /// - Parameters:
    ///   - configuration: host, port, backoff.
    ///   - eventLoop: where the connection lives and the sink is called (the daemon passes the
    ///     hub's, so reports reach the engine without changing threads).
    ///   - sink: receives fixes, no-fix epochs and `.source` changes (the daemon passes
    ///     `hub.submit`).
    ///   - onDeviceDeactivated: called (after the sink has seen every earlier report) with the
    ///     device path when gpsd reports `"activated":0` — for a replayed log, its end.
    ///   - onSky: called on the loop with each sky view of the receiver the fixes come from.
    ///   - logger: where failures to connect, lost connections and gpsd's error reports are
    ///     logged (the daemon's); by default nowhere.
    ///   - clock: what an epoch in pieces is timed by (`GPSDEpochPieces`).
    public init(
        configuration: Configuration = Configuration(),
        eventLoop: any EventLoop = MultiThreadedEventLoopGroup.singleton.next(),
        sink: @escaping @Sendable (EngineInput) -> Void,
        onDeviceDeactivated: (@Sendable (String) -> Void)? = nil,
        onSky: (@Sendable (GPSDSky) -> Void)? = nil,
        logger: Logger = Logger(label: "locationd", factory: { _ in SwiftLogNoOpLogHandler() }),
        clock: ShellClock = .system
    ) {
        self.clock = clock
        self.configuration = configuration
        self.eventLoop = eventLoop
        self.sink = sink
        self.onDeviceDeactivated = onDeviceDeactivated
        self.onSky = onSky
        self.logger = logger
        let backoff = Backoff(initial: configuration.initialBackoff, maximum: configuration.maximumBackoff)
        state = NIOLoopBoundBox.makeBoxSendingValue(LoopState(backoff: backoff), as: LoopState.self, eventLoop: eventLoop)
    }

    /// Starts connecting (and keeps reconnecting) while wanted. No-op if already running.
    public func start() {
        shared.withLock { $0.running = true }
        onLoop { [self] in
            state.value.running = true
            reconcile()
        }
    }

    /// Closes the connection and stops reconnecting. When it returns (off the loop) the sink
    /// will not be called again until `start()`. Idempotent.
    public func stop() {
        shared.withLock { $0.running = false }
        let body: @Sendable () -> Void = { [self] in
            state.value.running = false
            reconcile()
        }
        if eventLoop.inEventLoop { body() } else { try? eventLoop.submit(body).wait() }
    }

    public var isRunning: Bool { shared.withLock { $0.running } }

    /// Receiver gating (docs/privacy.md, "Receiver"): with `false` the source closes its gpsd
    /// connection (so gpsd may close the device) and stays closed until `true` again.
    public func setWanted(_ value: Bool) {
        shared.withLock { $0.wanted = value }
        onLoop { [self] in
            state.value.wanted = value
            reconcile()
        }
    }

    /// Whether the source holds (or tries to hold) a gpsd watch now.
    public var isWanted: Bool { shared.withLock { $0.wanted } }

    public var statistics: Statistics { shared.withLock { $0.stats } }

    // MARK: - On the loop

    /// Always a task of its own, even when called on the loop: `setWanted` comes from inside
    /// the hub's handling of a command, and the sink calls this may make (`.disconnected`)
    /// must not re-enter the hub there.
    private func onLoop(_ body: @escaping @Sendable () -> Void) {
        eventLoop.execute(body)
    }

    private func count(_ update: (inout Statistics) -> Void) { shared.withLock { update(&$0.stats) } }

    private func report(_ new: SourceState) {
        let s = state.value
        guard s.reported != new else { return }
        s.reported = new
        // A held epoch came before; a new connection's receiver is learned anew.
        passHeld(s, forget: true)
        sink(.source(new))
    }

    /// Passes a timed report on once its epoch is complete (`GPSDEpochPieces`), anything else
    /// at once, after the epoch held.
    private func pass(_ input: EngineInput, _ s: LoopState) {
        let time: Timestamp? = switch input {
        case .fix(let fix): fix.time
        case .noFix(let t): t
        default: nil
        }
        guard let time else {
            passHeld(s)
            return sink(input)
        }
        let dropped = s.pieces.current.dropped
        let held = s.pieces.current.timed(input, at: time, now: { Int64(self.clock.now().uptimeNanoseconds) }, emit: sink)
        if s.pieces.current.dropped != dropped { count { $0.epochPiecesDropped += 1 } }
        guard held else { return }
        s.piecesTimer?.cancel()
        s.piecesTimer = eventLoop.scheduleTask(in: .nanoseconds(s.pieces.current.holdLimit)) { [self] in
            let s = state.value
            s.piecesTimer = nil
            s.pieces.current.flush(emit: sink)
        }
    }

    /// Passes on the epoch held, if any, before what does not belong to it; `forget`: and
    /// learns the receiver's pattern anew (another connection, another receiver).
    private func passHeld(_ s: LoopState, forget: Bool = false) {
        s.piecesTimer?.cancel()
        s.piecesTimer = nil
        if forget { s.pieces.forget(emit: sink) } else { s.pieces.current.flush(emit: sink) }
    }

    /// Brings the connection in line with `running && wanted`.
    private func reconcile() {
        let s = state.value
        if s.running && s.wanted {
            if s.channel == nil && !s.connecting && s.retry == nil { connect() }
            return
        }
        s.generation += 1
        s.retry?.cancel()
        s.retry = nil
        s.connecting = false
        s.backoff.reset()
        if let channel = s.channel {
            s.channel = nil
            channel.close(promise: nil)
        }
        stopIdleCheck()
        // Wanted again later, the first failure is news again.
        s.problem = nil
        s.failures = 0
        s.gpsdError = nil
        s.versionProblem = nil
        s.undecodableWarned = false
        // A consumer that stops or releases the source should not keep believing it is connected.
        if s.reported == .connected { report(.disconnected) }
    }

    private func connect() {
        let s = state.value
        s.generation += 1
        s.connecting = true
        s.heard = false
        s.proven = false
        let generation = s.generation
        let port: Int
        switch Self.portNumber(configuration.port) {
        case .success(let p): port = p
        case .failure(let error):
            failed(error, generation: generation)
            return
        }
        ClientBootstrap(group: eventLoop)
            .connectTimeout(.nanoseconds(Int64(configuration.connectTimeout * 1e9)))
            .channelInitializer { [self] channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(
                        GPSDReportHandler(source: self, generation: generation))
                }
            }
            .connect(host: configuration.host, port: port)
            .whenComplete { [self] result in
                switch result {
                case .success(let channel): connected(channel, generation: generation)
                case .failure(let error): failed(GPSDError(error), generation: generation)
                }
            }
    }

    private func connected(_ channel: any Channel, generation: Int) {
        let s = state.value
        guard generation == s.generation, s.connecting else {
            channel.close(promise: nil)  // torn down (or already lost) meanwhile
            return
        }
        s.connecting = false
        s.channel = channel
        count { $0.connections += 1 }
        channel.writeAndFlush(channel.allocator.buffer(bytes: Self.watchRequest(device: configuration.device)), promise: nil)
        startIdleCheck(generation: generation)
    }

    /// What libgps's `gps_stream(WATCH_ENABLE | WATCH_JSON)` sends, and with a device, what
    /// `gps_stream(…, device)` adds: gpsd then reports that device only.
    static func watchRequest(device: String?) -> [UInt8] {
        var out = Array(#"?WATCH={"enable":true,"json":true"#.utf8)
        if let device {
            out += Array(#","device":"#.utf8)
            JSONWriter.appendString(device, to: &out)
        }
        out += Array("};\n".utf8)
        return out
    }

    /// Every `idleProbe` seconds: a connection that read nothing since the last check is asked
    /// `?VERSION;`; one that read nothing since the probe either is dropped as hung. The same
    /// checks notice a receiver that stopped reporting while gpsd answers (`checkReceiver`).
    private func startIdleCheck(generation: Int) {
        let s = state.value
        stopIdleCheck()
        s.readsChecked = s.reads
        s.probing = false
        s.tpvs = 0
        s.tpvsChecked = 0
        s.quietChecks = 0
        s.longestQuiet = 0
        s.receiverSilent = false
        s.tpvDevices = []
        s.lastDeviceTracked = false
        let interval = TimeAmount.nanoseconds(Int64(configuration.idleProbe * 1e9))
        s.idleCheck = eventLoop.scheduleRepeatedTask(initialDelay: interval, delay: interval) { [self] _ in
            let s = state.value
            guard generation == s.generation, let channel = s.channel else { return }
            let answered = s.reads != s.readsChecked
            if answered {
                s.readsChecked = s.reads
                s.probing = false
            } else if s.probing {
                lost(GPSDError(code: 0, message: "gpsd sent nothing for \(numberText(2 * configuration.idleProbe)) s, not even an answer to ?VERSION: it hangs"),
                     generation: generation)
            } else {
                s.probing = true
                count { $0.idleProbes += 1 }
                channel.writeAndFlush(channel.allocator.buffer(string: "?VERSION;\n"), promise: nil)
            }
            if generation == s.generation, s.channel != nil { checkReceiver(s, gpsdAnswered: answered) }  // not dropped just now
        }
    }

    /// At each idle check: a receiver that reported (TPVs) on this connection and has not for
    /// two checks in a row (20–30 s by default), or for three times the most checks it ever
    /// went between reports if that is more (a receiver set to report every 30 s is judged after
    /// 90–100 s, not at each report), is silent when gpsd answered since the last check:
    /// unplugged, hung or powered off. A gpsd that did not answer is left to the idle probe,
    /// which drops it as hung; one report is no pace to judge by. It is reported as `.noFix(nil)`
    /// (no position, no time) rather than left at `fix` with an old position; its next report
    /// sets the state again. A no-fix, not a source state: approximate subscriptions then
    /// learn it at a publication epoch, as any loss of fix, since when a receiver powered with
    /// a vehicle falls silent says when the vehicle stopped (docs/privacy.md, "Publication
    /// epochs"; docs/gpsd.md, "Status events").
    private func checkReceiver(_ s: LoopState, gpsdAnswered: Bool) {
        if s.tpvs != s.tpvsChecked {
            s.tpvsChecked = s.tpvs
            s.quietChecks = 0
            return
        }
        guard s.tpvs > 0, !s.receiverSilent else { return }
        s.quietChecks += 1
        let needed = max(2, 3 * s.longestQuiet)
        guard s.tpvs >= 2, s.quietChecks >= needed, gpsdAnswered else { return }
        s.receiverSilent = true
        count { $0.receiverSilences += 1 }
        logger.warning("gpsd at \(configuration.address) answers, but no receiver has sent a report for \(numberText(Double(needed) * configuration.idleProbe)) s or more; taken as no fix until one reports again (a receiver unplugged, powered off or hung: gpsd's log may say which)")
        passHeld(s)
        sink(.noFix(nil))
    }

    private func stopIdleCheck() {
        let s = state.value
        s.idleCheck?.cancel()
        s.idleCheck = nil
    }

    private func failed(_ error: GPSDError, generation: Int) {
        let s = state.value
        guard generation == s.generation, s.connecting else { return }
        s.connecting = false
        count { $0.failedAttempts += 1; $0.lastError = error }
        s.failures += 1
        logger.trace("gpsd connection attempt failed", metadata: [
            "gpsd": "\(configuration.address)", "reason": "\(error.message)", "attempt": "\(s.failures)",
            "retry_in": "\(numberText(s.backoff.current)) s"])
        warn(error, "cannot connect to gpsd at \(configuration.address)")
        report(.disconnected)
        scheduleRetry()
    }

    /// Warns about `error` unless it is the reason warned about last.
    private func warn(_ error: GPSDError, _ what: String) {
        let s = state.value
        guard s.problem != error.message else { return }
        s.problem = error.message
        logger.warning("\(what): \(error.message); retrying with backoff (\(numberText(configuration.initialBackoff)) s doubling to \(numberText(configuration.maximumBackoff)) s between attempts), warning again only if the reason changes")
    }

    /// 0.1 → "0.1", 1.0 → "1" (as configuration values are written).
    /// The connection of `generation` closed or failed.
    fileprivate func lost(_ error: GPSDError, generation: Int) {
        let s = state.value
        guard generation == s.generation else { return }
        if s.connecting {  // gpsd closed it before the connect completed here
            failed(error, generation: generation)
            return
        }
        guard let channel = s.channel else { return }
        s.channel = nil
        s.generation += 1
        stopIdleCheck()
        channel.close(promise: nil)
        // gpsd sends its VERSION banner at once: one that closes first is refusing the client.
        let error = s.heard || error != .closed ? error : .closedUnheard
        count { $0.connectionsLost += 1; $0.lastError = error }
        logger.trace("gpsd connection lost", metadata: ["gpsd": "\(configuration.address)", "reason": "\(error.message)"])
        warn(error, "lost the connection to gpsd at \(configuration.address)")
        report(.disconnected)
        scheduleRetry()
    }

    private func scheduleRetry() {
        let s = state.value
        let delay = s.backoff.next()
        count { $0.lastRetryDelay = delay }
        let generation = s.generation
        s.retry = eventLoop.scheduleTask(in: .nanoseconds(Int64(delay * 1e9))) { [self] in
            let s = state.value
            guard generation == s.generation else { return }
            s.retry = nil
            reconcile()
        }
    }

    /// The connection of `generation` read something (for the idle check).
    fileprivate func readSome(generation: Int) {
        let s = state.value
        if generation == s.generation { s.reads &+= 1 }
    }

    /// One report line from the connection of `generation`, without its terminator.
    fileprivate func received(_ line: UnsafeRawBufferPointer, generation: Int) {
        let s = state.value
        guard generation == s.generation, s.channel != nil || s.connecting else { return }
        if !s.proven {
            if s.heard || !Self.isBanner(line) {
                // Only a gpsd that speaks beyond its banner resets the backoff and is news, not
                // a connection that is accepted: one that accepts and closes at once (at its
                // client limit, or not gpsd) would otherwise be retried at the shortest delay
                // forever, and one that sends its banner and then fails (a line over the limit,
                // a close) would be warned about and "connected again" ten times a second.
                s.proven = true
                s.backoff.reset()
                if s.problem != nil {
                    logger.notice("connected to gpsd at \(configuration.address) again\(s.failures > 0 ? " after \(s.failures) failed attempts" : "")")
                    s.problem = nil
                }
                s.failures = 0
            }
            if !s.heard {
                s.heard = true
                report(.connected)
            }
        }
        switch s.decoder.decode(line) {
        case .tpv(let tpv):
            s.tpvs &+= 1
            if s.decoder.tpvDeviceChanged {  // another receiver: its own pattern
                passHeld(s)
                s.pieces.switchTo(s.decoder.tpvDevice, emit: sink)
            }
            if s.decoder.tpvDeviceChanged || !s.lastDeviceTracked {
                s.tpvDevices.insert(s.decoder.tpvDevice)
                s.lastDeviceTracked = true
            }
            if s.receiverSilent {
                s.receiverSilent = false
                s.quietChecks = 0  // the silence's own gap is no pace
                logger.notice("the receiver reports again (gpsd at \(configuration.address))")
            } else {
                s.longestQuiet = max(s.longestQuiet, s.quietChecks)  // its pace, silences aside
            }
            if s.decoder.tpvError != 0 { undecodable(s, line) }
            let input = tpv.engineInput
            count {
                $0.messages += 1; $0.tpvs += 1
                switch input {
                case .fix?: $0.fixes += 1
                case .noFix?: $0.noFixes += 1
                default: $0.ignoredTPVs += 1
                }
            }
            if let input { pass(input, s) }
        case .deviceDeactivated(let path):
            count { $0.messages += 1; $0.devicesDeactivated += 1 }
            passHeld(s)
            // The last receiver that reported is gone (unplugged: gpsd saw its device close):
            // no fix now, not after the silence rule's 20–30 s.
            if path == s.decoder.tpvDevice { s.lastDeviceTracked = false }
            if s.tpvDevices.remove(path) != nil, s.tpvDevices.isEmpty, !s.receiverSilent {
                s.receiverSilent = true
                count { $0.receiverSilences += 1 }
                logger.warning("gpsd at \(configuration.address) reports its receiver \(path) gone (unplugged, or closed by gpsd); taken as no fix until one reports again")
                sink(.noFix(nil))
            }
            onDeviceDeactivated?(path)
        case .error(let message):
            count { $0.messages += 1 }
            if s.gpsdError != message {
                s.gpsdError = message
                logger.warning("gpsd at \(configuration.address) reports an error: \(message)")
            }
        case .version(let version):
            count { $0.messages += 1 }
            if let problem = version.incompatibility, s.versionProblem != problem {
                s.versionProblem = problem
                logger.warning("gpsd at \(configuration.address) \(problem)")
            }
        case .sky(let sky, let fromTPVDevice):
            count { $0.messages += 1 }
            if fromTPVDevice { onSky?(sky) }
        case .other:
            count { $0.messages += 1 }
        }
    }

    /// A TPV libgps could not decode all of (the decoder's `tpvError`): counted, and warned about
    /// once with what came and what is expected, since its fixes are lost without a word (a
    /// gpsd before protocol 3.4 writes `"time"` as a number). What libgps did read goes on as
    /// any TPV (without its time, no fix).
    private func undecodable(_ s: LoopState, _ line: UnsafeRawBufferPointer) {
        count { $0.undecodableTPVs += 1 }
        guard !s.undecodableWarned else { return }
        s.undecodableWarned = true
        let why = s.decoder.tpvErrorText
        let limit = 200
        let shown = String(decoding: line.prefix(limit), as: UTF8.self) + (line.count > limit ? "…" : "")
        logger.warning("gpsd at \(configuration.address) sent a TPV report libgps cannot decode (\(why)): \(shown); locationd expects gpsd's JSON protocol 3.4 or later (gpsd 3.x: ISO 8601 times, \"time\":\"2026-01-01T00:00:00.000Z\"); what libgps could not read is ignored, and a TPV without its time gives no fix. Warned once")
    }

    /// Whether `line` is gpsd's VERSION banner, the first line of every connection.
    static func isBanner(_ line: UnsafeRawBufferPointer) -> Bool {
        let prefix = #"{"class":"VERSION""#.utf8
        return line.count >= prefix.count && zip(line, prefix).allSatisfy { $0 == $1 }
    }

    /// "2947" → 2947; a service name ("gpsd") through /etc/services, as libgps's getaddrinfo would.
    static func portNumber(_ text: String) -> Result<Int, GPSDError> {
        if let n = Int(text), (1...65535).contains(n) { return .success(n) }
        if let entry = getservbyname(text, "tcp") {
            return .success(Int(UInt16(bigEndian: UInt16(truncatingIfNeeded: entry.pointee.s_port))))
        }
        return .failure(GPSDError(code: 0, message: "gpsd port '\(text)' is neither a port number (1–65535) nor a TCP service in /etc/services"))
    }
}

/// Splits gpsd's byte stream into report lines (`\n`-terminated; a `\r` before it is dropped)
/// and hands each to the source, on the loop, without copying a line that arrived whole.
private final class GPSDReportHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private let source: GPSDSource
    private let generation: Int
    /// The start of a line whose end has not arrived yet.
    private var pending: ByteBuffer?

    init(source: GPSDSource, generation: Int) {
        self.source = source
        self.generation = generation
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        source.readSome(generation: generation)
        var incoming = unwrapInboundIn(data)
        if var carried = pending {
            pending = nil
            carried.writeBuffer(&incoming)
            incoming = carried
        }
        while let newline = incoming.readableBytesView.firstIndex(of: UInt8(ascii: "\n")) {
            let length = newline - incoming.readerIndex
            incoming.withUnsafeReadableBytes { bytes in
                var end = length
                if end > 0 && bytes[end - 1] == UInt8(ascii: "\r") { end -= 1 }
                source.received(UnsafeRawBufferPointer(rebasing: bytes[0..<end]), generation: generation)
            }
            incoming.moveReaderIndex(forwardBy: length + 1)
        }
        guard incoming.readableBytes > 0 else { return }
        if incoming.readableBytes > GPSDSource.maximumLineLength {
            source.lost(GPSDError(code: 0, message: "gpsd sent a line longer than \(GPSDSource.maximumLineLength) bytes; not gpsd's protocol"),
                        generation: generation)
            context.close(promise: nil)
            return
        }
        incoming.discardReadBytes()
        pending = incoming
    }

    func channelInactive(context: ChannelHandlerContext) {
        source.lost(.closed, generation: generation)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        source.lost(GPSDError(error), generation: generation)
        context.close(promise: nil)
    }
}
