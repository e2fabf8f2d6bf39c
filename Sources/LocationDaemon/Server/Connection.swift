import Glibc
import LocationCore
import LocationProtocol
import Logging
import NIOCore

/// One client connection: line framing, requests → replies, the subscription, and the bounded
/// outbox for slow readers (docs/protocol.md, "Slow readers"). Lives on the hub's loop. Its
/// state is here; each part's code is in a `Connection+Part.swift` of its own.
final class Connection: ChannelInboundHandler, DurableSubscriber, BatchedSender {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    let hub: Hub
    let configuration: SocketServer.Configuration
    let registry: ConnectionRegistry
    /// The daemon's logger; `logger` adds this connection's number and peer to it when something
    /// is logged (kept in every connection, the metadata would cost ≈ 0.3 KiB each).
    private let baseLogger: Logger
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
    /// Event lines go straight to the socket while NIO holds nothing of this connection.
    let writer: SocketWriter

    // Slow-reader outbox: at most one location and one status event held back.
    var pendingLocation: Fix? {
        didSet { holdsLocation = pendingLocation != nil }
    }
    /// Whether `pendingLocation` holds one (read per event; the fix itself is not copied out).
    private(set) var holdsLocation = false
    var pendingStatus: (state: SourceState, time: Timestamp?)?
    var locationIsNewest = false
    var skippedSincePending = 0
    var skippedTotal = 0
    var unwritableTimer: Scheduled<Void>?
    /// The `always` program's backlog being written, a page at a time while the connection is
    /// writable: the last sequence number written, and the last one it takes (what was queued
    /// when it began; later ones are the next subscribe's). Written all at once, a program's
    /// 10,000 queued events would sit in memory for each of its connections that does not read
    /// (40 such connections: 166 MiB).
    var backlog: (after: UInt64, through: UInt64)?
    /// A durable subscription (docs/protocol.md, "Durable subscriptions"): the last sequence
    /// number written from the program's queue, whose newer events follow as they are queued
    /// (`durableQueueGrew`); nil when the subscription is not durable.
    var durableWritten: UInt64?
    /// Events that came while the backlog was being written, in order, to follow it (region,
    /// visit and significant-change events, and held-back ones written before them).
    var behindBacklog: [ByteBuffer] = []

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
    /// The options the client asked for (the session's accuracy is applied on top).
    var requestedOptions = SubscriptionOptions()

    init(hub: Hub, configuration: SocketServer.Configuration, registry: ConnectionRegistry, logger: Logger) {
        self.hub = hub
        self.configuration = configuration
        self.registry = registry
        self.id = hub.makeSubscriberID()
        self.writer = SocketWriter(batch: hub.sends)
        self.baseLogger = logger
        self.input = ByteBuffer()
        self.bucket = TokenBucket(burst: configuration.floodBurst, rate: configuration.floodRate, now: configuration.clock.now())
    }

    var logger: Logger {
        var logger = baseLogger
        logger[metadataKey: "connection"] = "\(id.rawValue)"
        if let peer { logger[metadataKey: "peer"] = "\(peer)" }
        return logger
    }

    func close() { context?.close(promise: nil) }

    // MARK: BatchedSender

    func handOver(_ rest: ByteBuffer) {
        guard let context else { return }
        writer.handOver(rest, context: context)
    }

    func flushHandOver() { context?.flush() }

    // MARK: Channel events

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func channelActive(context: ChannelHandlerContext) {
        peer = Self.peerCredentials(of: context.channel)
        writer.attach(to: context.channel)
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
        writer.detach()
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

    /// Replies are always written (no more are made while the connection is not writable: see
    /// `handleInput`); only events are held back for slow readers.
    func send(_ message: ServerMessage, flush: Bool) {
        guard let context, let buffer = registry.encoded(context.channel.allocator, message.append) else { return }
        writer.writeThroughChannel(buffer, context: context, then: flush ? .flush : .nothing)
    }

    /// The peer's user is at `[socket] max_connections_per_user`: an error instead of the hello,
    /// and the connection closed. Logged at most once a minute per user, with the count of those
    /// refused meanwhile (`PacedWarnings`): each refusal logged would be a way to flood the
    /// journal.
    private func refuseCrowded(uid: UInt32, open: Int, context: ChannelHandlerContext) {
        closing = true
        let limit = configuration.maxConnectionsPerUser
        if let held = registry.crowdingWarning(uid, at: configuration.clock.now()) {
            let since = held > 0 ? "; \(held) more refused since the last such warning" : ""
            logger.warning("refusing connections of uid \(uid): it has \(open) open, the most [socket] max_connections_per_user allows; raise it if that user's programs need more (warned at most once a minute per user\(since))")
        }
        let error = ProtocolError(.tooManyConnections, "uid \(uid) has \(open) connections open, the most this daemon allows one user ([socket] max_connections_per_user = \(limit)); close some")
        let buffer = registry.encoded(context.channel.allocator, ServerMessage.error(error).append) ?? ByteBuffer()
        writer.writeThroughChannel(buffer, context: context, then: .close)
    }

    /// Sends a final error and closes once it is written.
    func abort(_ error: ProtocolError) {
        guard let context, !closing else { return }
        closing = true
        logger.info("closing an abusive connection", metadata: ["code": "\(error.code.rawValue)"])
        let buffer = registry.encoded(context.channel.allocator, ServerMessage.error(error).append) ?? ByteBuffer()
        writer.writeThroughChannel(buffer, context: context, then: .close)
    }
}
