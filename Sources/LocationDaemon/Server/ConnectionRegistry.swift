import LocationCore
import NIOCore

/// The server's open connections, and the loop's stall watch that runs while any is open;
/// confined to the hub's loop.
final class ConnectionRegistry: Sendable {
    private let box: NIOLoopBoundBox<[ObjectIdentifier: Connection]>
    private let watch: NIOLoopBoundBox<LoopStallWatch>
    /// Open connections per peer uid, and the pace of the warnings about refused ones.
    private let users: NIOLoopBoundBox<(open: [UInt32: Int], crowded: PacedWarnings)>
    /// The pace of the warnings about programs refused background monitoring, per uid.
    private let backgroundWarnings: NIOLoopBoundBox<PacedWarnings>
    /// Open connections per program.
    private let programs: NIOLoopBoundBox<[ProgramID: Int]>
    /// The bytes of a reply or held-back event being encoded, for every connection: one
    /// array kept at its size rather than one per connection (≈ 0.5 KiB each at 10,000).
    private let scratch: NIOLoopBoundBox<[UInt8]>

    init(eventLoop: any EventLoop, configuration: SocketServer.Configuration) {
        box = NIOLoopBoundBox.makeBoxSendingValue([:], as: [ObjectIdentifier: Connection].self, eventLoop: eventLoop)
        watch = NIOLoopBoundBox.makeBoxSendingValue(
            LoopStallWatch(eventLoop: eventLoop, interval: configuration.stallBeat, clock: configuration.clock),
            as: LoopStallWatch.self, eventLoop: eventLoop)
        users = NIOLoopBoundBox.makeBoxSendingValue(([:], PacedWarnings(interval: Self.warningInterval)),
                                                    as: (open: [UInt32: Int], crowded: PacedWarnings).self, eventLoop: eventLoop)
        programs = NIOLoopBoundBox.makeBoxSendingValue([:], as: [ProgramID: Int].self, eventLoop: eventLoop)
        backgroundWarnings = NIOLoopBoundBox.makeBoxSendingValue(PacedWarnings(interval: Self.warningInterval), as: PacedWarnings.self,
                                                                 eventLoop: eventLoop)
        scratch = NIOLoopBoundBox.makeBoxSendingValue([], as: [UInt8].self, eventLoop: eventLoop)
    }

    /// What `encode` appends, as a buffer of `allocator`'s (nil when it appended nothing).
    func encoded(_ allocator: ByteBufferAllocator, _ encode: (inout [UInt8]) -> Void) -> ByteBuffer? {
        scratch.value.removeAll(keepingCapacity: true)
        encode(&scratch.value)
        return scratch.value.isEmpty ? nil : allocator.buffer(bytes: scratch.value)
    }

    /// Adds `c` (its peer read); returns how many connections its peer's user has open now,
    /// this one included (0 for a peer without credentials).
    func add(_ c: Connection) -> Int {
        box.value[ObjectIdentifier(c)] = c
        watch.value.retain()
        guard let uid = c.peer?.uid else { return 0 }
        users.value.open[uid, default: 0] += 1
        return users.value.open[uid]!
    }

    /// `c`'s program is known (a refused connection never gets this far).
    func identified(_ c: Connection) {
        programs.value[c.program, default: 0] += 1
        c.identified = true
    }

    /// Removes `c`; returns whether it was its program's last open connection.
    @discardableResult
    func remove(_ c: Connection) -> Bool {
        guard box.value.removeValue(forKey: ObjectIdentifier(c)) != nil else { return false }
        watch.value.release()
        var others = -1
        if c.identified {
            others = (programs.value[c.program] ?? 1) - 1
            programs.value[c.program] = others > 0 ? others : nil
        }
        if let uid = c.peer?.uid, let n = users.value.open[uid] {
            users.value.open[uid] = n > 1 ? n - 1 : nil
        }
        return others == 0
    }

    /// How often a user's refused connections may be warned about.
    static let warningInterval = TimeAmount.seconds(60)

    /// A connection of `uid` is refused at `now`: nil when the warning is held back, otherwise
    /// how many refusals were held back before it.
    func crowdingWarning(_ uid: UInt32, at now: NIODeadline) -> Int? { users.value.crowded.due(uid, at: now) }

    /// A program of `uid` is refused background monitoring at `now`: as `crowdingWarning`.
    func backgroundWarning(_ uid: UInt32, at now: NIODeadline) -> Int? { backgroundWarnings.value.due(uid, at: now) }

    var all: [Connection] { Array(box.value.values) }
    var stalls: LoopStallWatch { watch.value }
}
