import Logging
import Synchronization

/// A `Logger` whose messages (level and text, metadata left out) a test reads back.
final class CapturedLog: Sendable {
    struct Entry: Hashable, Sendable {
        var level: Logger.Level
        var message: String
    }

    private let recorded = Mutex<[Entry]>([])

    var entries: [Entry] { recorded.withLock { $0 } }

    /// Entries at `level`, their text.
    func messages(_ level: Logger.Level) -> [String] { entries.filter { $0.level == level }.map(\.message) }

    /// Entries at notice and above, in order.
    var notable: [Entry] { entries.filter { $0.level >= .notice } }

    var logger: Logger {
        Logger(label: "locationd.test") { _ in Handler(log: self) }
    }

    private struct Handler: LogHandler {
        let log: CapturedLog
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            log.recorded.withLock { $0.append(Entry(level: event.level, message: "\(event.message)")) }
        }
    }
}
