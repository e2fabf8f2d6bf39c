import LocationCore
import Logging
import NIOCore
import NMEA

/// One reader of the NMEA stream: RMC and GGA for each fix its session allows, written as a
/// receiver writes them. A reader that does not keep up loses fixes (the newest is held back),
/// as from a serial port. Confined to the hub's loop.
final class NMEAConnection: ChannelInboundHandler, HubSubscriber, BatchedSender {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    let id: SubscriberID
    private let hub: Hub
    private let connections: NIOLoopBoundBox<[ObjectIdentifier: NMEAConnection]>
    private var logger: Logger
    private var context: ChannelHandlerContext?
    private(set) var identity: PeerIdentity?
    private(set) var program = ProgramID("unknown")
    private var grant: Grant?
    private var pending: ByteBuffer?
    /// Sentences go straight to the socket while NIO holds nothing of this connection.
    private let socket: SocketWriter
    private let writer = NMEAWriter()

    init(hub: Hub, connections: NIOLoopBoundBox<[ObjectIdentifier: NMEAConnection]>, logger: Logger) {
        self.id = hub.makeSubscriberID()
        self.socket = SocketWriter(batch: hub.sends)
        self.hub = hub
        self.connections = connections
        self.logger = logger
        self.logger[metadataKey: "nmea-connection"] = "\(id.rawValue)"
    }

    func close() { context?.close(promise: nil) }

    func handOver(_ rest: ByteBuffer) {
        guard let context else { return }
        socket.handOver(rest, context: context)
    }

    func flushHandOver() { context?.flush() }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func channelActive(context: ChannelHandlerContext) {
        connections.value[ObjectIdentifier(self)] = self
        socket.attach(to: context.channel)
        identity = Connection.peerCredentials(of: context.channel).map(PeerIdentity.resolve)
        program = identity?.program ?? ProgramID("unknown")
        decide()
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        socket.detach()
        if grant != nil {
            hub.unsubscribe(id)
            hub.sessionClosed()
        }
        grant = nil
        connections.value.removeValue(forKey: ObjectIdentifier(self))
        self.context = nil
        context.fireChannelInactive()
    }

    /// Nothing is read from the stream's readers: what they send is discarded.
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {}

    func errorCaught(context: ChannelHandlerContext, error: any Error) { context.close(promise: nil) }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable, let held = pending {
            pending = nil
            socket.write(held, context: context, sender: self)
        }
        context.fireChannelWritabilityChanged()
    }

    func applyPolicy() { if grant != nil { decide() } }

    /// A when-in-use session under the peer's rule, subscribed for as long as it is open; a
    /// denied peer is logged and closed (NMEA has no way to say why).
    private func decide() {
        let rule = identity.map { hub.policy.rule(for: $0) } ?? hub.policy.defaultRule
        switch Grant.decide(requested: .whenInUse, purpose: nil, rule: rule) {
        case .failure(.notAuthorized(let why)), .failure(.fullAccuracyDenied(let why)):
            logger.notice("NMEA reader refused: \(why)", metadata: ["peer": "\(identity.map { "\($0)" } ?? "?")"])
            if grant != nil {
                hub.unsubscribe(id)
                hub.sessionClosed()
            }
            grant = nil
            close()
        case .success(let new):
            let old = grant
            grant = new
            if old == nil {
                hub.sessionOpened()
                logger.info("NMEA reader connected", metadata: ["peer": "\(identity.map { "\($0)" } ?? "?")", "rule": "\(rule.name)",
                                                                "accuracy": "\(new.accuracy.rawValue)"])
            }
            if old?.accuracy != new.accuracy {
                var options = SubscriptionOptions()
                options.accuracy = new.accuracy
                hub.subscribe(id, options: options, subscriber: self)
            }
        }
    }

    func deliver(_ event: Event, encoded: ByteBuffer) {
        guard grant != nil, let context, case .location(let fix) = event else { return }
        let text = writer.rmcAndGGA(fix, quality: NMEAWriter.quality(of: fix))
        guard !text.isEmpty else { return }
        let line = ByteBuffer(string: text)
        guard context.channel.isWritable else { pending = line; return }
        socket.write(line, context: context, sender: self)
    }
}
