import Logging
#if canImport(Glibc)
import Glibc
#endif

/// Plain text to stderr, one line per message: `2026-05-04T08:33:01.123Z info locationd: message key=value`.
/// Used when stderr is not the journal (started by hand, in tests, under another supervisor).
public struct StderrLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    let label: String
    var shared: SharedLevel

    public init(label: String, control: LogControl) {
        self.label = label
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
        var line = "\(Self.timestamp()) \(event.level) \(label): \(event.message)"
        for (key, value) in mergedMetadata(handler: metadata, provider: metadataProvider, event: event.metadata) {
            line += " \(key)=\(value)"
        }
        if let error = event.error { line += " error=\(error)" }
        var bytes = Self.oneLine(line)
        bytes.append(UInt8(ascii: "\n"))
        bytes.withUnsafeMutableBytes { raw in
            var offset = 0
            while offset < raw.count {
                let n = write(STDERR_FILENO, raw.baseAddress! + offset, raw.count - offset)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { return }
                offset += n
            }
        }
    }

    /// `text`'s bytes with control characters written as `\n`, `\r`, `\xNN`: a value from a
    /// peer (an executable path may hold a newline) must not start a line of its own that reads
    /// like the daemon's.
    static func oneLine(_ text: String) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count)
        for b in text.utf8 {
            switch b {
            case 0x0A: out += Array("\\n".utf8)
            case 0x0D: out += Array("\\r".utf8)
            case 0x09: out.append(b)
            case ..<0x20, 0x7F:
                let hex = Array("0123456789abcdef".utf8)
                out += [UInt8(ascii: "\\"), UInt8(ascii: "x"), hex[Int(b >> 4)], hex[Int(b & 15)]]
            default: out.append(b)
            }
        }
        return out
    }

    static func timestamp() -> String {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        var t = ts.tv_sec
        var tm = tm()
        gmtime_r(&t, &tm)
        func pad(_ v: Int32, _ n: Int) -> String {
            let s = String(v)
            return String(repeating: "0", count: max(0, n - s.count)) + s
        }
        return "\(tm.tm_year + 1900)-\(pad(tm.tm_mon + 1, 2))-\(pad(tm.tm_mday, 2))T\(pad(tm.tm_hour, 2)):\(pad(tm.tm_min, 2)):\(pad(tm.tm_sec, 2)).\(pad(Int32(ts.tv_nsec / 1_000_000), 3))Z"
    }
}

/// Handler metadata, then the provider's, then the message's (later wins), sorted by key.
func mergedMetadata(handler: Logger.Metadata, provider: Logger.MetadataProvider?, event: Logger.Metadata?) -> [(String, Logger.MetadataValue)] {
    var all = handler
    if let provided = provider?.get() { all.merge(provided) { $1 } }
    if let event { all.merge(event) { $1 } }
    return all.sorted { $0.key < $1.key }
}
