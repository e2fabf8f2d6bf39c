import CSystemd
import Dispatch
import Logging
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Hands entries to journald through libsystemd (`sd_journal_sendv`) on a thread of its own.
///
/// `sd_journal_sendv` waits as long as journald's socket is full: a journald that stopped
/// reading (busy, stopped or hung) would hold whichever thread logged, the event loop too, so
/// no fix reached any subscriber and the watchdog killed the daemon. So a log call only queues
/// the entry, and at most `capacity` wait; beyond that entries are dropped and counted, and the
/// count goes to the journal ("N log messages were dropped") before the next entry queued.
public final class JournalWriter: Sendable {
    /// Entries that may wait for the journal.
    public static let capacity = 64
    public let identifier: String
    private let deliver: @Sendable ([(String, String)]) -> Bool
    private let queue = DispatchQueue(label: "locationd.journal")
    private let pending = DispatchGroup()
    private struct State {
        var waiting = 0
        var dropped = 0
    }
    private let state = Mutex(State())

    /// `deliver` sends one entry and says whether it was taken (tests stand in for journald).
    public init(identifier: String,
                deliver: @escaping @Sendable ([(String, String)]) -> Bool = { JournalWriter.sendv($0) == 0 }) {
        self.identifier = identifier
        self.deliver = deliver
    }

    /// Queues one entry; `undelivered` runs on the writer's thread when the journal refused it
    /// (no journal). An entry beyond `capacity` is dropped and counted.
    public func submit(_ fields: [(String, String)], undelivered: @escaping @Sendable () -> Void) {
        let lost: Int? = state.withLock { s in
            guard s.waiting < Self.capacity else {
                s.dropped += 1
                return nil
            }
            s.waiting += 1
            defer { s.dropped = 0 }
            return s.dropped
        }
        guard let lost else { return }
        pending.enter()
        queue.async { [self] in
            if lost > 0 { _ = deliver(droppedReport(lost)) }
            if !deliver(fields) { undelivered() }
            state.withLock { $0.waiting -= 1 }
            pending.leave()
        }
    }

    /// Waits until the queued entries are sent, at most `seconds`: before the process exits.
    public func flush(seconds: Double) {
        _ = pending.wait(timeout: .now() + seconds)
    }

    func droppedReport(_ lost: Int) -> [(String, String)] {
        [("MESSAGE", "\(lost) log message\(lost == 1 ? " was" : "s were") dropped while the journal was full (journald busy, stopped or hung)"),
         ("PRIORITY", String(JournalLogHandler.priority(.warning))),
         ("SYSLOG_IDENTIFIER", identifier), ("LOCATIOND_DROPPED", String(lost))]
    }

    /// `sd_journal_sendv` of `KEY=value` fields (a value may hold newlines); 0 or a negative errno.
    public static func sendv(_ fields: [(String, String)]) -> Int32 {
        var bytes: [UInt8] = []
        var ranges: [Range<Int>] = []
        for (key, value) in fields {
            let start = bytes.count
            bytes += key.utf8
            bytes.append(UInt8(ascii: "="))
            bytes += value.utf8
            ranges.append(start..<bytes.count)
        }
        return bytes.withUnsafeMutableBytes { raw in
            guard let base = raw.baseAddress else { return -EINVAL }
            var vectors = ranges.map { iovec(iov_base: base + $0.lowerBound, iov_len: $0.count) }
            return sd_journal_sendv(&vectors, Int32(vectors.count))
        }
    }

    /// Whether stderr is connected to the journal: `JOURNAL_STREAM` (set by systemd) holds the
    /// `device:inode` of the stream it gave us, and stderr still is that stream (systemd's
    /// documented test; a redirected stderr keeps the variable but not the inode).
    public static func stderrIsJournal(environment value: String? = getenv("JOURNAL_STREAM").map { String(cString: $0) }) -> Bool {
        guard let value else { return false }
        let parts = value.split(separator: ":")
        guard parts.count == 2, let dev = UInt64(parts[0]), let ino = UInt64(parts[1]) else { return false }
        var st = stat()
        guard fstat(STDERR_FILENO, &st) == 0 else { return false }
        return UInt64(st.st_dev) == dev && UInt64(st.st_ino) == ino
    }
}
