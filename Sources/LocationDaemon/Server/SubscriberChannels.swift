import NIOCore
import NIOPosix

extension ServerBootstrap {
    /// A listener for subscribers (the Unix socket, gpsd's protocol, the NMEA stream): its
    /// connections run on the hub's loop, with the slow-reader watermarks, and a small first
    /// read buffer.
    ///
    /// NIO keeps each connection's receive buffer between reads, at the size of the last one
    /// asked for (2 KiB by default); subscribers send a few short requests and then only read,
    /// so at 10,000 of them the default would hold 20 MiB. The buffer still grows for a larger
    /// read (up to 64 KiB, a longest request line) and stays at that size for that connection.
    static func subscribers(on loop: any EventLoop, backlog: Int32, writeBufferLow: Int, writeBufferHigh: Int) -> ServerBootstrap {
        ServerBootstrap(group: loop, childGroup: loop)
            .serverChannelOption(ChannelOptions.backlog, value: backlog)
            .childChannelOption(ChannelOptions.writeBufferWaterMark, value: .init(low: writeBufferLow, high: writeBufferHigh))
            .childChannelOption(ChannelOptions.recvAllocator,
                                value: AdaptiveRecvByteBufferAllocator(minimum: 64, initial: firstReadBytes, maximum: 65536))
    }

    /// The first read buffer of a subscriber's connection: a session.start and a subscribe fit.
    static let firstReadBytes = 256
}
