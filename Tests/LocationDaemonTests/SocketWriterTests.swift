import Foundation
import Glibc
import LocationClient
import LocationCore
import LocationProtocol
import NIOCore
import NIOPosix
import TestSupport
import Synchronization
import Testing
@testable import LocationDaemon

/// Event lines written straight to the socket while NIO holds nothing of the connection, and
/// through the channel otherwise (`SocketWriter`; docs/protocol.md, "Slow readers").
@Suite(.serialized, .timeLimit(.minutes(5))) struct SocketWriterTests {
    /// A real socket pair whose writing end has the kernel's smallest send buffer and a reader
    /// that reads nothing until everything is written: the socket fills, lines are taken in part
    /// and handed to NIO, and the bytes still arrive whole and in order. Then, the socket read
    /// empty, lines go straight to it again, also after a write through the channel.
    @Test func aFullSocketHandsTheRestToTheChannelInOrder() async throws {
        var pair: [CInt] = [-1, -1]
        try #require(socketpair(AF_UNIX, CInt(SOCK_STREAM.rawValue), 0, &pair) == 0)
        defer { close(pair[1]) }
        var smallest: CInt = 1  // raised to the kernel's minimum, ≈ 4.5 KiB
        setsockopt(pair[0], SOL_SOCKET, SO_SNDBUF, &smallest, socklen_t(MemoryLayout<CInt>.size))
        var timeout = timeval(tv_sec: 20, tv_usec: 0)  // a hung test fails instead of hanging
        setsockopt(pair[1], SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        do {
            try await writeFirstFullThenDrained(pair, group: group)
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
        try await group.shutdownGracefully()
    }

    private func writeFirstFullThenDrained(_ pair: [CInt], group: MultiThreadedEventLoopGroup) async throws {
        let channel = try await ClientBootstrap(group: group)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(LineWriter()) }
            }
            .withConnectedSocket(pair[0]).get()

        // Short lines and lines longer than half the send buffer (written in more than one piece).
        let first = (0..<300).map { i in "\(i):" + String(repeating: "x", count: i % 3 == 1 ? 9_000 + i : 40 + i % 50) + "\n" }
        let reader = pair[1]
        let (outcomes, early) = try await channel.eventLoop.submit {
            let writer = try channel.pipeline.syncOperations.handler(type: LineWriter.self)
            var outcomes = writer.write(Array(first[..<150]), throughChannel: [])
            // Room in the socket again while NIO, not having run since, still holds bytes: the
            // next lines must wait behind those, not take the room.
            var early = [UInt8](repeating: 0, count: 16_384)
            let n = early.withUnsafeMutableBytes { recv(reader, $0.baseAddress, $0.count, CInt(MSG_DONTWAIT)) }
            early.removeSubrange(max(n, 0)...)
            outcomes += writer.write(Array(first[150...]), throughChannel: [])
            return (outcomes, early)
        }.get()
        #expect(outcomes.first == .direct)
        #expect(outcomes.contains(.partial))
        #expect(!early.isEmpty)
        // Once NIO holds part of the connection, every later line waits behind it.
        let handedOver = try #require(outcomes.firstIndex { $0 != .direct })
        #expect(outcomes[(handedOver + 1)...].allSatisfy { $0 == .channel })
        let all = Array(first.joined().utf8)
        #expect(early + read(reader, count: all.count - early.count) == all)

        // Drained: straight to the socket again; a write through the channel between lines
        // (a reply) keeps its place. (A buffer that holds them all: this part is not about a
        // full socket.)
        var roomy: CInt = 65_536
        setsockopt(pair[0], SOL_SOCKET, SO_SNDBUF, &roomy, socklen_t(MemoryLayout<CInt>.size))
        let second = (0..<20).map { "again \($0)\n" }
        let again = try await channel.eventLoop.submit {
            try channel.pipeline.syncOperations.handler(type: LineWriter.self).write(second, throughChannel: [5])
        }.get()
        #expect(again.enumerated().allSatisfy { $0.offset == 5 ? $0.element == .channel : $0.element == .direct })
        #expect(read(pair[1], count: second.joined().utf8.count) == Array(second.joined().utf8))
        try await channel.close()
    }

    /// A connection's bytes are written by its `SocketWriter` only (`write`, `handOver`,
    /// `writeThroughChannel`): a reply or backlog page written to the channel past it would
    /// overtake the connection's staged lines and let later lines overtake it. No other file of
    /// the server writes to a channel.
    @Test func onlyTheSocketWriterWritesToAConnection() throws {
        let server = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources/LocationDaemon/Server")
        let files = try #require(FileManager.default.enumerator(at: server, includingPropertiesForKeys: nil))
            .compactMap { $0 as? URL }.filter { $0.pathExtension == "swift" }
        #expect(files.count > 10)
        let write = /(context|channel)\??\.(write|writeAndFlush)\(/
        for file in files where file.lastPathComponent != "SocketWriter.swift" {
            let text = try String(contentsOf: file, encoding: .utf8)
            // Its channel closed, a writer sends nothing more to the socket's number.
            if text.contains("SocketWriter(batch:") {
                #expect(text.contains(/func channelInactive\(context: ChannelHandlerContext\) \{\n\s*\w+\.detach\(\)/),
                        "\(file.lastPathComponent) does not detach its SocketWriter first thing in channelInactive")
            }
            for (n, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated()
            where line.contains(write) {
                Issue.record("\(file.lastPathComponent):\(n + 1) writes to the channel past its SocketWriter: \(line)")
            }
        }
    }

    /// The hub's line for a connection whose channel closed during the delivery (a held-back
    /// event's write failed and closed it: its context is gone) is dropped, as NIO drops a
    /// write to a closed channel, and nothing is handed back.
    @Test func aLineAfterTheChannelClosedIsDropped() {
        final class Closed: BatchedSender {
            func handOver(_ rest: ByteBuffer) { Issue.record("a rest was handed back to a closed connection") }
            func flushHandOver() {}
        }
        let writer = SocketWriter(batch: nil)  // never attached: its socket is unknown
        var asked = 0
        let outcome = writer.write(EncodedLine(ByteBuffer(string: "late\n")), context: { asked += 1; return nil }, sender: Closed())
        #expect(outcome == .channel)
        #expect(asked == 1)
    }

    @Test func theDescriptorIsReadFromTheWholeNumber() {
        #expect(SocketWriter.number(after: "fd=", in: "SocketChannel { BaseSocket { fd=12 }, active = true }") == 12)
        #expect(SocketWriter.number(after: "fd=", in: "SocketChannel { BaseSocket { fd= }") == nil)
        #expect(SocketWriter.number(after: "fd=", in: "SocketChannel") == nil)
    }

    /// Three subscribers that read get every location, in order, none skipped, while one that
    /// does not read fills its socket and NIO's buffer and then has locations dropped; once it
    /// reads, what it got and what it was told it missed add up to every fix.
    @Test func readersGetEveryLineWhileANonReaderSkips() async throws {
        let h = try await ServerHarness.start()
        defer { h.stopIfRunning() }
        let silent = RawSocket(path: h.path)
        silent.send("{\"type\":\"session.start\"}\n{\"type\":\"subscribe\"}\n")
        var readers: [AsyncThrowingStream<ServerMessage, any Error>.Iterator] = []
        var clients: [LocationClient] = []
        for _ in 0..<3 {
            let client = try await LocationClient.connect(path: h.path)
            try await client.startSession(.always)
            try await client.subscribe()
            readers.append(client.messages.makeAsyncIterator())
            clients.append(client)
        }
        try #require(try await waitUntil(timeout: 20) { try await h.hub.snapshot().subscriberCount == 4 }, "the silent client never subscribed")
        let stats = try await h.server.connectionStats()
        #expect(stats.count == 4 && stats.allSatisfy(\.writesToSocket))

        let count = 5_000
        let batch = 100
        for start in stride(from: 0, to: count, by: batch) {
            for i in start..<start + batch { h.hub.submit(.fix(testFix(i))) }
            for r in readers.indices {
                var i = start
                while i < start + batch {
                    let message = try await readers[r].expectNext()
                    guard case .location(let fix, let skipped) = message else { continue }
                    #expect(fix.time == testFix(i).time && skipped == 0)
                    if fix.time != testFix(i).time { return }
                    i += 1
                }
            }
        }
        await h.hub.processed()
        let silentStats = try #require(try await h.server.connectionStats().first { $0.skippedLocations > 0 })
        #expect(silentStats.hasPendingLocation)
        #expect(silentStats.bufferedBytes <= h.server.configuration.writeBufferHighWatermark + 1024)

        var received = 0
        var skippedTotal = 0
        var previous: Timestamp?
        let last = testFix(count - 1).time
        while let line = silent.readLine() {
            guard case .location(let fix, let skipped) = try ServerMessage.decode(line) else { continue }
            if let previous { #expect(fix.time > previous) }
            previous = fix.time
            received += 1
            skippedTotal += skipped
            if fix.time == last { break }
        }
        #expect(previous == last)
        #expect(skippedTotal == silentStats.skippedLocations)
        #expect(received + skippedTotal == count)
        for client in clients { client.close() }
        await h.stop()
    }

    /// A batch of 100 connections (enough for the worker thread to send half), three lines
    /// each, a third of them with the smallest send buffer and long lines, two connections (one
    /// of them small) also answering a request in the middle (the small one's staged line is
    /// sent and handed back to it as it writes the reply): what the sockets do not take is handed back to NIO,
    /// the next batch leaves those to NIO, and every connection receives its bytes in order.
    @Test func aBatchKeepsEachConnectionsBytesInOrder() async throws {
        let connections = 100
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let loop = group.next()
        var readers: [CInt] = []
        defer { readers.forEach { close($0) } }
        do {
            let batch = try await loop.submit { NIOLoopBound(SendBatch(), eventLoop: loop) }.get()
            var channels: [any Channel] = []
            for c in 0..<connections {
                var pair: [CInt] = [-1, -1]
                try #require(socketpair(AF_UNIX, CInt(SOCK_STREAM.rawValue), 0, &pair) == 0)
                readers.append(pair[1])
                var timeout = timeval(tv_sec: 20, tv_usec: 0)
                setsockopt(pair[1], SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
                if c % 3 == 0 {
                    var smallest: CInt = 1
                    setsockopt(pair[0], SOL_SOCKET, SO_SNDBUF, &smallest, socklen_t(MemoryLayout<CInt>.size))
                }
                channels.append(try await ClientBootstrap(group: loop)
                    .channelInitializer { channel in
                        channel.eventLoop.makeCompletedFuture {
                            try channel.pipeline.syncOperations.addHandler(LineWriter(batch: batch.value))
                        }
                    }
                    .withConnectedSocket(pair[0]).get())
            }
            @Sendable func line(_ c: Int, _ round: Int) -> String {
                "\(c) \(round) " + String(repeating: "y", count: c % 3 == 0 ? 5_000 + round : 30 + c) + "\n"
            }
            let all = channels
            let (first, held) = try await loop.submit {
                let writers = try all.map { try $0.pipeline.syncOperations.handler(type: LineWriter.self) }
                var outcomes: [SocketWriter.Outcome] = []
                batch.value.open()
                for round in 0..<3 {
                    for (c, writer) in writers.enumerated() {
                        outcomes += writer.write([line(c, round)], throughChannel: (c == 6 || c == 7) && round == 1 ? [0] : [])
                    }
                }
                batch.value.close()
                return (outcomes, writers.map(\.buffered))
            }.get()
            #expect(first.contains(.staged))
            // The small sockets took part of their three lines; NIO holds the rest.
            #expect(held.enumerated().filter { $0.offset % 3 == 0 }.allSatisfy { $0.element > 0 })
            let second = try await loop.submit {
                let writers = try all.map { try $0.pipeline.syncOperations.handler(type: LineWriter.self) }
                batch.value.open()
                let outcomes = writers.enumerated().flatMap { c, writer in writer.write([line(c, 3)], throughChannel: []) }
                batch.value.close()
                return outcomes
            }.get()
            #expect(second.enumerated().allSatisfy { $0.offset % 3 == 0 ? $0.element == .channel : $0.element == .staged })
            for c in 0..<connections {
                let expected = Array((0...3).map { line(c, $0) }.joined().utf8)
                #expect(read(readers[c], count: expected.count) == expected, "connection \(c)")
            }
            for channel in channels { try await channel.close() }
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
        try await group.shutdownGracefully()
    }

    /// A connection whose peer is gone fails its flush and closes, and what its close runs
    /// writes to a connection after it in the same batch (as an unsubscribe's durable notice
    /// writes a durable subscriber's backlog): that connection's line, which its small socket
    /// took in part, still arrives whole, and the later line after it.
    @Test func aCloseDuringTheHandOversKeepsALaterConnectionsLineWhole() async throws {
        var x: [CInt] = [-1, -1], y: [CInt] = [-1, -1]
        try #require(socketpair(AF_UNIX, CInt(SOCK_STREAM.rawValue), 0, &x) == 0)
        try #require(socketpair(AF_UNIX, CInt(SOCK_STREAM.rawValue), 0, &y) == 0)
        defer { close(y[1]) }
        var smallest: CInt = 1
        setsockopt(y[0], SOL_SOCKET, SO_SNDBUF, &smallest, socklen_t(MemoryLayout<CInt>.size))
        var timeout = timeval(tv_sec: 20, tv_usec: 0)
        setsockopt(y[1], SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let loop = group.next()
        do {
            let batch = try await loop.submit { NIOLoopBound(SendBatch(), eventLoop: loop) }.get()
            let cx = try await Self.connect(x[0], batch: batch, on: loop)
            let cy = try await Self.connect(y[0], batch: batch, on: loop)
            let long = String(repeating: "A", count: 20_000) + "\n", later = "later\n"
            let xPeer = x[1]
            try await loop.submit {
                let wx = try cx.pipeline.syncOperations.handler(type: LineWriter.self)
                let wy = try cy.pipeline.syncOperations.handler(type: LineWriter.self)
                wx.onClose = { _ = wy.write([later], throughChannel: []) }
                batch.value.open()
                _ = wx.write(["x\n"], throughChannel: [])
                _ = wy.write([long], throughChannel: [])
                close(xPeer)  // x's send fails (EPIPE), so does NIO's write of it, which closes x
                batch.value.close()
            }.get()
            let expected = Array((long + later).utf8), got = read(y[1], count: expected.count)
            let whole = got == expected  // compared apart: the 20 KB arrays would fill the report
            let at = (0..<max(0, got.count - 4)).first { got[$0..<$0 + 5].elementsEqual("later".utf8) } ?? -1
            #expect(whole, "y's line split or overtaken: \"later\" at byte \(at) of \(got.count)")
            try await cy.close()
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
        try await group.shutdownGracefully()
    }

    /// A connection closed with a line staged, its descriptor's number taken by a new socket
    /// before the batch sends: nothing goes to the new socket.
    @Test func aConnectionClosedWhileStagedSendsNothingToItsNumberReused() async throws {
        var x: [CInt] = [-1, -1]
        try #require(socketpair(AF_UNIX, CInt(SOCK_STREAM.rawValue), 0, &x) == 0)
        defer { close(x[1]) }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let loop = group.next()
        do {
            let batch = try await loop.submit { NIOLoopBound(SendBatch(), eventLoop: loop) }.get()
            let cx = try await Self.connect(x[0], batch: batch, on: loop)
            let number = x[0]
            let (reused, peer) = try await loop.submit { () -> (Bool, CInt) in
                let wx = try cx.pipeline.syncOperations.handler(type: LineWriter.self)
                batch.value.open()
                _ = wx.write(["for x only\n"], throughChannel: [])
                cx.close(promise: nil)  // on the loop: the descriptor is closed now
                var other: [CInt] = [-1, -1]
                socketpair(AF_UNIX, CInt(SOCK_STREAM.rawValue), 0, &other)
                batch.value.close()
                // The end that took x's number, kept open while the batch sent; its peer reads.
                let (taken, peer) = other[0] == number ? (other[0], other[1]) : (other[1], other[0])
                close(taken)
                return (other.contains(number), peer)
            }.get()
            defer { close(peer) }
            try #require(reused, "the closed descriptor's number was not reused")
            var byte: UInt8 = 0
            #expect(recv(peer, &byte, 1, CInt(MSG_DONTWAIT)) == 0, "bytes for the closed connection reached its number's new socket")
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
        try await group.shutdownGracefully()
    }

    /// A thread allowed one CPU counts one, so the daemon under `CPUAffinity=` of one CPU (or a
    /// one-CPU cpuset) starts no send worker; the shipped unit lets it read its mask.
    @Test func theSendWorkerCountsTheCPUsTheProcessMayUse() throws {
        // Unrestricted: as many as nproc (sched_getaffinity) counts.
        let nproc = try runToExit(URL(fileURLWithPath: "/usr/bin/nproc"), []).out.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(SendWorker.usableCPUs() == Int(nproc))
        // A thread restricted to CPU 0 (sched_setaffinity, which Glibc does not export to Swift).
        typealias SetAffinity = @convention(c) (pid_t, Int, UnsafeRawPointer) -> CInt
        let setAffinity = unsafeBitCast(try #require(dlsym(UnsafeMutableRawPointer(bitPattern: 0), "sched_setaffinity")), to: SetAffinity.self)
        let counted = Mutex<Int?>(nil)
        let done = DispatchSemaphore(value: 0)
        Thread {
            var one = [UInt8](repeating: 0, count: 128)  // a cpu_set_t
            one[0] = 1
            if setAffinity(0, one.count, one) == 0 { counted.withLock { $0 = SendWorker.usableCPUs() } }
            done.signal()
        }.start()
        done.wait()
        #expect(counted.withLock { $0 } == 1)

        // It reads /proc/thread-self/status: the shipped unit's ProcSubset=pid keeps a process's
        // own entries, and nothing in it makes /proc inaccessible.
        let unit = try String(contentsOf: ConfigTests.repo.appendingPathComponent("systemd/locationd.service"), encoding: .utf8)
        let settings = unit.split(separator: "\n").filter { !$0.hasPrefix("#") }
        #expect(settings.filter { $0.hasPrefix("ProcSubset=") }.allSatisfy { $0 == "ProcSubset=pid" || $0 == "ProcSubset=all" })
        #expect(!settings.contains { ($0.hasPrefix("InaccessiblePaths=") || $0.hasPrefix("TemporaryFileSystem=")) && $0.contains("/proc") })
    }

    private static func connect(_ fd: CInt, batch: NIOLoopBound<SendBatch>, on loop: any EventLoop) async throws -> any Channel {
        try await ClientBootstrap(group: loop)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(LineWriter(batch: batch.value)) }
            }
            .withConnectedSocket(fd).get()
    }

    /// Reads exactly `count` bytes (fewer at end of stream or after the 20 s timeout).
    private func read(_ fd: CInt, count: Int) -> [UInt8] {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while bytes.count < count {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress!, min($0.count, count - bytes.count)) }
            if n <= 0 { break }
            bytes.append(contentsOf: chunk[0..<n])
        }
        return bytes
    }
}

/// Writes lines with a `SocketWriter`, or through the channel at the indices given.
private final class LineWriter: ChannelInboundHandler, BatchedSender {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    private var context: ChannelHandlerContext?
    private let writer: SocketWriter

    init(batch: SendBatch? = nil) { writer = SocketWriter(batch: batch) }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func channelActive(context: ChannelHandlerContext) {
        writer.attach(to: context.channel)
        context.fireChannelActive()
    }

    /// Run when the connection closes (what the daemon runs then may write to others).
    var onClose: (() -> Void)?

    func channelInactive(context: ChannelHandlerContext) {
        writer.detach()
        self.context = nil
        onClose?()
        context.fireChannelInactive()
    }

    func handOver(_ rest: ByteBuffer) {
        guard let context else { return }
        writer.handOver(rest, context: context)
    }

    func flushHandOver() { context?.flush() }

    /// Bytes NIO holds for the connection.
    var buffered: Int { (try? context?.channel.syncOptions?.getOption(ChannelOptions.bufferedWritableBytes)) ?? 0 }

    func write(_ lines: [String], throughChannel: Set<Int>) -> [SocketWriter.Outcome] {
        guard let context else { return [] }
        return lines.enumerated().map { i, line in
            let buffer = ByteBuffer(string: line)
            guard !throughChannel.contains(i) else {
                writer.writeThroughChannel(buffer, context: context, then: .flush)
                return .channel
            }
            return writer.write(buffer, context: context, sender: self)
        }
    }
}
