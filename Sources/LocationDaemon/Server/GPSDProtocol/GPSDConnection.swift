import Glibc
import GPSDProtocol
import LocationCore
import Logging
import NIOCore

/// One gpsd-protocol client: VERSION on connect, requests answered as gpsd 3.22 answers them,
/// and while its WATCH asks for JSON, a TPV for each fix its session allows — the published
/// cell as a mode 2 TPV for an approximate program, at the approximate rate; a precise one
/// also gets the source's SKY reports (satellites), an approximate one none. A program the
/// policy denies gets an ERROR naming the rule, and is closed. Confined to the hub's loop.
final class GPSDConnection: ChannelInboundHandler, HubSubscriber, BatchedSender {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    let id: SubscriberID
    private let hub: Hub
    private let configuration: GPSDServer.Configuration
    private let connections: GPSDConnections
    /// The daemon's logger; `logger` adds the connection's number when something is logged.
    private let baseLogger: Logger
    private var logger: Logger {
        var logger = baseLogger
        logger[metadataKey: "gpsd-connection"] = "\(id.rawValue)"
        return logger
    }
    private var context: ChannelHandlerContext?
    private var reader = GPSDRequestReader()
    private var bucket: TokenBucket

    /// Who the kernel says the peer is; nil when it could not say (the default rule applies).
    private(set) var identity: PeerIdentity?
    private(set) var program = ProgramID("unknown")
    private var rule: PolicyRule
    /// The session's grant; nil once the connection is refused.
    private var grant: Grant? {
        didSet { detail = grant.map { $0.accuracy == .precise ? .precise : .approximate } }
    }
    /// How much of a fix the grant shows, kept apart: looking at the grant copies its strings
    /// (≈ 130 instructions per connection and fix).
    private var detail: GPSDReport.Detail?
    private var watch = GPSDWatch()
    private var isSubscribed = false
    /// The last report sent, for `?POLL;`.
    private var lastReport: ByteBuffer?
    /// A report held back while the peer does not read (the newest only).
    private var pending: ByteBuffer?
    private var unwritableTimer: Scheduled<Void>?
    /// Reports go straight to the socket while NIO holds nothing of this connection.
    private let writer: SocketWriter

    init(hub: Hub, configuration: GPSDServer.Configuration, connections: GPSDConnections, logger: Logger) {
        self.id = hub.makeSubscriberID()
        self.writer = SocketWriter(batch: hub.sends)
        self.hub = hub
        self.configuration = configuration
        self.connections = connections
        self.baseLogger = logger
        self.rule = hub.policy.defaultRule
        self.bucket = TokenBucket(burst: configuration.floodBurst, rate: configuration.floodRate, now: configuration.clock.now())
    }

    func close() { context?.close(promise: nil) }

    func handOver(_ rest: ByteBuffer) {
        guard let context else { return }
        writer.handOver(rest, context: context)
    }

    func flushHandOver() { context?.flush() }

    // MARK: Channel events

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func channelActive(context: ChannelHandlerContext) {
        connections.add(self)
        writer.attach(to: context.channel)
        identity = LoopbackPeer.identity(remote: context.channel.remoteAddress, local: context.channel.localAddress,
                                         hint: connections.lastPeerPID)
        if let pid = identity?.pid { connections.lastPeerPID = pid }
        program = identity?.program ?? ProgramID("unknown")
        send(GPSDReport.version(rev: configuration.revision))
        decide(announce: false)
        logger.info("gpsd client connected", metadata: [
            "peer": "\(context.channel.remoteAddress.map { "\($0)" } ?? "?")", "uid": "\(identity.map { "\($0.uid)" } ?? "?")",
            "pid": "\(identity.map { "\($0.pid)" } ?? "?")", "exe": "\(identity?.executable ?? "?")", "rule": "\(rule.name)",
            "grant": "\(grant.map { "\($0.authorization.rawValue) \($0.accuracy.rawValue)" } ?? "denied")"])
        context.flush()
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        writer.detach()
        unwritableTimer?.cancel()
        unwritableTimer = nil
        unsubscribe()
        if grant != nil { hub.sessionClosed() }
        grant = nil
        connections.remove(self)
        self.context = nil
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("gpsd connection error", metadata: ["error": "\(error)"])
        context.close(promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard grant != nil else { return }
        let bytes = unwrapInboundIn(data)
        for item in reader.feed(bytes.readableBytesView) {
            guard bucket.take(now: configuration.clock.now()) else {
                return refuse("more than \(configuration.floodBurst) requests at once or \(configuration.floodRate) per second sustained; closing")
            }
            switch item {
            case .tooLong: return refuse("request longer than \(GPSDRequestReader.maxRequestBytes) bytes; closing")
            case .request(let request): answer(request)
            }
            guard grant != nil else { return }
        }
        context.flush()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            unwritableTimer?.cancel()
            unwritableTimer = nil
            if let held = pending {
                pending = nil
                writer.write(held, context: context, sender: self)
            }
        } else if unwritableTimer == nil {
            let timeout = configuration.unwritableTimeout
            unwritableTimer = context.eventLoop.assumeIsolated().scheduleTask(in: timeout) { [self] in
                logger.notice("closing a gpsd client that has not read for \(timeout)")
                self.context?.close(promise: nil)
            }
        }
        context.fireChannelWritabilityChanged()
    }

    // MARK: Requests

    private func answer(_ request: GPSDRequest) {
        switch request {
        case .version: send(GPSDReport.version(rev: configuration.revision))
        case .devices: send(GPSDReport.devices([device]))
        case .device: send(GPSDReport.device(device))
        case .poll:
            let sky = isPrecise ? connections.lastSky.map { Array($0.readableBytesView) } : nil
            send(GPSDReport.poll(at: Self.wallClock(), last: lastReport.map { Array($0.readableBytesView) }, sky: sky))
        case .invalid(let message): send(GPSDReport.error(message))
        case .watch(nil): send(GPSDReport.watch(watch))
        case .watch(let change?):
            let before = watch.streamsReports
            watch = change.applied(to: watch)
            if watch.streamsReports && !before { send(GPSDReport.devices([device])) }
            send(GPSDReport.watch(watch))
            if watch.streamsReports != before {
                if watch.streamsReports { subscribe() } else { unsubscribe() }
            }
        }
    }

    private var device: GPSDReport.Device { GPSDReport.Device(path: configuration.device, activated: nil) }

    // MARK: Policy

    /// Decides the connection's session from its rule (at connect, and at a reload): denied →
    /// ERROR naming the rule and close; a changed accuracy → subscribed again under it.
    private func decide(announce: Bool) {
        rule = identity.map { hub.policy.rule(for: $0) } ?? hub.policy.defaultRule
        switch Grant.decide(requested: .whenInUse, purpose: nil, rule: rule) {
        case .failure(.notAuthorized(let why)), .failure(.fullAccuracyDenied(let why)):
            refuse("locationd: \(why)")
        case .success(let new):
            let old = grant
            grant = new
            if old == nil { hub.sessionOpened() }
            if announce, isSubscribed, old?.accuracy != new.accuracy {
                unsubscribe()
                subscribe()
            }
        }
    }

    func applyPolicy() { if grant != nil { decide(announce: true) } }

    /// ERROR, then the connection is closed once it is written.
    private func refuse(_ message: String) {
        guard let context else { return }
        if grant != nil { hub.sessionClosed() }
        grant = nil
        unsubscribe()
        logger.notice("gpsd client refused: \(message)", metadata: ["rule": "\(rule.name)"])
        let line = ByteBuffer(bytes: GPSDReport.error(message))
        writer.writeThroughChannel(line, context: context, then: .close)
    }

    // MARK: Subscription

    private func subscribe() {
        guard let grant, !isSubscribed else { return }
        var options = SubscriptionOptions()
        options.accuracy = grant.accuracy
        isSubscribed = true
        hub.subscribe(id, options: options, subscriber: self)
    }

    private func unsubscribe() {
        guard isSubscribed else { return }
        isSubscribed = false
        hub.unsubscribe(id)
    }

    /// The daemon's own line is not what a gpsd client reads: both entries write the event's report.
    func deliver(_ event: Event, encoded _: ByteBuffer) {
        withUnsafePointer(to: event) { deliverReport(at: $0) }
    }

    func deliver(at event: UnsafePointer<Event>, line _: EncodedLine) {
        deliverReport(at: event)
    }

    /// A fix's TPV is the one line shared by every connection of the same detail, written
    /// straight to the socket (staged in the hub's batch) while NIO holds nothing of the
    /// connection, without asking the channel.
    private func deliverReport(at event: UnsafePointer<Event>) {
        guard let detail, context != nil else { return }
        let line: EncodedLine
        if let report = connections.report(at: event, detail: detail, device: configuration.device) {
            line = report
        } else if case .status(.noFix, let time) = event.pointee, detail == .precise {
            line = EncodedLine(ByteBuffer(bytes: GPSDReport.noFix(at: time, device: configuration.device)))
        } else {
            return
        }
        lastReport = line.buffer
        guard canWrite else { pending = line.buffer; return }
        writer.write(line, context: { [unowned(unsafe) self] in self.context }, sender: self)
    }

    /// Whether a report can be written now: NIO holds nothing of the connection (and so it is
    /// writable: NIO marks it not writable only above its high watermark), or it says writable.
    private var canWrite: Bool { writer.channelKnownEmpty || context?.channel.isWritable == true }

    private var isPrecise: Bool { detail == .precise }

    /// A `SKY` line: for a precise program whose watch streams reports. Not held back for a
    /// peer that does not read (the newest TPV is).
    func deliver(sky line: EncodedLine) {
        guard isPrecise, isSubscribed, context != nil, canWrite else { return }
        writer.write(line, context: { [unowned(unsafe) self] in self.context }, sender: self)
    }

    /// POLL's `time`: when it was answered.
    static func wallClock() -> Timestamp {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Timestamp(seconds: Int64(ts.tv_sec), nanoseconds: Int64(ts.tv_nsec))
    }

    private func send(_ line: [UInt8]) {
        guard let context else { return }
        writer.writeThroughChannel(ByteBuffer(bytes: line), context: context)
    }
}
