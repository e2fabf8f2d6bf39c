import Glibc
import LocationCore
import LocationProtocol
import Logging
import NIOCore

/// The peer process of a Unix socket connection (`SO_PEERCRED`, taken at connect time).
public struct PeerCredentials: Hashable, Sendable, CustomStringConvertible {
    public var pid: Int32
    public var uid: UInt32
    public var gid: UInt32
    /// The supplementary groups at connect time (`SO_PEERGROUPS`); nil when the kernel did not
    /// give them (then they are read from /proc/PID/status: `PeerIdentity.resolve`).
    public var groups: [UInt32]?
    public init(pid: Int32, uid: UInt32, gid: UInt32, groups: [UInt32]? = nil) {
        self.pid = pid; self.uid = uid; self.gid = gid; self.groups = groups
    }
    public var description: String { "pid=\(pid) uid=\(uid) gid=\(gid)" }
}

/// One connection's state, for `SocketServer.connectionStats()` (tests and diagnostics).
public struct ConnectionStats: Hashable, Sendable {
    public var subscriber: SubscriberID
    public var peer: PeerCredentials?
    public var isSubscribed: Bool
    public var isWritable: Bool
    /// Bytes queued in NIO for this connection, not yet accepted by the kernel.
    public var bufferedBytes: Int
    /// Location events dropped for this connection because it did not read (all time).
    public var skippedLocations: Int
    /// Whether a location event is held back waiting for the connection to become writable.
    public var hasPendingLocation: Bool
}

/// A token bucket: `burst` requests at once, refilled at `rate` per second.
struct TokenBucket {
    var burst: Double
    var rate: Double
    var tokens: Double
    var last: NIODeadline
    /// Until when the time the loop stood still has been added (`credit`).
    var stallsCredited: NIODeadline
    /// Tokens for the requests that piled up while the loop stood still, beyond the burst (the
    /// refill's cap does not apply to them), and until when they may be spent: they are for what
    /// waited in the socket then, which the loop reads at once when it runs again, not savings
    /// for a later burst.
    var stallTokens: Double = 0
    var stallTokensUntil: NIODeadline

    init(burst: Int, rate: Double, now: NIODeadline) {
        self.burst = Double(burst); self.rate = rate; self.tokens = Double(burst); self.last = now
        self.stallsCredited = now
        self.stallTokensUntil = now
    }

    /// Grants tokens for `stalled`, time the loop stood still since `stallsCredited`: requests
    /// sent then waited in the socket and count at the rate they were sent, not as arriving
    /// together now. They may be spent for as long as the stall lasted, 1 s at least.
    mutating func credit(stalled: TimeAmount, now: NIODeadline) {
        stallsCredited = now
        // What an earlier stall left unspent has expired with its window: not banked.
        let left = now <= stallTokensUntil ? stallTokens : 0
        stallTokens = left + Double(stalled.nanoseconds) / 1e9 * rate
        stallTokensUntil = max(stallTokensUntil, now + max(stalled, .seconds(1)))
    }

    mutating func take(now: NIODeadline) -> Bool {
        let elapsed = Double((now - last).nanoseconds) / 1e9
        if elapsed > 0 {
            tokens = min(burst, tokens + elapsed * rate)
            last = now
        }
        if tokens >= 1 {
            tokens -= 1
            return true
        }
        guard stallTokens >= 1, now <= stallTokensUntil else { return false }
        stallTokens -= 1
        return true
    }
}

/// One client connection: line framing, requests → replies, the subscription, and the bounded
/// outbox for slow readers (docs/protocol.md, "Slow readers"). Lives on the hub's loop.
final class Connection: ChannelInboundHandler, HubSubscriber {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    let hub: Hub
    let configuration: SocketServer.Configuration
    let registry: ConnectionRegistry
    var logger: Logger
    let id: SubscriberID
    var context: ChannelHandlerContext?
    var peer: PeerCredentials?
    var isSubscribed = false
    /// Inside `applyPolicy` (a reload): `keep` leaves the warning to `keepAgain`.
    var reconsidering = false
    var closing = false
    /// Whether its program is known and counted (`ConnectionRegistry.identified`).
    var identified = false
    /// Whether a request or an event is being handled. A write that fails (the peer went away)
    /// makes NIO read what the peer sent before it went and close the channel, both from inside
    /// that write: the requests read then wait until the handler that wrote returns (and are
    /// dropped with the connection), or they ran in the middle of it, and a `session.start` or
    /// `subscribe` after the close opened state no `channelInactive` would ever release.
    var busy = false
    var input: ByteBuffer
    var bucket: TokenBucket
    var scratch: [UInt8] = []

    // Slow-reader outbox: at most one location and one status event held back.
    var pendingLocation: Fix?
    var pendingStatus: (state: SourceState, time: Timestamp?)?
    var locationIsNewest = false
    var skippedSincePending = 0
    var skippedTotal = 0
    var unwritableTimer: Scheduled<Void>?
    /// The `always` program's backlog being written, a page at a time while the connection is
    /// writable: the last sequence number written, and the last one it takes (what was queued
    /// when it began; later ones are the next subscribe's). Written all at once, a program's
    /// 10,000 queued events sat in memory for each of its connections that did not read (40
    /// such connections: 166 MiB).
    var backlog: (after: UInt64, through: UInt64)?
    /// Events that came while the backlog was being written, in order, to follow it (region,
    /// visit and significant-change events, and held-back ones written before them).
    var behindBacklog: [ByteBuffer] = []
    /// Queued events read from the store per page of the backlog.
    static let backlogPage = 128
    /// Whether reading from the socket is paused (`handleInput`): until the replies drain, or
    /// until the flood limit's next token (`throttle`).
    var readingPaused = false
    var throttle: Scheduled<Void>?
    /// Requests held back by a pause are still being answered (they do not count as a flood).
    var catchingUp = false
    /// The program this connection speaks for (regions belong to it); set at connect time.
    var program = ProgramID("unknown")
    /// The peer as resolved at connect time (nil when SO_PEERCRED failed: the default rule applies).
    var identity: PeerIdentity?
    /// The policy rule that applies to the peer (re-resolved on reload).
    var rule = Policy().defaultRule
    /// The open session, if any (docs/protocol.md, "Sessions"): nothing is delivered without one.
    var session: (grant: Grant, requested: Authorization, purpose: String?)?

    init(hub: Hub, configuration: SocketServer.Configuration, registry: ConnectionRegistry, logger: Logger) {
        self.hub = hub
        self.configuration = configuration
        self.registry = registry
        self.id = hub.makeSubscriberID()
        self.logger = logger
        self.logger[metadataKey: "connection"] = "\(id.rawValue)"
        self.input = ByteBuffer()
        self.bucket = TokenBucket(burst: configuration.floodBurst, rate: configuration.floodRate, now: configuration.now())
    }

    var stats: ConnectionStats {
        ConnectionStats(
            subscriber: id, peer: peer, isSubscribed: isSubscribed,
            isWritable: context?.channel.isWritable ?? false,
            bufferedBytes: (try? context?.channel.syncOptions?.getOption(ChannelOptions.bufferedWritableBytes)) ?? 0,
            skippedLocations: skippedTotal, hasPendingLocation: pendingLocation != nil)
    }

    func close() { context?.close(promise: nil) }

    // MARK: Channel events

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func channelActive(context: ChannelHandlerContext) {
        peer = Self.peerCredentials(of: context.channel)
        if let peer {
            logger[metadataKey: "peer"] = "\(peer)"
        }
        // Counted by uid before anything else is read: a refused connection costs no /proc read.
        let open = registry.add(self)
        if let uid = peer?.uid, open > configuration.maxConnectionsPerUser, !hub.policy.isOwner(uid: uid) {
            refuseCrowded(uid: uid, open: open - 1, context: context)
            return
        }
        identity = peer.map(PeerIdentity.resolve)
        program = identity?.program ?? ProgramID("unknown")
        registry.identified(self)
        rule = identity.map { hub.policy.rule(for: $0) } ?? hub.policy.defaultRule
        logger.info("connection opened", metadata: ["uid": "\(peer.map { "\($0.uid)" } ?? "?")",
                                                    "gid": "\(peer.map { "\($0.gid)" } ?? "?")",
                                                    "pid": "\(peer.map { "\($0.pid)" } ?? "?")",
                                                    "exe": "\(identity?.executable ?? "?")",
                                                    "rule": "\(rule.name)",
                                                    "max": "\(rule.authorization.rawValue) \(rule.accuracy.rawValue)"])
        if let identity, !identity.executableVerified, let exe = identity.executable,
           let named = hub.policy.rules.first(where: { $0.executable == exe }) {
            // The one place an admin learns why a program lost its rule (after an upgrade, or in
            // a directory the daemon's user may not search).
            logger.warning("rule '\(named.name)' naming the program's executable does not decide for it alone: \(ProgramIdentity.whyNotFile(exe, runBy: identity.pid))",
                           metadata: ["exe": "\(exe)", "rule": "\(rule.name)"])
        }
        send(.hello(ServerHello()), flush: true)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        // Possibly inside one of our writes (above, `busy`): nothing runs for this connection
        // after this; the handler that wrote checks `context` before it opens anything.
        closing = true
        unwritableTimer?.cancel()
        unwritableTimer = nil
        throttle?.cancel()
        throttle = nil
        if isSubscribed, let session, session.grant.authorization == .always {
            // Going away without ending the session: the program's monitoring continues in
            // the background and its events wait in the queue (docs/semantics.md, "Background").
            hub.handOver(id, to: program, options: effectiveOptions(requestedOptions, session.grant), identity: identity)
            isSubscribed = false
        }
        endSession()
        if isSubscribed {
            hub.unsubscribe(id)
            isSubscribed = false
        }
        // The program's identity is forgotten when it keeps nothing, once no connection of it is
        // left (its latest session's identity decides what its hand-over keeps).
        if registry.remove(self) { hub.programClosed(program) }
        logger.debug("connection closed", metadata: ["skipped": "\(skippedTotal)"])
        self.context = nil
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("connection error", metadata: ["error": "\(error)"])
        context.close(promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !closing else { return }
        var incoming = unwrapInboundIn(data)
        input.writeBuffer(&incoming)
        if busy {
            // Read from inside one of our writes: answered once that handler has returned.
            context.eventLoop.assumeIsolated().execute { [self] in
                if !closing, let context = self.context { handleInput(context: context) }
            }
            return
        }
        handleInput(context: context)
    }

    /// Answers the complete request lines read so far. While the connection is not writable (its
    /// peer does not read its replies) it stops: the rest waits in `input`, and reading from the
    /// socket pauses until the replies drain, so a peer that sends requests and never reads
    /// holds the daemon's memory to the watermarks, not to what it asks for (docs/protocol.md,
    /// "Slow readers"). Requests held back so are then answered at the flood limit's rate
    /// rather than counted as a flood: they arrive together because the daemon held them.
    func handleInput(context: ChannelHandlerContext) {
        let max = configuration.maxLineBytes
        let wasBusy = busy
        busy = true
        defer { busy = wasBusy }
        while !closing && throttle == nil {
            guard context.channel.isWritable else {
                pauseReading(context: context)
                catchingUp = true
                break
            }
            guard let newline = input.readableBytesView.firstIndex(of: 0x0A) else { break }
            let length = newline - input.readerIndex
            guard length <= max + 1 else {  // + 1: a CR before the LF is allowed
                abort(ProtocolError(.lineTooLong, "line of \(length) bytes is longer than \(max) bytes; closing"))
                return
            }
            let blank = input.readableBytesView[input.readerIndex..<newline].allSatisfy { $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }
            if !blank && !takeToken() {
                guard catchingUp else {
                    abort(ProtocolError(.flood, "more than \(configuration.floodBurst) requests at once or \(JSONWriter.numberText(configuration.floodRate)) per second sustained; closing"))
                    return
                }
                throttleInput(context: context)
                break
            }
            var line = input.readBytes(length: length) ?? []
            input.moveReaderIndex(forwardBy: 1)
            if line.last == 0x0D { line.removeLast() }
            guard line.count <= max else {
                abort(ProtocolError(.lineTooLong, "line of \(line.count) bytes is longer than \(max) bytes; closing"))
                return
            }
            if blank { continue }  // blank lines are ignored
            handleLine(line)
        }
        // The next line, complete or not, must fit.
        let next = input.readableBytesView.firstIndex(of: 0x0A).map { $0 - input.readerIndex } ?? input.readableBytes
        if !closing && next > max + 1 {
            abort(ProtocolError(.lineTooLong, "line longer than \(max) bytes; closing"))
            return
        }
        if input.readerIndex > 4096 { input.discardReadBytes() }
        context.flush()
    }

    /// A token for one request. An empty bucket is first refilled for the time the loop stood
    /// still (`LoopStallWatch`) since the last such refill.
    private func takeToken() -> Bool {
        let now = configuration.now()
        if bucket.take(now: now) { return true }
        let stalled = registry.stalls.stalled(since: bucket.stallsCredited)
        guard stalled > .zero else { return false }
        bucket.credit(stalled: stalled, now: now)
        logger.debug("requests held by a stalled loop", metadata: ["stalled_ms": "\(stalled.nanoseconds / 1_000_000)"])
        return bucket.take(now: now)
    }

    /// The socket has no more to read for now: if every request read is answered and reading is
    /// not paused, the connection has caught up with what a pause held back.
    func channelReadComplete(context: ChannelHandlerContext) {
        if catchingUp && !readingPaused && throttle == nil && input.readableBytesView.firstIndex(of: 0x0A) == nil {
            catchingUp = false
        }
        context.fireChannelReadComplete()
    }

    private func pauseReading(context: ChannelHandlerContext) {
        guard !readingPaused else { return }
        readingPaused = true
        try? context.channel.syncOptions?.setOption(ChannelOptions.autoRead, value: false)
    }

    /// Waits for the flood limit's next token, reading paused.
    private func throttleInput(context: ChannelHandlerContext) {
        pauseReading(context: context)
        let wait = TimeAmount.nanoseconds(Int64(1e9 / configuration.floodRate) + 1)
        throttle = context.eventLoop.assumeIsolated().scheduleTask(in: wait) { [self] in
            throttle = nil
            resumeInput()
        }
    }

    /// Answers what waited and reads again, unless the connection is still not writable or
    /// waits for a token. Called as a task of its own, never inside another handler's call
    /// (a write that drains the socket can make the connection writable inside the hub's
    /// delivery loop, and requests must not be handled there).
    private func resumeInput() {
        guard let context, !closing, readingPaused, throttle == nil, context.channel.isWritable else { return }
        readingPaused = false
        handleInput(context: context)
        if !readingPaused && !closing {
            try? context.channel.syncOptions?.setOption(ChannelOptions.autoRead, value: true)
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            unwritableTimer?.cancel()
            unwritableTimer = nil
            if backlog != nil {
                // Not from inside this call: it can come from a flush of `writeBacklog` itself.
                context.eventLoop.assumeIsolated().execute { [self] in writeBacklog() }
            } else {
                flushPending()
            }
            if readingPaused { context.eventLoop.assumeIsolated().execute { [self] in resumeInput() } }
        } else if unwritableTimer == nil {
            let timeout = configuration.unwritableTimeout
            unwritableTimer = context.eventLoop.assumeIsolated().scheduleTask(in: timeout) { [self] in
                logger.notice("closing a connection that has not read for \(timeout)",
                              metadata: ["skipped": "\(skippedTotal)"])
                self.context?.close(promise: nil)
            }
        }
        context.fireChannelWritabilityChanged()
    }

    // MARK: Requests

    func handleLine(_ line: [UInt8]) {
        let request: Request
        do {
            request = try Request.decode(line)
        } catch {
            logger.debug("bad request", metadata: ["code": "\(error.code.rawValue)", "message": "\(error.message)"])
            send(.error(error), flush: false)
            return
        }
        switch request {
        case .hello(let rid):
            send(.hello(ServerHello(id: rid)), flush: false)
        case .sessionStart(let rid, let requested, let purpose):
            startSession(requested: requested, purpose: purpose, id: rid)
        case .sessionEnd(let rid):
            endSession()
            send(.session(SessionInfo(id: rid, state: .ended)), flush: false)
        case .subscribe(let rid, _) where session == nil:
            send(.error(notAuthorized(rid)), flush: false)
        case .subscribe(let rid, let options):
            if let error = backgroundRefusal(options, id: rid) {
                send(.error(error), flush: false)
                return
            }
            // What the filter runs with: an approximate session's accuracy gate is off and its
            // interval at least `approximateInterval` (docs/privacy.md).
            let effective = session.map { effectiveOptions(options, $0.grant).effectiveForFilter } ?? options
            send(.subscribed(id: rid, options: effective), flush: false)
            subscribe(options)
        case .unsubscribe(let rid):
            if isSubscribed {
                hub.unsubscribe(id)
                isSubscribed = false
            }
            stopBacklog()
            dropPending()
            send(.unsubscribed(id: rid), flush: false)
        case .status(let rid, let offset):
            send(.statusReply(statusReply(id: rid, offset: offset)), flush: false)
        case .ack(let rid, let seq):
            acknowledge(seq, id: rid)
        case .regionsAdd, .regionsRemove, .regionsList, .regionsState:
            if let error = regionsRefusal(request.id) {
                send(.error(error), flush: false)
            } else {
                // Another process of the program may have had its regions suspended meanwhile;
                // this one may use them.
                if let identity { hub.programSeen(identity, rule: rule) }
                handleRegions(request)
            }
        }
    }

    // MARK: Sessions (docs/protocol.md, "Sessions")

    /// The options the client asked for (the session's accuracy is applied on top).
    var requestedOptions = SubscriptionOptions()

    /// Opens (or re-opens) the subscription under the session's accuracy: approximate sessions
    /// run through the privacy stage and get no region events.
    func subscribe(_ options: SubscriptionOptions) {
        guard let session else { return }
        requestedOptions = options
        let effective = effectiveOptions(options, session.grant)
        isSubscribed = true
        hub.subscribe(id, options: effective, subscriber: self) {
            // Writing the status may have found the peer gone: the connection closed meanwhile
            // (`channelInactive` unsubscribed it), and nothing may be kept or bound for it.
            guard self.context != nil else { return }
            keep(always: session.grant.authorization == .always ? effective : nil)
            if effective.accuracy == .precise { hub.bind(id, to: program) } else { hub.unbind(id) }
            // The backlog right after the status (docs/protocol.md, "Background delivery").
            if session.grant.authorization == .always { takeBackground() }
        }
    }

    /// The session's grant changed (a new `session.start`, a reload): `announce` writes the
    /// news (the reply, or the `changed` event), after what the old grant produced and before
    /// anything the new one does. Under an open subscription another accuracy subscribes again
    /// (the privacy stage changes), and becoming `always` takes the program's background
    /// monitoring and queue over, as an `always` subscribe does. *Reason:* the news came after
    /// the re-subscription's events, so a client read approximate locations while it still
    /// believed its session precise (and the other way round).
    func subscriptionRegranted(from old: Grant?, announce: () -> Void) {
        guard isSubscribed, let session else { return announce() }
        if old?.accuracy != session.grant.accuracy {
            // What came live behind a backlog was produced under the old accuracy: written
            // before the news, as without the backlog; the re-subscribe starts the backlog again.
            stopBacklog()
            // A location held for a slow reader was made under the old accuracy and must not
            // follow the news of the new one (a precise one after "approximate now", an
            // approximate one after "precise now"); it counts as skipped.
            if pendingLocation != nil {
                pendingLocation = nil
                skippedSincePending += 1
                skippedTotal += 1
            }
            // So is a held status (the loop may run this before the flush a drained socket
            // scheduled): the re-subscription sends the state as the new accuracy shows it.
            pendingStatus = nil
            announce()
            subscribe(requestedOptions)
            return
        }
        // No longer always: the rest of the backlog stays queued (it may not be acknowledged
        // now), and what waited behind it, made under the old grant, goes before the news.
        if old?.authorization == .always && session.grant.authorization != .always { stopBacklog() }
        announce()
        if old?.authorization != .always && session.grant.authorization == .always {
            keep(always: effectiveOptions(requestedOptions, session.grant))
            takeBackground()
        } else if old?.authorization == .always && session.grant.authorization != .always {
            // No longer always: a kill now must not leave it monitored in the background.
            hub.subscriptionKept(id, of: program, always: nil)
        }
    }

    /// An `always` subscription its program could not keep in the background (`Hub.backgroundRefusal`)
    /// is refused at `subscribe`, with the reason.
    func backgroundRefusal(_ options: SubscriptionOptions, id rid: RequestID?) -> ProtocolError? {
        guard session?.grant.authorization == .always, Hub.keptInBackground(options),
              let why = hub.backgroundRefusal(of: program) else { return nil }
        warnBackgroundRefused(why)
        return ProtocolError(.tooManyBackgroundPrograms, why, id: rid)
    }

    /// What the subscription keeps in the background (`Hub.subscriptionKept`). One that became
    /// `always` under a grant change (a reload, a `session.start`) when the bound refuses it
    /// stays live only: nothing asked that an error could answer, so only the journal says it.
    /// In a reload (`reconsidering`) the warning waits for `keepAgain()`: the same reload may
    /// free a slot (a program that lost `always`) after this connection was reconsidered.
    func keep(always options: SubscriptionOptions?, warn: Bool = true) {
        if !hub.subscriptionKept(id, of: program, always: options), warn, !reconsidering, let why = hub.backgroundRefusal(of: program) {
            warnBackgroundRefused(why + "; this subscription goes on while connected, not in the background")
        }
    }

    /// After a reload has ended what it ends: a subscription the bound refused is offered a
    /// slot again; `warn`: one refused during this reload is warned about if there is still
    /// none (one refused before was warned about then).
    func keepAgain(warn: Bool) {
        guard isSubscribed, let session, session.grant.authorization == .always else { return }
        keep(always: effectiveOptions(requestedOptions, session.grant), warn: warn)
    }

    /// Paced as the crowding warning: a refused subscribe can be repeated at will.
    private func warnBackgroundRefused(_ why: String) {
        guard let uid = peer?.uid, let held = registry.backgroundWarning(uid, at: configuration.now()) else { return }
        let since = held > 0 ? "; \(held) more refused since the last such warning" : ""
        logger.warning("refusing background monitoring to a program: \(why) (warned at most once a minute per user\(since))",
                       metadata: ["program": "\(program)"])
    }

    func effectiveOptions(_ options: SubscriptionOptions, _ grant: Grant) -> SubscriptionOptions {
        var effective = options
        effective.accuracy = grant.accuracy
        return effective
    }

    // MARK: Background delivery (docs/protocol.md, "Background delivery")

    /// An `always` program subscribed: its background detectors carry over to this
    /// subscription, and what waited in its queue is written now, before any newer event.
    func takeBackground() {
        guard context != nil, let queue = hub.queue else { return hub.takeBack(program, into: id) }
        hub.writeUnwritten()
        if backlog == nil { flushPending() }
        // From the start again on a new subscribe: until acknowledged, every subscribe gets all
        // of it (docs/protocol.md, "Background delivery").
        backlog = (0, queue.lastSeq(of: program))
        // After the backlog is set: visits the background monitor held for a publication, which
        // the take-back sends at once, are newer than what is queued and wait behind it.
        hub.takeBack(program, into: id)
        writeBacklog()
    }

    /// Writes pages of the backlog while the connection is writable; when it is not, the rest
    /// waits in the store until it is (`channelWritabilityChanged`). Newer events wait behind it.
    func writeBacklog() {
        guard let context, !closing, var progress = backlog, let queue = hub.queue else { return }
        var lines: [[UInt8]] = []
        while context.channel.isWritable {
            lines.removeAll(keepingCapacity: true)
            let next = queue.backlogPage(of: program, after: progress.after, through: progress.through,
                                         limit: Self.backlogPage, into: &lines)
            for line in lines {
                context.write(wrapOutboundOut(context.channel.allocator.buffer(bytes: line)), promise: nil)
            }
            guard let next else {
                if progress.through > 0 { logger.info("background queue delivered", metadata: ["through": "\(progress.through)"]) }
                stopBacklog()
                if pendingLocation != nil || pendingStatus != nil { flushPending() } else { context.flush() }
                return
            }
            progress.after = next
            backlog = progress
            context.flush()
        }
    }

    /// Ends the backlog: written through, or cut short because the subscription ended or its
    /// accuracy changed (the rest stays queued for the next subscribe). What came live meanwhile
    /// is written now, as it would have been without the backlog (before the reply or the
    /// `changed` event that follows). Not flushed here: a flush that drains the socket would
    /// write the held-back location too (`channelWritabilityChanged`), which those callers drop.
    func stopBacklog() {
        guard backlog != nil else { return }
        backlog = nil
        guard let context else { return behindBacklog.removeAll() }
        for buffer in behindBacklog { context.write(wrapOutboundOut(buffer), promise: nil) }
        behindBacklog.removeAll()
    }

    func acknowledge(_ seq: UInt64, id rid: RequestID?) {
        guard let session else { return send(.error(notAuthorized(rid)), flush: false) }
        guard session.grant.authorization == .always else {
            return send(.error(ProtocolError(.insufficientAuthorization, "only always sessions have a background queue; this one is \(session.grant.authorization.rawValue)", id: rid)), flush: false)
        }
        guard let queue = hub.queue else {
            return send(.error(ProtocolError(.outOfRange, "seq \(seq): this daemon keeps no background queue", id: rid)), flush: false)
        }
        do {
            let remaining = try queue.acknowledge(seq, for: program)
            send(.acked(id: rid, seq: seq, queued: remaining), flush: false)
        } catch where error.code == .storeFailed {
            logger.error("cannot record an acknowledgement", metadata: ["program": "\(program)", "seq": "\(seq)", "error": "\(error)"])
            send(.error(ProtocolError(.storeFailed, "the daemon could not record the acknowledgement in its database, so nothing was forgotten; acknowledge again later (the daemon's log says why)", id: rid)), flush: false)
        } catch {
            send(.error(ProtocolError(error.code, error.description, id: rid)), flush: false)
        }
    }

    func notAuthorized(_ rid: RequestID?) -> ProtocolError {
        ProtocolError(.notAuthorized, rule.authorization == .denied
            ? "policy rule '\(rule.name)' denies location access to this program"
            : "no active session; send session.start first", id: rid)
    }

    /// Why this connection may not use regions, or nil: regions need an `always`, precise session.
    func regionsRefusal(_ rid: RequestID?) -> ProtocolError? {
        guard let session else { return notAuthorized(rid) }
        if session.grant.accuracy != .precise {
            return ProtocolError(.fullAccuracyDenied, "region monitoring needs precise location; this session is approximate (rule '\(session.grant.rule)')", id: rid)
        }
        if session.grant.authorization < .always {
            return ProtocolError(.insufficientAuthorization, "region monitoring needs an always session; this one is \(session.grant.authorization.rawValue)", id: rid)
        }
        return nil
    }

    func startSession(requested: Authorization, purpose: String?, id rid: RequestID?) {
        if let identity { hub.programSeen(identity, rule: rule) }
        switch Grant.decide(requested: requested, purpose: purpose, rule: rule) {
        case .failure(.notAuthorized(let why)):
            endSession()
            send(.error(ProtocolError(.notAuthorized, why, id: rid)), flush: false)
        case .failure(.fullAccuracyDenied(let why)):
            send(.error(ProtocolError(.fullAccuracyDenied, why, id: rid)), flush: false)
        case .success(let grant):
            let old = session?.grant
            if session == nil { hub.sessionOpened() }
            session = (grant, requested, purpose)
            logger.info("session started", metadata: ["authorization": "\(grant.authorization.rawValue)",
                                                      "accuracy": "\(grant.accuracy.rawValue)", "rule": "\(grant.rule)"])
            subscriptionRegranted(from: old) { send(.session(info(id: rid, state: .active)), flush: false) }
        }
    }

    func info(id rid: RequestID?, state: SessionInfo.State) -> SessionInfo {
        guard let session else { return SessionInfo(id: rid, state: state) }
        return SessionInfo(id: rid, state: state, requested: session.requested, authorization: session.grant.authorization,
                           accuracy: session.grant.accuracy, temporaryPrecise: session.grant.temporaryPrecise,
                           purpose: session.purpose, rule: session.grant.rule, reason: session.grant.reason)
    }

    /// Ends the session: `when-in-use` delivery stops with it.
    func endSession() {
        guard session != nil else { return }
        session = nil
        if isSubscribed {
            hub.unsubscribe(id)
            isSubscribed = false
        }
        hub.sessionClosed()
        stopBacklog()
        dropPending()
        logger.info("session ended")
    }

    /// A reload: the peer is resolved against the new policy; an open session is re-decided
    /// and told (`changed`, or `ended` when the new rule denies it).
    func applyPolicy(_ policy: Policy) {
        reconsidering = true
        defer { reconsidering = false }
        let new = identity.map { policy.rule(for: $0) } ?? policy.defaultRule
        guard new != rule else { return }
        rule = new
        guard let session else { return }
        var purpose = session.purpose
        var decision = Grant.decide(requested: session.requested, purpose: purpose, rule: new)
        // A purpose the new rule no longer lists takes back its precise access, not the access
        // the rule still gives: the session goes on at the rule's own accuracy (at a
        // session.start, the same purpose is refused so that the program can ask without it).
        if case .failure(.fullAccuracyDenied(let why)) = decision, purpose != nil,
           case .success(var grant) = Grant.decide(requested: session.requested, purpose: nil, rule: new) {
            grant.reason += "; \(why), so precise access by it ended"
            decision = .success(grant)
            purpose = nil
        }
        switch decision {
        case .success(let grant):
            guard grant != session.grant else { return }
            self.session = (grant, session.requested, purpose)
            subscriptionRegranted(from: session.grant) { send(.session(info(id: nil, state: .changed)), flush: true) }
        case .failure(let error):
            endSession()
            let why = switch error { case .notAuthorized(let w), .fullAccuracyDenied(let w): w }
            send(.session(SessionInfo(state: .ended, reason: why)), flush: true)
        }
    }

    /// Replies are always written (no more are made while the connection is not writable: see
    /// `handleInput`); only events are held back for slow readers.
    func send(_ message: ServerMessage, flush: Bool) {
        guard let context else { return }
        scratch.removeAll(keepingCapacity: true)
        message.append(to: &scratch)
        let buffer = context.channel.allocator.buffer(bytes: scratch)
        if flush {
            context.writeAndFlush(wrapOutboundOut(buffer), promise: nil)
        } else {
            context.write(wrapOutboundOut(buffer), promise: nil)
        }
    }

    /// The peer's user is at `[socket] max_connections_per_user`: an error instead of the hello,
    /// and the connection closed. Logged at most once a minute per user, with the count of those
    /// refused meanwhile (`PacedWarnings`): each refusal logged was a way to flood the journal.
    private func refuseCrowded(uid: UInt32, open: Int, context: ChannelHandlerContext) {
        closing = true
        let limit = configuration.maxConnectionsPerUser
        if let held = registry.crowdingWarning(uid, at: configuration.now()) {
            let since = held > 0 ? "; \(held) more refused since the last such warning" : ""
            logger.warning("refusing connections of uid \(uid): it has \(open) open, the most [socket] max_connections_per_user allows; raise it if that user's programs need more (warned at most once a minute per user\(since))")
        }
        let error = ProtocolError(.tooManyConnections, "uid \(uid) has \(open) connections open, the most this daemon allows one user ([socket] max_connections_per_user = \(limit)); close some")
        scratch.removeAll(keepingCapacity: true)
        ServerMessage.error(error).append(to: &scratch)
        context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(bytes: scratch))).assumeIsolated().whenComplete { _ in
            context.close(promise: nil)
        }
    }

    /// Sends a final error and closes once it is written.
    func abort(_ error: ProtocolError) {
        guard let context, !closing else { return }
        closing = true
        logger.info("closing an abusive connection", metadata: ["code": "\(error.code.rawValue)"])
        scratch.removeAll(keepingCapacity: true)
        ServerMessage.error(error).append(to: &scratch)
        let buffer = context.channel.allocator.buffer(bytes: scratch)
        context.writeAndFlush(wrapOutboundOut(buffer)).assumeIsolated().whenComplete { _ in
            context.close(promise: nil)
        }
    }

    // MARK: Events (HubSubscriber)

    func deliver(_ event: Event, encoded: ByteBuffer) {
        guard let context, !closing else { return }
        let wasBusy = busy
        busy = true
        defer { busy = wasBusy }
        if backlog == nil, context.channel.isWritable {
            // The count of locations dropped before this one goes with it; the line the hub
            // encoded has none, so it is written as a held one is.
            if case .location(let fix) = event, skippedSincePending > 0 {
                pendingLocation = fix
                locationIsNewest = true
                flushPending()
                return
            }
            if pendingLocation != nil || pendingStatus != nil { flushPending() }
            context.writeAndFlush(wrapOutboundOut(encoded), promise: nil)
            return
        }
        switch event {
        case .location(let fix):
            if pendingLocation != nil {
                skippedSincePending += 1
                skippedTotal += 1
            }
            pendingLocation = fix
            locationIsNewest = true
        case .status(let state, let time):
            pendingStatus = (state, time)
            locationIsNewest = false
        case .visit, .significant, .region:
            // Visits, significant changes and region events are rare and cannot be replaced by a
            // newer one: never dropped, written behind the held-back events (order is kept), and
            // behind the backlog while it is being written.
            if backlog != nil {
                if let held = encodePending() { behindBacklog.append(held) }
                behindBacklog.append(encoded)
            } else {
                flushPending()
                context.writeAndFlush(wrapOutboundOut(encoded), promise: nil)
            }
        }
    }

    func dropPending() {
        pendingLocation = nil
        pendingStatus = nil
        skippedSincePending = 0
    }

    /// Writes the held-back events, older first; the location carries `"skipped":N`.
    func flushPending() {
        guard let context, let held = encodePending() else { return }
        context.writeAndFlush(wrapOutboundOut(held), promise: nil)
    }

    /// The held-back events, older first, as one buffer (nil: none), no longer held.
    func encodePending() -> ByteBuffer? {
        guard let context else { return nil }
        let encoder = EventEncoder()
        scratch.removeAll(keepingCapacity: true)
        let location = pendingLocation
        let status = pendingStatus
        if let status, locationIsNewest { encoder.appendStatus(status.state, time: status.time, to: &scratch) }
        if let location { encoder.appendLocation(location, skipped: skippedSincePending, to: &scratch) }
        if let status, !locationIsNewest { encoder.appendStatus(status.state, time: status.time, to: &scratch) }
        pendingLocation = nil
        pendingStatus = nil
        // Without a location written, the count waits for the next one (it was lost when only a
        // status went out: after an accuracy change dropped the held location, for one).
        if location != nil { skippedSincePending = 0 }
        guard !scratch.isEmpty else { return nil }
        return context.channel.allocator.buffer(bytes: scratch)
    }

    // MARK: Peer credentials

    /// Linux `struct ucred` (glibc hides it behind _GNU_SOURCE, so it is not imported).
    struct UCred: Sendable {
        var pid: Int32 = 0
        var uid: UInt32 = 0
        var gid: UInt32 = 0
    }

    /// Linux `SO_PEERCRED`.
    static let soPeerCred: CInt = 17

    /// Linux `SO_PEERGROUPS` (4.13): the peer's supplementary groups, as `SO_PEERCRED` at connect.
    static let soPeerGroups: CInt = 59

    /// No room at all: `SO_PEERGROUPS` succeeds only for a peer without supplementary groups.
    struct NoGroups: Sendable {}

    static func peerCredentials(of channel: any Channel) -> PeerCredentials? {
        guard let provider = channel as? any SocketOptionProvider else { return nil }
        guard var credentials = option(UCred.self, soPeerCred, of: provider).map({
            PeerCredentials(pid: $0.pid, uid: $0.uid, gid: $0.gid)
        }) else { return nil }
        credentials.groups = peerGroups(of: provider)
        return credentials
    }

    /// The groups the kernel recorded at connect. Not read from /proc/PID/status after the
    /// accept: by then the process may be gone (it connected, left the socket to a child and
    /// exited), leaving no groups to match a rule that denies one, or its pid reused by a
    /// process with other groups (docs/privacy.md, "Identity"). Nil if the kernel does not say
    /// (before 4.13, or more than 1024 groups).
    static func peerGroups(of provider: any SocketOptionProvider) -> [UInt32]? {
        if option(NoGroups.self, soPeerGroups, of: provider) != nil { return [] }
        // Zero-filled past the groups, which the kernel keeps sorted: a 0 first is gid 0.
        guard let list = option(InlineArray<1024, UInt32>.self, soPeerGroups, of: provider) else { return nil }
        var groups: [UInt32] = list[0] == 0 ? [0] : []
        for i in list.indices where list[i] != 0 { groups.append(list[i]) }
        return groups
    }

    /// A socket option, read synchronously on the channel's loop; nil when the call fails.
    static func option<Value: Sendable>(_: Value.Type, _ name: CInt, of provider: any SocketOptionProvider) -> Value? {
        let future: EventLoopFuture<Value> = provider.unsafeGetSocketOption(
            level: NIOBSDSocket.OptionLevel(rawValue: SOL_SOCKET), name: NIOBSDSocket.Option(rawValue: name))
        // On the channel's loop the option is read synchronously, so the future is complete.
        var result: Value?
        future.assumeIsolated().whenSuccess { result = $0 }
        return result
    }
}

/// The server's open connections, and the loop's stall watch that runs while any is open;
/// confined to the hub's loop.
final class ConnectionRegistry: Sendable {
    private let box: NIOLoopBoundBox<[ObjectIdentifier: Connection]>
    private let watch: NIOLoopBoundBox<LoopStallWatch>
    /// Open connections per peer uid, and the pace of the warnings about refused ones.
    private let users: NIOLoopBoundBox<(open: [UInt32: Int], crowded: PacedWarnings)>
    /// The pace of the warnings about programs refused background monitoring, per uid.
    private let backgroundWarnings: NIOLoopBoundBox<PacedWarnings>
    /// Open connections per program.
    private let programs: NIOLoopBoundBox<[ProgramID: Int]>

    init(eventLoop: any EventLoop, configuration: SocketServer.Configuration) {
        box = NIOLoopBoundBox.makeBoxSendingValue([:], as: [ObjectIdentifier: Connection].self, eventLoop: eventLoop)
        watch = NIOLoopBoundBox.makeBoxSendingValue(
            LoopStallWatch(eventLoop: eventLoop, interval: configuration.stallBeat, now: configuration.now),
            as: LoopStallWatch.self, eventLoop: eventLoop)
        users = NIOLoopBoundBox.makeBoxSendingValue(([:], PacedWarnings(interval: Self.warningInterval)),
                                                    as: (open: [UInt32: Int], crowded: PacedWarnings).self, eventLoop: eventLoop)
        programs = NIOLoopBoundBox.makeBoxSendingValue([:], as: [ProgramID: Int].self, eventLoop: eventLoop)
        backgroundWarnings = NIOLoopBoundBox.makeBoxSendingValue(PacedWarnings(interval: Self.warningInterval), as: PacedWarnings.self,
                                                                 eventLoop: eventLoop)
    }

    /// Adds `c` (its peer read); returns how many connections its peer's user has open now,
    /// this one included (0 for a peer without credentials).
    func add(_ c: Connection) -> Int {
        box.value[ObjectIdentifier(c)] = c
        watch.value.retain()
        guard let uid = c.peer?.uid else { return 0 }
        users.value.open[uid, default: 0] += 1
        return users.value.open[uid]!
    }

    /// `c`'s program is known (a refused connection never gets this far).
    func identified(_ c: Connection) {
        programs.value[c.program, default: 0] += 1
        c.identified = true
    }

    /// Removes `c`; returns whether it was its program's last open connection.
    @discardableResult
    func remove(_ c: Connection) -> Bool {
        guard box.value.removeValue(forKey: ObjectIdentifier(c)) != nil else { return false }
        watch.value.release()
        var others = -1
        if c.identified {
            others = (programs.value[c.program] ?? 1) - 1
            programs.value[c.program] = others > 0 ? others : nil
        }
        if let uid = c.peer?.uid, let n = users.value.open[uid] {
            users.value.open[uid] = n > 1 ? n - 1 : nil
        }
        return others == 0
    }

    /// How often a user's refused connections may be warned about.
    static let warningInterval = TimeAmount.seconds(60)

    /// A connection of `uid` is refused at `now`: nil when the warning is held back, otherwise
    /// how many refusals were held back before it.
    func crowdingWarning(_ uid: UInt32, at now: NIODeadline) -> Int? { users.value.crowded.due(uid, at: now) }

    /// A program of `uid` is refused background monitoring at `now`: as `crowdingWarning`.
    func backgroundWarning(_ uid: UInt32, at now: NIODeadline) -> Int? { backgroundWarnings.value.due(uid, at: now) }

    var all: [Connection] { Array(box.value.values) }
    var stalls: LoopStallWatch { watch.value }
}
