/// An error from libgps (or from talking to gpsd), with libgps's own description.
public struct GPSDError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The (negative netlib, or positive errno) code libgps left in `errno`; 0 for EOF.
    public var code: Int32
    public var message: String
    public init(code: Int32, message: String) { self.code = code; self.message = message }
    public var description: String { "\(message) (\(code))" }
}

/// Result of waiting for input from gpsd.
enum GPSDWaitResult: Hashable, Sendable {
    case ready
    case timeout
    case failed(GPSDError)
}

/// Result of reading one report from gpsd.
enum GPSDReadResult: Hashable, Sendable {
    case message(GPSDMessage)
    /// No complete line yet (libgps returned 0); wait again.
    case incomplete
    /// gpsd went away (EOF) or the socket failed (`gps_read` returned -1).
    case failed(GPSDError)
}

/// One connection to gpsd, as the source's thread drives it. `LibGPSConnection` is the real
/// one; tests substitute fakes to exercise the thread and reconnect logic.
///
/// Used from one thread at a time (the source's thread); never shared concurrently.
protocol GPSDConnection: AnyObject {
    /// `gps_open` + `gps_stream(WATCH_ENABLE|WATCH_JSON)`.
    func open(host: String, port: String) -> GPSDError?
    /// Waits up to `timeout` seconds for a report to be readable.
    func wait(timeout: Double) -> GPSDWaitResult
    /// Reads and decodes one report.
    func read() -> GPSDReadResult
    /// `gps_close`; idempotent.
    func close()
}
