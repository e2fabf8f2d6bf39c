import Foundation
import NIOCore
import NIOPosix
import Synchronization

/// A scripted stand-in for gpsd on a real loopback TCP port: each accepted connection takes
/// the next step of the script (no step left: stay silent and open). Records what each client
/// sent (the watch request) and how many connections the client closed. "Refused" is the port
/// with nothing listening: create it with `FakeGPSD(port:)` only when the test wants gpsd up.
final class FakeGPSD: Sendable {
    struct Step: Sendable {
        /// Written in this order, each flushed on its own (so a line may straddle reads).
        var chunks: [[UInt8]]
        /// Close the connection after the chunks and the client's request line (gpsd lost)
        /// instead of staying open.
        var close: Bool
        /// Answer each `?VERSION;` (the idle probe) with a VERSION report, as gpsd does; false:
        /// a hung gpsd that never answers.
        var answersVersion = false
        /// With `answersVersion`: lines written after the answer to this probe (1 = the first),
        /// as a receiver that falls silent and then reports again.
        var resume: (afterProbe: Int, lines: [String])? = nil
        /// Lines written this many seconds after the connection is accepted (a receiver's later
        /// reports, or other reports before gpsd hangs).
        var timed: [(delay: Double, lines: [String])] = []

        /// Whole lines, each terminated by `\r\n` like gpsd's, split into chunks at `splits`
        /// (byte offsets into the concatenation).
        static func lines(_ lines: [String], splits: [Int] = [], close: Bool, answersVersion: Bool = false) -> Step {
            let bytes = Array(lines.map { $0 + "\r\n" }.joined().utf8)
            var chunks: [[UInt8]] = []
            var start = 0
            for cut in splits.sorted() where cut > start && cut < bytes.count {
                chunks.append(Array(bytes[start..<cut])); start = cut
            }
            chunks.append(Array(bytes[start...]))
            return Step(chunks: chunks, close: close, answersVersion: answersVersion)
        }
    }

    private struct State {
        var steps: [Step]
        var received: [String] = []   // per connection, in accept order
        var clientCloses = 0
    }
    private final class Shared: Sendable {
        let mutex: Mutex<State>
        init(_ steps: [Step]) { mutex = Mutex(State(steps: steps)) }
        func withLock<R>(_ body: (inout State) -> R) -> R { mutex.withLock { body(&$0) } }
    }
    private let state: Shared
    private let channel: any Channel
    let port: Int

    init(port: Int, steps: [Step]) throws {
        let state = Shared(steps)
        self.state = state
        self.port = port
        channel = try ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { child in
                child.eventLoop.makeCompletedFuture {
                    let (index, step) = state.withLock { s -> (Int, Step?) in
                        s.received.append("")
                        return (s.received.count - 1, s.steps.isEmpty ? nil : s.steps.removeFirst())
                    }
                    try child.pipeline.syncOperations.addHandler(Connection(state: state, index: index, step: step))
                }
            }
            .bind(host: "127.0.0.1", port: port).wait()
    }

    func shutdown() { try? channel.close().wait() }

    /// What each connection's client sent, in accept order.
    var received: [String] { state.withLock { $0.received } }
    var clientCloses: Int { state.withLock { $0.clientCloses } }
    var connections: Int { state.withLock { $0.received.count } }

    private final class Connection: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        let state: Shared
        let index: Int
        let step: Step?
        var closing = false
        var versionsAnswered = 0
        init(state: Shared, index: Int, step: Step?) { self.state = state; self.index = index; self.step = step }

        func channelActive(context: ChannelHandlerContext) {
            guard let step else { return }
            for chunk in step.chunks {
                context.writeAndFlush(NIOAny(context.channel.allocator.buffer(bytes: chunk)), promise: nil)
            }
            let channel = context.channel
            for (delay, lines) in step.timed {
                channel.eventLoop.scheduleTask(in: .nanoseconds(Int64(delay * 1e9))) {
                    channel.writeAndFlush(channel.allocator.buffer(string: lines.map { $0 + "\r\n" }.joined()), promise: nil)
                }
            }
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let text = String(buffer: unwrapInboundIn(data))
            let request = state.withLock { $0.received[index] += text; return $0.received[index] }
            // A closing step closes once the client's request is in, so it is always recorded.
            if step?.close == true, !closing, request.hasSuffix("\n") {
                closing = true
                context.close(promise: nil)
            }
            if step?.answersVersion == true {
                let probes = request.components(separatedBy: "?VERSION;\n").count - 1
                while versionsAnswered < probes {
                    versionsAnswered += 1
                    let version = #"{"class":"VERSION","release":"3.22","rev":"3.22","proto_major":3,"proto_minor":14}"# + "\r\n"
                    context.writeAndFlush(NIOAny(context.channel.allocator.buffer(string: version)), promise: nil)
                    if let resume = step?.resume, resume.afterProbe == versionsAnswered {
                        let lines = resume.lines.map { $0 + "\r\n" }.joined()
                        context.writeAndFlush(NIOAny(context.channel.allocator.buffer(string: lines)), promise: nil)
                    }
                }
            }
        }

        func channelInactive(context: ChannelHandlerContext) {
            if !closing { state.withLock { $0.clientCloses += 1 } }
        }
    }
}
