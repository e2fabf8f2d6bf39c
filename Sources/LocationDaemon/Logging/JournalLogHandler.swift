import CDaemonSupport
import Logging
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Writes log messages to systemd-journald over its native protocol
/// (https://systemd.io/JOURNAL_NATIVE_PROTOCOL/): one datagram per message to
/// `/run/systemd/journal/socket`, each field `KEY=value\n`, or — for a value containing a
/// newline — `KEY\n`, the value's length as a 64-bit little-endian integer, the value, `\n`.
///
/// Fields: `MESSAGE` (the message, then the metadata as ` key=value` so `journalctl`'s default
/// view shows it), `PRIORITY` (syslog 2…7), `SYSLOG_IDENTIFIER=locationd`, `CODE_FILE`,
/// `CODE_LINE`, `CODE_FUNC`, `LOCATIOND_LOGGER` (the logger's label) and each metadata key as
/// `LOCATIOND_<KEY>` upper-cased, other characters than A–Z, 0–9 turned into `_`
/// (`peer_uid` → `LOCATIOND_PEER_UID`). An entry too large for a datagram goes in a memfd
/// (`JournalWriter.send`); one that cannot be sent at all (no journal) goes to stderr instead,
/// which under systemd is the journal's stream. One the journal does not take in time (journald
/// busy, stopped or hung) is dropped and counted, not waited for (`JournalWriter`).
public struct JournalLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    let label: String
    let writer: JournalWriter
    var shared: SharedLevel

    public init(label: String, control: LogControl, writer: JournalWriter) {
        self.label = label
        self.writer = writer
        shared = SharedLevel(control: control)
    }

    public var logLevel: Logger.Level {
        get { shared.level }
        set { shared.level = newValue }
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        let all = mergedMetadata(handler: metadata, provider: metadataProvider, event: event.metadata)
        var message = event.message.description
        for (key, value) in all { message += " \(key)=\(value)" }
        if let error = event.error { message += " error=\(error)" }
        var fields: [(String, String)] = [
            ("MESSAGE", message),
            ("PRIORITY", String(Self.priority(event.level))),
            ("SYSLOG_IDENTIFIER", writer.identifier),
            ("CODE_FILE", event.file),
            ("CODE_LINE", String(event.line)),
            ("CODE_FUNC", event.function),
            ("LOCATIOND_LOGGER", label),
        ]
        for (key, value) in all { fields.append((Self.fieldName(key), "\(value)")) }
        if let error = event.error { fields.append(("LOCATIOND_ERROR", "\(error)")) }
        if !writer.send(fields) {
            StderrLogHandler(label: label, control: shared.control).log(event: event)
        }
    }

    /// syslog priorities: critical 2 (crit), error 3, warning 4, notice 5, info 6, debug/trace 7.
    public static func priority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: 7
        case .info: 6
        case .notice: 5
        case .warning: 4
        case .error: 3
        case .critical: 2
        }
    }

    /// `peer_uid` → `LOCATIOND_PEER_UID`; at most 64 characters, as journald requires.
    public static func fieldName(_ key: String) -> String {
        var name = "LOCATIOND_"
        for u in key.unicodeScalars {
            switch u {
            case "a"..."z": name.unicodeScalars.append(Unicode.Scalar(u.value - 32)!)
            case "A"..."Z", "0"..."9": name.unicodeScalars.append(u)
            default: name += "_"
            }
        }
        return String(name.prefix(64))
    }
}

/// A datagram socket to journald (or to whatever stands in for it at `path`). Thread-safe: each
/// message is one `sendto` (or one `sendmsg` of a memfd).
///
/// A journal whose queue is full is waited for `patience` at most, then the entry is dropped
/// and counted; later entries are not waited for (each is tried once, without waiting) until
/// the journal takes the count — "N log messages were dropped" — and then the entry after it
/// too: only an entry that finds nothing dropped waits again.
/// Waited for without a bound (as `sd_journal_send` does), a journald that stopped reading
/// held whichever thread logged, the event loop too: no fix reached any subscriber, and the
/// watchdog killed the daemon, again at each restart.
public final class JournalWriter: Sendable {
    public static let defaultPath = "/run/systemd/journal/socket"
    /// How long one entry may wait for a full journal.
    public static let patience = timeval(tv_sec: 0, tv_usec: 100_000)
    public let path: String
    public let identifier: String
    private let address: UnixSocketAddress?
    private let fd: CInt
    /// Entries dropped since the journal last took the count, and whether a thread is offering
    /// it now; while either, no entry is waited for.
    private struct Dropped {
        var count = 0
        var reporting = false
    }
    private let dropped = Mutex(Dropped())

    public init(path: String = defaultPath, identifier: String = "locationd") {
        self.path = path
        self.identifier = identifier
        address = try? UnixSocketAddress(path)
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var patience = Self.patience
        if fd >= 0 { setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &patience, socklen_t(MemoryLayout<timeval>.size)) }
    }

    deinit { if fd >= 0 { close(fd) } }

    /// The datagram for `fields` in the native protocol.
    public static func encode(_ fields: [(String, String)]) -> [UInt8] {
        var out: [UInt8] = []
        for (key, value) in fields {
            out += key.utf8
            if value.utf8.contains(10) {
                out.append(10)
                var length = UInt64(value.utf8.count).littleEndian
                withUnsafeBytes(of: &length) { out += $0 }
                out += value.utf8
            } else {
                out.append(UInt8(ascii: "="))
                out += value.utf8
            }
            out.append(10)
        }
        return out
    }

    /// Sends one entry; false when it could not be sent (no journal, no memory, …). An entry
    /// dropped because the journal did not take it in time counts as sent (see the type).
    ///
    /// An entry larger than a datagram may be (the socket buffer's size: `EMSGSIZE`, or
    /// `ENOBUFS` when the kernel cannot allocate one that large) goes as the protocol provides:
    /// written to a sealed memfd whose descriptor is sent alone, with an empty payload.
    @discardableResult
    public func send(_ fields: [(String, String)]) -> Bool {
        guard fd >= 0, let address else { return false }
        // Taken whole: two threads logging as the journal comes back must not both report it.
        // Another thread offering the count meanwhile means the journal was full a moment ago:
        // this entry is tried without waiting too.
        let (lost, patient) = dropped.withLock { d in
            defer { if d.count > 0 { d.count = 0; d.reporting = true } }
            return (d.count, d.count == 0 && !d.reporting)
        }
        if lost > 0 {
            let report = [("MESSAGE", "\(lost) log message\(lost == 1 ? " was" : "s were") dropped while the journal was full (journald busy, stopped or hung)"),
                          ("PRIORITY", String(JournalLogHandler.priority(.warning))),
                          ("SYSLOG_IDENTIFIER", identifier), ("LOCATIOND_DROPPED", String(lost))]
            let outcome = deliver(Self.encode(report), to: address, waiting: false)
            dropped.withLock { d in
                d.reporting = false
                switch outcome {
                case .sent: break
                case .full: d.count += lost + 1  // this entry too: the journal is still full
                case .failed: d.count += lost
                }
            }
            switch outcome {
            case .sent: break
            case .full: return true
            case .failed: return false
            }
        }
        // Not waited for right after the count either: a journald that reads a few entries a
        // second would otherwise take the count and hold the next entry its 100 ms, every time.
        switch deliver(Self.encode(fields), to: address, waiting: patient) {
        case .sent: return true
        case .full:
            dropped.withLock { $0.count += 1 }
            return true
        case .failed: return false
        }
    }

    private enum Outcome { case sent, full, failed }

    private func deliver(_ datagram: [UInt8], to address: UnixSocketAddress, waiting: Bool) -> Outcome {
        let flags = waiting ? 0 : Int32(MSG_DONTWAIT)
        var error = address.send(datagram, from: fd, flags: flags)
        if error == EMSGSIZE || error == ENOBUFS {
            let memfd = datagram.withUnsafeBytes { locationd_sealed_memfd("journal-entry", $0.baseAddress, $0.count) }
            guard memfd >= 0 else { return .failed }
            defer { close(memfd) }
            error = address.withSockaddr { locationd_send_descriptor(fd, $0, $1, memfd, flags) } == 0 ? nil : errno
        }
        switch error {
        case nil: return .sent
        case EAGAIN, EWOULDBLOCK: return .full
        default: return .failed
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

/// Picks the log backend: the journal when stderr is the journal's stream, plain stderr
/// otherwise. `LOCATIOND_JOURNAL_SOCKET` overrides the journal's socket path (tests).
public enum LogBackend {
    public static func bootstrap(control: LogControl) -> String {
        let override = getenv("LOCATIOND_JOURNAL_SOCKET").map { String(cString: $0) }
        if JournalWriter.stderrIsJournal() || override != nil {
            let writer = JournalWriter(path: override ?? JournalWriter.defaultPath)
            LoggingSystem.bootstrap { label in JournalLogHandler(label: label, control: control, writer: writer) }
            return "journal \(writer.path)"
        }
        LoggingSystem.bootstrap { label in StderrLogHandler(label: label, control: control) }
        return "stderr"
    }
}
