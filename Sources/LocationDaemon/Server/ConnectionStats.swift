import LocationCore
import NIOCore

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
    /// Whether event lines go straight to its socket while NIO holds nothing of it (`SocketWriter`).
    public var writesToSocket: Bool
}

extension Connection {
    var stats: ConnectionStats {
        ConnectionStats(
            subscriber: id, peer: peer, isSubscribed: isSubscribed,
            isWritable: context?.channel.isWritable ?? false,
            bufferedBytes: (try? context?.channel.syncOptions?.getOption(ChannelOptions.bufferedWritableBytes)) ?? 0,
            skippedLocations: skippedTotal, hasPendingLocation: pendingLocation != nil,
            writesToSocket: writer.knowsSocket)
    }
}
