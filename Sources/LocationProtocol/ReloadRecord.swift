#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// How a SIGHUP reload ended, as the daemon records it for `locationctl reload` (systemd's
/// `ExecReload=`), which waits for it: one line in the file `reload` of the daemon's runtime
/// directory, replaced (written to a temporary file, then renamed) when each reload finishes
/// (written into the file in place when it cannot be replaced):
///
///     123456789 ok
///     123456789 failed /etc/locationd/locationd.toml:3: unknown authorization 'alway'; expected denied, when-in-use or always
///
/// The number is CLOCK_MONOTONIC in microseconds when the reload began (the `MONOTONIC_USEC=`
/// sent with `RELOADING=1`). A waiter that read the clock before it sent SIGHUP waits for a
/// record starting at or after that time: an earlier one is another reload's, and several
/// signals merged into one reload are all answered by it (docs/systemd.md, "Reload").
public struct ReloadRecord: Sendable, Equatable {
    public enum Outcome: Sendable, Equatable {
        case ok
        /// The reload was refused and the running configuration kept; why, as the log says it.
        case failed(String)
    }

    public static let fileName = "reload"

    /// CLOCK_MONOTONIC in microseconds: the one clock of `start`, `MONOTONIC_USEC=` and the
    /// waiter's "asked at" (both sides must read the same clock).
    public static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000 + UInt64(ts.tv_nsec) / 1000
    }

    /// CLOCK_MONOTONIC, microseconds, when the reload began.
    public var start: UInt64
    public var outcome: Outcome

    public init(start: UInt64, outcome: Outcome) {
        self.start = start
        self.outcome = outcome
    }

    /// The file's content: one line (line breaks in a message become spaces).
    public var line: String {
        switch outcome {
        case .ok: "\(start) ok\n"
        case .failed(let message):
            "\(start) failed \(String(message.map { $0 == "\n" || $0 == "\r" || $0 == "\r\n" ? " " : $0 }))\n"
        }
    }

    /// Parses `line`'s form, its one line break included; nil for anything else. A line without
    /// its break is still being written, and a second break is an older, longer record's tail
    /// while the daemon rewrites the file in place (when it cannot replace it).
    public init?(line text: String) {
        let bytes = Array(text.utf8)
        guard bytes.last == 0x0A, bytes.firstIndex(of: 0x0A) == bytes.count - 1 else { return nil }
        // `#` marks a record being rewritten in place (ReloadRecordFile.inPlaceSteps); the number
        // would refuse it too, but the rule is this one.
        guard bytes.first != UInt8(ascii: "#") else { return nil }
        let text = Substring(String(decoding: bytes.dropLast(), as: UTF8.self))
        let parts = text.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count >= 2, let start = UInt64(parts[0]) else { return nil }
        switch parts[1] {
        case "ok" where parts.count == 2: self.init(start: start, outcome: .ok)
        case "failed": self.init(start: start, outcome: .failed(parts.count == 3 ? String(parts[2]) : ""))
        default: return nil
        }
    }

    /// Where the daemon writes the record, and where `locationctl reload` looks for it:
    /// `RUNTIME_DIRECTORY` (systemd's, from `RuntimeDirectory=`; the first when it lists several)
    /// when set, else the directory of the socket path.
    public static func directory(runtimeDirectory: String?, socketPath: String) -> String {
        if let first = runtimeDirectory?.split(separator: ":").first, !first.isEmpty { return String(first) }
        guard let slash = socketPath.lastIndex(of: "/") else { return "." }
        return slash == socketPath.startIndex ? "/" : String(socketPath[..<slash])
    }

    /// The record's path in `directory`.
    public static func path(in directory: String) -> String {
        directory.hasSuffix("/") ? directory + fileName : directory + "/" + fileName
    }
}
