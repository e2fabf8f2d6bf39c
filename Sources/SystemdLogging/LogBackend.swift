import Logging
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Picks the log backend of a process (locationd, locationd-mqtt): the journal when stderr is
/// the journal's stream, plain stderr otherwise.
public enum LogBackend {
    private static let journal = Mutex<JournalWriter?>(nil)

    /// Sets up swift-log for the process; `identifier` is its SYSLOG_IDENTIFIER. Returns the
    /// backend's name ("journal" or "stderr").
    public static func bootstrap(identifier: String, control: LogControl) -> String {
        if JournalWriter.stderrIsJournal() {
            let writer = JournalWriter(identifier: identifier)
            journal.withLock { $0 = writer }
            LoggingSystem.bootstrap { label in JournalLogHandler(label: label, control: control, writer: writer) }
            return "journal"
        }
        LoggingSystem.bootstrap { label in StderrLogHandler(label: label, control: control) }
        return "stderr"
    }

    /// An error before logging is set up (a refused option or config file), as one line on
    /// stderr: `identifier: text`. When stderr is the journal's stream, `<3>` makes it an error
    /// there (sd-daemon(3)), not one at the stream's default, info.
    public static func startupError(_ text: String, identifier: String) {
        let line = (JournalWriter.stderrIsJournal() ? "<3>" : "") + "\(identifier): \(text)\n"
        _ = line.withCString { write(STDERR_FILENO, $0, strlen($0)) }
    }

    /// Sends what waits for the journal, at most 1 s: a journald that stopped reading must not
    /// hold the exit.
    public static func flush() {
        journal.withLock { $0 }?.flush(seconds: 1)
    }

    /// `flush()`, then exits with `status`.
    public static func exit(_ status: Int32) -> Never {
        flush()
        Glibc.exit(status)
    }
}
