import CGPS
import Glibc
import LocationCore

// The only file that touches libgps and `gps_data_t`.

extension GPSDTPV {
    /// Copies the TPV fields locationd uses out of libgps's fix.
    init(_ fix: gps_fix_t) {
        let t = fix.time
        self.init(
            mode: fix.mode,
            time: (t.tv_sec == 0 && t.tv_nsec == 0)
                ? nil : Timestamp(seconds: Int64(t.tv_sec), nanoseconds: Int64(t.tv_nsec)),
            latitude: fix.latitude, longitude: fix.longitude,
            altHAE: fix.altHAE, altMSL: fix.altMSL,
            eph: fix.eph, epv: fix.epv,
            speed: fix.speed, track: fix.track)
    }
}

extension GPSDMessage {
    /// Decodes one report from the JSON line libgps returned and the `gps_data_t` it filled.
    init(line: Substring, data: UnsafePointer<gps_data_t>) {
        if GPSDMessage.hasClass("TPV", line) {
            self = .tpv(GPSDTPV(data.pointee.fix))
        } else if let path = GPSDMessage.deactivatedDevicePath(in: line) {
            self = .deviceDeactivated(path: path)
        } else {
            self = .other
        }
    }
}

/// libgps's description of an `errno` value it left behind.
func gpsdError(_ code: Int32) -> GPSDError {
    let text = gps_errstr(code).map { String(cString: $0) } ?? "libgps error"
    return GPSDError(code: code, message: text)
}

/// A real connection through libgps (API 11). Heap-allocates and zeroes its `gps_data_t`.
final class LibGPSConnection: GPSDConnection {
    private let data: UnsafeMutablePointer<gps_data_t>
    private var isOpen = false
    /// Set when `gps_read` found no complete line (libgps's buffer is empty or holds a partial
    /// one): only then is the socket (non-blocking in libgps 3.22) polled; otherwise libgps may
    /// still hold complete lines, and reading finds out without blocking.
    private var needBytes = false
    private static let bufferSize = 16 * 1024  // > GPS_JSON_RESPONSE_MAX (10240)
    private let buffer: UnsafeMutablePointer<CChar>

    init() {
        data = .allocate(capacity: 1)
        memset(data, 0, MemoryLayout<gps_data_t>.size)
        buffer = .allocate(capacity: Self.bufferSize)
        buffer.initialize(repeating: 0, count: Self.bufferSize)
    }

    deinit {
        close()
        data.deallocate()
        buffer.deallocate()
    }

    func open(host: String, port: String) -> GPSDError? {
        close()
        memset(data, 0, MemoryLayout<gps_data_t>.size)
        errno = 0
        if gps_open(host, port, data) != 0 {
            return gpsdError(errno)
        }
        isOpen = true
        needBytes = false
        errno = 0
        if gps_stream(data, UInt32(WATCH_ENABLE | WATCH_JSON), nil) != 0 {
            let err = gpsdError(errno == 0 ? -1 : errno)
            close()
            return err
        }
        return nil
    }

    func wait(timeout: Double) -> GPSDWaitResult {
        guard isOpen else { return .failed(GPSDError(code: 0, message: "not connected")) }
        // Not `gps_waiting`: it waits with pselect and FD_SET, which glibc aborts on for a
        // descriptor ≥ 1,024 ("bit out of range 0 - FD_SETSIZE"), and the daemon raises its
        // open-file limit so 1,000+ subscribers fit: a gpsd (re)connect among them gets such a
        // descriptor (DescriptorLimitTests).
        guard needBytes else { return .ready }
        var pfd = pollfd(fd: data.pointee.gps_fd, events: Int16(POLLIN), revents: 0)
        let n = poll(&pfd, 1, Int32(timeout * 1000))
        if n > 0 { return .ready }
        if n == 0 || errno == EINTR { return .timeout }
        return .failed(gpsdError(errno))
    }

    func read() -> GPSDReadResult {
        guard isOpen else { return .failed(GPSDError(code: 0, message: "not connected")) }
        // A TPV replaces `set`, but SKY/GST only add bits: clear it before each read.
        data.pointee.set = 0
        buffer[0] = 0
        errno = 0
        let n = gps_read(data, buffer, Int32(Self.bufferSize))
        // `wait` lets a read find out whether libgps holds a line; with nothing buffered the
        // non-blocking recv says EAGAIN (returned as 0 by libgps 3.22; -1 handled the same).
        if n < 0, errno == EAGAIN || errno == EWOULDBLOCK {
            needBytes = true
            return .incomplete
        }
        if n < 0 {
            return .failed(errno == 0
                ? GPSDError(code: 0, message: "gpsd closed the connection")
                : gpsdError(errno))
        }
        if n == 0 {
            needBytes = true
            return .incomplete
        }
        needBytes = false
        let line = String(cString: buffer)
        return .message(GPSDMessage(line: line[...], data: UnsafePointer(data)))
    }

    func close() {
        guard isOpen else { return }
        isOpen = false
        _ = gps_close(data)
    }
}

/// gpsd's IANA port, `DEFAULT_GPSD_PORT` from gps.h.
public let defaultGPSDPort: String = DEFAULT_GPSD_PORT
