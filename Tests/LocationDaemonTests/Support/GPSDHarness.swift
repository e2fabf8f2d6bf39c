import Foundation
#if canImport(Glibc)
import Glibc
#endif
import TestSupport

/// A real gpsd (3.22) for end-to-end tests, fed NMEA bytes that the harness serves itself.
///
/// How it works (the fast lossless recipe of `shared/corpus/gpsd/README.md`): the harness
/// listens on a free local TCP "feed" port and runs
/// `gpsd -N -b -S <gpsdPort> tcp://127.0.0.1:<feedPort>` as a child process. gpsd connects to
/// the feed only when a client sends `WATCH`, so nothing served before that is lost. Each
/// time gpsd connects, the harness writes everything queued by `serve(…)` (in order) to that
/// connection; bytes served while gpsd is connected go straight to it. A log served with
/// `endOfReplay: true` is followed by the line `# EOF`, which makes gpsd close the device and
/// report `{"class":"DEVICE",…,"activated":0}` after the log's last report — the clean
/// end-of-replay marker (`GPSDSource` surfaces it through `onDeviceDeactivated`).
///
/// Lifecycle:
/// ```swift
/// let gpsd = try GPSDHarness()               // feed listening + gpsd started
/// defer { gpsd.shutdown() }                  // always: kills gpsd, closes the feed
/// try gpsd.serve(log: #require(GPSDHarness.corpusLog("ublox-8")))   // + "# EOF"
/// let source = GPSDSource(configuration: .init(host: gpsd.host, port: gpsd.portString), …)
/// gpsd.kill()                                // SIGKILL, as a crash; waits for exit
/// try gpsd.serve(log: …)                     // queued for gpsd's next feed connection
/// try gpsd.start()                           // same gpsdPort again (`restart()` = kill + start)
/// ```
/// `shutdown()` is idempotent and also runs from `deinit` (the feed thread does not retain
/// the harness), so a test that fails or throws leaves no gpsd behind once the harness is
/// released; prefer an explicit `defer { gpsd.shutdown() }`. If the test *process* dies,
/// gpsd (started with `-N`) is orphaned — it is harmless and exits on SIGTERM. Ports are chosen by
/// binding port 0. gpsd runs as root here (it drops privileges itself; `-N` keeps it in the
/// foreground so it stays our child); its stderr (a harmless DBUS complaint) is discarded
/// unless `GPSD_HARNESS_STDERR=1` is set.
///
/// Thread-safe; all methods may be called from any task.
final class GPSDHarness: @unchecked Sendable {
    /// Errors the harness throws.
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// Where gpsd is installed, if it is (`/usr/sbin/gpsd` on Debian).
    static let gpsdPath: String? = ["/usr/sbin/gpsd", "/usr/bin/gpsd", "/usr/local/sbin/gpsd"]
        .first { FileManager.default.isExecutableFile(atPath: $0) }

    /// Whether gpsd-based tests can run here.
    static var isAvailable: Bool { gpsdPath != nil }

    /// The shared corpus of NMEA logs (`../shared/corpus/gpsd` from the package root).
    static let corpusDirectory: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent()  // Support
        .deletingLastPathComponent()  // LocationDaemonTests
        .deletingLastPathComponent()  // Tests
        .deletingLastPathComponent()  // package root
        .appendingPathComponent("../shared/corpus/gpsd").standardizedFileURL

    /// `<corpus>/<name>.log`, or nil if the corpus or that log is absent.
    static func corpusLog(_ name: String) -> URL? {
        let url = corpusDirectory.appendingPathComponent("\(name).log")
        return FileManager.default.fileExists(atPath: url.path) ? url : nil
    }

    /// The port gpsd listens on (fixed for the harness's lifetime, also across restarts).
    let gpsdPort: UInt16
    /// The port the harness serves NMEA on.
    var feedPort: UInt16 { feed.port }
    /// Host to give clients.
    let host = "127.0.0.1"
    /// `gpsdPort` as libgps wants it.
    var portString: String { String(gpsdPort) }

    private let feed: FeedServer
    /// More receivers behind the same gpsd (`serve(bytes:toFeed:)`).
    private let extraFeeds: [FeedServer]
    private let lock = NSLock()
    private var process: Process?
    private var closed = false

    /// Opens the feed port and (if `startGPSD`) starts gpsd.
    init(startGPSD: Bool = true, extraFeeds: Int = 0) throws {
        guard Self.gpsdPath != nil else { throw Failure(description: "gpsd is not installed") }
        feed = try FeedServer()
        self.extraFeeds = try (0..<extraFeeds).map { _ in try FeedServer() }
        gpsdPort = try Self.freePort()
        if startGPSD {
            do { try start() } catch { shutdown(); throw error }
        }
    }

    deinit { shutdown() }

    // MARK: Feeding

    /// Queues a log's bytes (followed by `# EOF` if `endOfReplay`) for gpsd.
    func serve(log url: URL, endOfReplay: Bool = true) throws {
        let data = try Data(contentsOf: url)
        serve(bytes: [UInt8](data), endOfReplay: endOfReplay)
    }

    /// Queues raw bytes (followed by `# EOF\n` if `endOfReplay`) for gpsd: written at once if
    /// gpsd is connected to the feed, else on its next connection.
    func serve(bytes: [UInt8], endOfReplay: Bool = false) {
        var chunk = bytes
        if endOfReplay {
            if let last = chunk.last, last != UInt8(ascii: "\n") { chunk.append(UInt8(ascii: "\n")) }
            chunk += Array("# EOF\n".utf8)
        }
        feed.enqueue(chunk)
    }

    /// Queues raw bytes for gpsd on extra feed `index` (another receiver).
    func serve(bytes: [UInt8], toFeed index: Int) { extraFeeds[index].enqueue(bytes) }

    /// The feed's device as gpsd names it (what `[gpsd] device` takes).
    var deviceName: String { "tcp://127.0.0.1:\(feed.port)" }

    /// How many times gpsd has connected to the feed.
    var feedConnections: Int { feed.connections }

    /// Bytes queued and not yet written to gpsd.
    var pendingByteCount: Int { feed.pendingByteCount }

    // MARK: gpsd process

    /// The running gpsd's pid, if any.
    var processIdentifier: Int32? {
        lock.lock(); defer { lock.unlock() }
        return process.flatMap { $0.isRunning ? $0.processIdentifier : nil }
    }

    /// Whether the gpsd child is running.
    var isRunning: Bool { lock.lock(); defer { lock.unlock() }; return process?.isRunning ?? false }

    /// Starts gpsd on `gpsdPort` (no-op if running) and waits until it accepts connections
    /// (up to `timeout` seconds).
    func start(timeout: Double = 5) throws {
        lock.lock()
        if closed { lock.unlock(); throw Failure(description: "harness is shut down") }
        if process?.isRunning == true { lock.unlock(); return }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Self.gpsdPath!)
        p.arguments = ["-N", "-b", "-S", String(gpsdPort), deviceName] + extraFeeds.map { "tcp://127.0.0.1:\($0.port)" }
        p.standardInput = FileHandle.nullDevice
        p.standardOutput = FileHandle.nullDevice
        if ProcessInfo.processInfo.environment["GPSD_HARNESS_STDERR"] == nil {
            p.standardError = FileHandle.nullDevice
        }
        do { try p.run() } catch { lock.unlock(); throw error }
        process = p
        lock.unlock()

        let deadline = Date().addingTimeInterval(timeout)
        while !Self.canConnect(port: gpsdPort) {
            if !p.isRunning {
                throw Failure(description: "gpsd exited at start (status \(p.terminationStatus)); port \(gpsdPort) taken?")
            }
            if Date() > deadline { throw Failure(description: "gpsd did not listen on \(gpsdPort)") }
            usleep(5_000)  // start-up poll, not test synchronisation
        }
    }

    /// Kills gpsd (SIGKILL by default, like a crash) and waits for it to exit. Also drops the
    /// feed connection, so bytes served afterwards wait for the next gpsd. No-op if not running.
    func kill(signal: Int32 = SIGKILL) {
        lock.lock()
        let p = process
        process = nil
        lock.unlock()
        if let p, p.isRunning {
            Glibc.kill(p.processIdentifier, signal)
            p.waitUntilExit()
        }
        feed.dropConnection()
    }

    /// `kill()` then `start()` on the same port.
    func restart(timeout: Double = 5) throws {
        kill()
        try start(timeout: timeout)
    }

    /// Kills gpsd and closes the feed. Idempotent; called by `deinit`.
    func shutdown() {
        lock.lock(); closed = true; lock.unlock()
        kill()
        feed.close()
        extraFeeds.forEach { $0.close() }
    }

    // MARK: Sockets

    static func listenLoopback() throws -> (Int32, UInt16) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket: \(errno)") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = 0
        let ok = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        guard ok, listen(fd, 8) == 0 else { Glibc.close(fd); throw Failure(description: "bind/listen: \(errno)") }
        var bound = sockaddr_in()
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &bound) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
        }
        return (fd, UInt16(bigEndian: bound.sin_port))
    }

    /// A port that was free a moment ago (bind port 0, read it, close).
    static func freePort() throws -> UInt16 {
        let (fd, port) = try listenLoopback()
        Glibc.close(fd)
        return port
    }

    /// Whether something accepts TCP connections on 127.0.0.1:`port`.
    static func canConnect(port: UInt16) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { Glibc.close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = port.bigEndian
        return withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }
}

/// The harness's NMEA feed: a loopback listener and its own thread. gpsd connects here when a
/// client WATCHes; each connection gets everything queued, in order. Separate from
/// `GPSDHarness` so the thread never keeps the harness alive.
private final class FeedServer: @unchecked Sendable {
    let port: UInt16
    private let lock = NSLock()
    private var listenFD: Int32
    private var connectionFD: Int32 = -1
    private var pending: [[UInt8]] = []
    private var connectionCount = 0
    private var closed = false

    init() throws {
        (listenFD, port) = try GPSDHarness.listenLoopback()
        let thread = Thread { [self] in while step() {} }
        thread.name = "GPSDHarness feed :\(port)"
        thread.start()
    }

    var connections: Int { lock.withLock { connectionCount } }
    var pendingByteCount: Int { lock.withLock { pending.reduce(0) { $0 + $1.count } } }

    func enqueue(_ chunk: [UInt8]) {
        lock.withLock {
            pending.append(chunk)
            flushLocked()
        }
    }

    func dropConnection() { lock.withLock { dropConnectionLocked() } }

    /// Stops the thread (within ~50 ms) and closes every socket. Idempotent.
    func close() {
        lock.withLock {
            guard !closed else { return }
            closed = true
            dropConnectionLocked()
        }
    }

    /// One turn of the feed thread: waits ≤ 50 ms for gpsd to connect, then serves it what is
    /// queued. Returns false (after closing the listener) once closed.
    private func step() -> Bool {
        let fd: Int32? = lock.withLock {
            if closed {
                if listenFD >= 0 { Glibc.close(listenFD); listenFD = -1 }
                return nil
            }
            return listenFD
        }
        guard let fd else { return false }
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        if poll(&pfd, 1, 50) <= 0 {
            lock.withLock { reapDeadConnectionLocked() }
            return true
        }
        let conn = accept(fd, nil, nil)
        if conn < 0 { return true }
        var one: Int32 = 1
        setsockopt(conn, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        return lock.withLock {
            if closed { Glibc.close(conn); return true }  // next turn closes the listener
            dropConnectionLocked()
            connectionFD = conn
            connectionCount += 1
            flushLocked()
            return true
        }
    }

    /// Closes the feed connection if gpsd has closed its side (gpsd never writes to it, so
    /// readable means EOF).
    private func reapDeadConnectionLocked() {
        guard connectionFD >= 0 else { return }
        var pfd = pollfd(fd: connectionFD, events: Int16(POLLIN), revents: 0)
        if poll(&pfd, 1, 0) > 0 { dropConnectionLocked() }
    }

    private func dropConnectionLocked() {
        if connectionFD >= 0 { Glibc.close(connectionFD); connectionFD = -1 }
    }

    private func flushLocked() {
        reapDeadConnectionLocked()
        while connectionFD >= 0, !pending.isEmpty {
            let chunk = pending[0]
            var sent = 0
            while sent < chunk.count {
                let n = chunk.withUnsafeBytes {
                    send(connectionFD, $0.baseAddress! + sent, chunk.count - sent, Int32(MSG_NOSIGNAL))
                }
                if n < 0 {
                    if errno == EINTR { continue }
                    dropConnectionLocked()   // keep the chunk for the next connection
                    return
                }
                sent += n
            }
            pending.removeFirst()
        }
    }
}
