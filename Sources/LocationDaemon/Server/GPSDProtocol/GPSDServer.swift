import Glibc
import GPSDProtocol
import LocationCore
import Logging
import NIOCore
import NIOPosix

/// gpsd's client protocol on TCP (`[gpsd_server] listen`), for programs written for gpsd:
/// cgps, gpspipe, Python's `gps` module, anything on libgps. Each connection is a subscriber of
/// the hub like a Unix-socket one, under the policy's rule for the program the kernel says it is
/// (`LoopbackPeer`); docs/compatibility.md.
public final class GPSDServer: Sendable {
    public struct Configuration: Sendable {
        public var host: String
        public var port: Int
        /// The `device` of reports and the path of the one DEVICE: where fixes come from.
        public var device: String
        /// `rev` of VERSION.
        public var revision: String = "locationd"
        /// Flood limit, as the Unix socket's: a token bucket of `floodBurst` requests refilled
        /// at `floodRate` per second; beyond it ERROR and the connection is closed.
        public var floodBurst: Int = 200
        public var floodRate: Double = 100
        /// Write buffer watermarks: above `high` reports are held back (the newest one kept).
        public var writeBufferLowWatermark: Int = 32 * 1024
        public var writeBufferHighWatermark: Int = 64 * 1024
        /// A connection that stays not writable this long is closed.
        public var unwritableTimeout: TimeAmount = .seconds(30)
        /// The clock of the flood limiter.
        public var clock = ShellClock.system

        public init(host: String, port: Int, device: String) { self.host = host; self.port = port; self.device = device }
    }

    public let hub: Hub
    public let configuration: Configuration
    private let channel: any Channel
    let connections: GPSDConnections
    private let logger: Logger

    private init(hub: Hub, configuration: Configuration, channel: any Channel, connections: GPSDConnections, logger: Logger) {
        self.hub = hub; self.configuration = configuration; self.channel = channel; self.connections = connections; self.logger = logger
    }

    /// The address the listener is bound to (its port when `port` was 0).
    public var localAddress: SocketAddress? { channel.localAddress }

    public static func start(hub: Hub, configuration: Configuration, logger: Logger) async throws -> GPSDServer {
        let connections = GPSDConnections(eventLoop: hub.eventLoop)
        let channel = try await ServerBootstrap.subscribers(on: hub.eventLoop, backlog: 128,
                                                            writeBufferLow: configuration.writeBufferLowWatermark,
                                                            writeBufferHigh: configuration.writeBufferHighWatermark)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(
                        GPSDConnection(hub: hub, configuration: configuration, connections: connections, logger: logger))
                }
            }
            .bind(host: configuration.host, port: configuration.port).get()
        logger.info("serving gpsd's protocol", metadata: ["listen": "\(channel.localAddress.map { "\($0)" } ?? "?")"])
        return GPSDServer(hub: hub, configuration: configuration, channel: channel, connections: connections, logger: logger)
    }

    /// Stops listening and closes every connection (which unsubscribes them).
    public func close() async {
        try? await channel.close()
        try? await hub.eventLoop.submit { self.connections.all.forEach { $0.close() } }.get()
        await hub.processed()
    }

    /// The hub's policy (a reload) for the open connections: each is decided again.
    public func applyPolicy() async throws {
        try await hub.eventLoop.submit {
            for c in self.connections.all.sorted(by: { $0.id < $1.id }) { c.applyPolicy() }
        }.get()
    }

    /// A sky view of the source's receiver, as a `SKY` to each connection that sees fixes
    /// precisely and watches. Called on the hub's loop (the gpsd source's).
    public func publish(_ sky: GPSDSky) {
        let open = connections.all
        guard !open.isEmpty else { return }
        let line = EncodedLine(connections.setSky(sky, device: configuration.device))
        // In one batch, as the hub's fan-out of an input: split over the loop and the worker.
        let sends = hub.sends
        sends.open()
        defer { sends.close() }
        for c in open { c.deliver(sky: line) }
    }

    /// The connections and what each has been sent (tests, diagnostics).
    public func connectionCount() async throws -> Int {
        try await hub.eventLoop.submit { self.connections.all.count }.get()
    }
}

/// The listener's open connections, and what they share: the last peer process found (most
/// programs open their connections one after another) and the last report of each detail
/// (every connection of a detail gets the same fix in one hub input). Confined to the hub's loop.
final class GPSDConnections: Sendable {
    private let box: NIOLoopBoundBox<State>

    struct State {
        var open: [ObjectIdentifier: GPSDConnection] = [:]
        var lastPeerPID: Int32?
        /// The last TPV encoded for precise and for approximate connections: one input's
        /// connections of both kinds alternate, and each kind keeps its own line.
        var precise = SharedReport()
        var approximate = SharedReport()
        /// The last sky view's `SKY` line, for `?POLL;`.
        var lastSky: ByteBuffer?
    }

    /// A location event and its TPV line.
    struct SharedReport {
        var event: Event = .status(.disconnected, time: nil)
        var line: EncodedLine?
    }

    init(eventLoop: any EventLoop) {
        box = NIOLoopBoundBox.makeBoxSendingValue(State(), as: State.self, eventLoop: eventLoop)
    }

    func add(_ c: GPSDConnection) { box.value.open[ObjectIdentifier(c)] = c }
    func remove(_ c: GPSDConnection) { box.value.open.removeValue(forKey: ObjectIdentifier(c)) }
    var all: [GPSDConnection] { Array(box.value.open.values) }

    var lastPeerPID: Int32? {
        get { box.value.lastPeerPID }
        set { box.value.lastPeerPID = newValue }
    }

    /// The sky view's `SKY` line, kept as the last one.
    func setSky(_ sky: GPSDSky, device: String) -> ByteBuffer {
        let line = ByteBuffer(bytes: GPSDReport.sky(sky, device: device))
        box.value.lastSky = line
        return line
    }

    var lastSky: ByteBuffer? { box.value.lastSky }

    /// The TPV line of the location event at `event` for `detail` (nil: not a location),
    /// encoded once for every connection of that detail that receives it, with where its bytes
    /// are (`EncodedLine`: found once, not per connection).
    func report(at event: UnsafePointer<Event>, detail: GPSDReport.Detail, device: String) -> EncodedLine? {
        switch detail {
        case .precise: Self.report(at: event, in: &box.value.precise, detail: detail, device: device)
        case .approximate: Self.report(at: event, in: &box.value.approximate, detail: detail, device: device)
        }
    }

    /// The event held with the line is found with a `memcmp` of its bytes (every connection gets
    /// a copy of the same value) instead of `==` field by field (≈ 440 instructions per
    /// connection and fix); an equal event with other bytes is found by `==`.
    private static func report(at event: UnsafePointer<Event>, in held: inout SharedReport,
                               detail: GPSDReport.Detail, device: String) -> EncodedLine? {
        guard case .location = event.pointee else { return nil }
        if let line = held.line, withUnsafePointer(to: &held.event, { memcmp($0, event, MemoryLayout<Event>.size) == 0 }) {
            return line
        }
        guard case .location(let fix) = event.pointee else { return nil }
        if let line = held.line, case .location(let last) = held.event, last == fix { return line }
        let line = EncodedLine(ByteBuffer(bytes: GPSDReport.tpv(fix, device: device, detail: detail)))
        held = SharedReport(event: event.pointee, line: line)
        return line
    }
}
