import Glibc
import NIOCore

/// A connection's event lines, written past NIO's pipeline when nothing of the connection waits
/// in NIO: one `send(2)` from the loop, or, while the hub fans an input out, staged in its
/// `SendBatch` and sent with the input's other lines. What the socket does not take (it is full, or took part
/// of the line) and a line that fails go to the channel, behind which every later line waits
/// until NIO has written it all. So the bytes keep their order, and a slow reader fills the
/// kernel's buffer and then NIO's up to the high watermark as before (docs/protocol.md, "Slow
/// readers"); a failed write closes the connection as NIO closes it for any write.
///
/// Why: a line through the channel (pipeline, pending-writes bookkeeping, flush) costs more
/// than the rest of a fix's work for its subscriber (docs/benchmarks.md, "Fan-out", has the
/// counts).
///
/// Used on the channel's loop only. A class: writing through the channel can call back into the
/// connection (a staged line handed back, a close once a refusal is written), which then uses
/// its writer again.
final class SocketWriter {
    /// The channel's socket (`descriptor(of:)`) while the channel is active (`attach` to
    /// `detach`); -1: unknown or closed, every line goes through NIO.
    private var descriptor: CInt = -1
    /// Whether NIO may hold bytes of the connection: set by every write through the channel,
    /// cleared once NIO's buffer is seen empty.
    private var channelMayHoldBytes = false
    /// The hub's batch, and this connection's job in it.
    private let batch: SendBatch?
    private var staged: SendBatch.Staged?

    /// Whether lines can go straight to the socket (it was found).
    var knowsSocket: Bool { descriptor >= 0 }

    /// How a line went: all of it straight to the socket, part of it (the rest through the
    /// channel), all of it through the channel, or staged in the batch.
    enum Outcome: Equatable, Sendable { case direct, partial, channel, staged }

    /// Lines written while `batch` (the hub's) is open are staged in it.
    init(batch: SendBatch?) { self.batch = batch }

    /// Looks the channel's socket up (when it becomes active).
    func attach(to channel: any Channel) {
        descriptor = Self.descriptor(of: channel) ?? -1
    }

    /// The channel is closed (its `channelInactive`, which NIO calls right after it closes the
    /// socket): nothing more is sent to the number, which the kernel may give to another socket.
    func detach() {
        descriptor = -1
        if let batch, let staged { batch.socketClosed(staged) }
    }

    /// Writes and flushes `line` after everything written on the connection before it;
    /// `sender` (the connection) takes back what a batch could not send.
    @discardableResult
    func write(_ line: ByteBuffer, context: ChannelHandlerContext, sender: any BatchedSender) -> Outcome {
        write(EncodedLine(line), context: { context }, sender: sender)
    }

    /// The same for a line whose bytes were found once for all its subscribers (the hub's).
    /// `context` is asked for only when the line goes to the channel (the hub's line to a
    /// connection that keeps up retains none: ≈ 40 instructions per subscriber and fix); nil
    /// when the channel has closed since, and the line is dropped, as NIO drops a write to a
    /// closed channel.
    @discardableResult
    func write(_ line: EncodedLine, context: () -> ChannelHandlerContext?, sender: any BatchedSender) -> Outcome {
        if descriptor >= 0, channelIsEmpty(context) {
            if let job = batch?.stage(line, descriptor: descriptor, after: staged, sender: sender) {
                staged = job
                return .staged
            }
            let sent = send(descriptor, line.bytes.baseAddress, line.bytes.count, Self.flags)
            if sent == line.bytes.count { return .direct }
            if sent > 0 {
                var rest = line.buffer
                rest.moveReaderIndex(forwardBy: sent)
                return writeAndFlush(rest, context: context(), .partial)
            }
            // Full (EAGAIN) or failed (the peer is gone): NIO writes it when the socket takes it,
            // or fails the write and closes the channel as for any other.
        }
        return writeAndFlush(line.buffer, context: context(), .channel)
    }

    /// Whether NIO's channel is known to hold nothing of the connection, and so to be
    /// writable: NIO marks a channel not writable once its buffer passes the high watermark,
    /// and writable again once it falls below the low one (above 0). Asking the channel costs
    /// ≈ 90 instructions per subscriber and fix (docs/benchmarks.md, "Fan-out").
    var channelKnownEmpty: Bool { !channelMayHoldBytes }

    private func writeAndFlush(_ rest: ByteBuffer, context: ChannelHandlerContext?, _ outcome: Outcome) -> Outcome {
        channelMayHoldBytes = true
        context?.writeAndFlush(NIOAny(rest), promise: nil)
        return outcome
    }

    /// What follows a write through the channel: nothing (a flush comes later), a flush, or
    /// closing the connection once it is written.
    enum Then: Sendable { case nothing, flush, close }

    /// Writes `buffer` through the channel itself (a reply, a page of a backlog, a refusal):
    /// what the batch holds of the connection is sent first, and later lines wait behind it
    /// until NIO has written it. Every write of a connection through its channel is made here or
    /// by `write` and `handOver`, so none can overtake a line staged or sent before it.
    func writeThroughChannel(_ buffer: ByteBuffer, context: ChannelHandlerContext, then: Then = .nothing) {
        if let batch, batch.holds(staged) { batch.commit() }
        channelMayHoldBytes = true
        switch then {
        case .nothing: context.write(NIOAny(buffer), promise: nil)
        case .flush: context.writeAndFlush(NIOAny(buffer), promise: nil)
        case .close:
            context.writeAndFlush(NIOAny(buffer)).assumeIsolated().whenComplete { _ in context.close(promise: nil) }
        }
    }

    /// What a batch did not send of a staged line, queued in the channel (the batch flushes it
    /// once every rest is queued).
    func handOver(_ rest: ByteBuffer, context: ChannelHandlerContext) {
        channelMayHoldBytes = true
        context.write(NIOAny(rest), promise: nil)
    }

    /// Whether NIO holds nothing of the connection. Its channel is active: the descriptor is
    /// known (asking NIO again was ≈ 100 instructions per line).
    @inline(__always)
    private func channelIsEmpty(_ context: () -> ChannelHandlerContext?) -> Bool {
        !channelMayHoldBytes || channelFoundEmpty(context())
    }

    /// Asks NIO whether its buffer of the connection is empty (once it is, until the next write
    /// through the channel, it need not be asked).
    private func channelFoundEmpty(_ context: ChannelHandlerContext?) -> Bool {
        guard let context, (try? context.channel.syncOptions?.getOption(ChannelOptions.bufferedWritableBytes)) == 0 else { return false }
        channelMayHoldBytes = false
        return true
    }

    private static let flags = SendWork.flags

    /// Linux `SO_COOKIE` (4.12): a number the kernel gives each socket, unique while it runs.
    static let soCookie: CInt = 57

    /// The socket NIO's channel writes to. NIO keeps it to itself; its channels' descriptions
    /// name it (`SocketChannel { BaseSocket { fd=12 }, … }`). Taken only when the socket behind
    /// that number is the channel's (the same `SO_COOKIE` read through NIO and directly); nil
    /// otherwise, and the lines go through NIO.
    static func descriptor(of channel: any Channel) -> CInt? {
        guard let fd = number(after: "fd=", in: String(describing: channel)),
              let provider = channel as? any SocketOptionProvider,
              let cookie = Connection.option(UInt64.self, soCookie, of: provider) else { return nil }
        var own: UInt64 = 0
        var length = socklen_t(MemoryLayout<UInt64>.size)
        guard getsockopt(fd, SOL_SOCKET, soCookie, &own, &length) == 0, own == cookie else { return nil }
        return fd
    }

    /// The decimal number right after the first `key` in `text`.
    static func number(after key: String, in text: String) -> CInt? {
        let bytes = Array(text.utf8)
        let key = Array(key.utf8)
        guard bytes.count > key.count else { return nil }
        for start in 0...(bytes.count - key.count) where bytes[start..<start + key.count].elementsEqual(key) {
            var value: CInt = 0
            var end = start + key.count
            while end < bytes.count, bytes[end] >= 0x30, bytes[end] <= 0x39, value < CInt.max / 10 {
                value = value * 10 + CInt(bytes[end] - 0x30)
                end += 1
            }
            return end > start + key.count ? value : nil
        }
        return nil
    }
}
