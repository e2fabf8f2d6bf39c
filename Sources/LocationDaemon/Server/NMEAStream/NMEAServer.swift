import Glibc
import LocationCore
import Logging
import NIOCore
import NIOPosix

/// A Unix stream socket writing RMC and GGA for every fix (`[nmea_server] socket`): GeoClue's
/// `[network-nmea]` source reads it. Each connecting process is a program under the policy like
/// any other (SO_PEERCRED): approximate ones get the published cell, denied ones are closed.
/// Nothing is read from the peer. docs/compatibility.md.
public final class NMEAServer: Sendable {
    public struct Configuration: Sendable {
        public var path: String
        public var socketMode: mode_t = 0o660
        public var writeBufferLowWatermark: Int = 16 * 1024
        public var writeBufferHighWatermark: Int = 32 * 1024
        public init(path: String) { self.path = path }
    }

    public let hub: Hub
    public let configuration: Configuration
    private let channel: any Channel
    private let ownFile: FileIdentity
    let connections: NIOLoopBoundBox<[ObjectIdentifier: NMEAConnection]>
    private let logger: Logger

    private init(hub: Hub, configuration: Configuration, channel: any Channel, ownFile: FileIdentity,
                 connections: NIOLoopBoundBox<[ObjectIdentifier: NMEAConnection]>, logger: Logger) {
        self.hub = hub; self.configuration = configuration; self.channel = channel; self.ownFile = ownFile
        self.connections = connections; self.logger = logger
    }

    /// Binds `configuration.path` (as the main socket's path is bound: its directory made, a
    /// stale socket file replaced, a live one refused) and starts accepting.
    public static func start(hub: Hub, configuration: Configuration, logger: Logger) async throws -> NMEAServer {
        try SocketServer.prepareSocketPath(configuration.path)
        let descriptor = try SocketServer.bindSocket(configuration.path, mode: configuration.socketMode)
        guard let ownFile = FileIdentity(path: configuration.path) else {
            let e = errno
            Glibc.close(descriptor)
            throw SocketServerError.system("stat \(configuration.path)", errno: e)
        }
        let connections = NIOLoopBoundBox.makeBoxSendingValue([:], as: [ObjectIdentifier: NMEAConnection].self, eventLoop: hub.eventLoop)
        let channel: any Channel
        do {
            channel = try await ServerBootstrap.subscribers(on: hub.eventLoop, backlog: 32,
                                                            writeBufferLow: configuration.writeBufferLowWatermark,
                                                            writeBufferHigh: configuration.writeBufferHighWatermark)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(NMEAConnection(hub: hub, connections: connections, logger: logger))
                    }
                }
                .withBoundSocket(descriptor).get()
        } catch {
            if FileIdentity(path: configuration.path) == ownFile { unlink(configuration.path) }
            throw error
        }
        logger.info("serving NMEA", metadata: ["path": "\(configuration.path)"])
        return NMEAServer(hub: hub, configuration: configuration, channel: channel, ownFile: ownFile, connections: connections, logger: logger)
    }

    /// Stops listening, closes every connection and removes the socket file it made.
    public func close() async {
        try? await channel.close()
        try? await hub.eventLoop.submit { self.connections.value.values.forEach { $0.close() } }.get()
        await hub.processed()
        if FileIdentity(path: configuration.path) == ownFile { unlink(configuration.path) }
    }

    /// The hub's policy (a reload) for the open connections.
    public func applyPolicy() async throws {
        try await hub.eventLoop.submit { self.connections.value.values.forEach { $0.applyPolicy() } }.get()
    }
}
