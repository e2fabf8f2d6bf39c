import Logging

/// Writes log messages to systemd-journald with structured fields (`JournalWriter`).
///
/// Fields: `MESSAGE` (the message, then the metadata as ` key=value` so `journalctl`'s default
/// view shows it), `PRIORITY` (syslog 2…7), `SYSLOG_IDENTIFIER` (the writer's: `locationd`,
/// `locationd-mqtt`), `CODE_FILE`, `CODE_LINE`, `CODE_FUNC`, `LOCATIOND_LOGGER` (the logger's
/// label) and each metadata key as `LOCATIOND_<KEY>` upper-cased, other characters than A–Z,
/// 0–9 turned into `_` (`peer_uid` → `LOCATIOND_PEER_UID`). One that cannot be sent at all (no
/// journal) goes to stderr instead, which under systemd is the journal's stream.
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
        let fallback = StderrLogHandler(label: label, control: shared.control)
        writer.submit(fields) { fallback.log(event: event) }
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
