import ArgumentParser
import LocationCore
import LocationProtocol
#if canImport(Glibc)
import Glibc
#endif

/// Subscription options, shared by `watch` (sent to the daemon) and `replay` (run in-process),
/// so a replay is asked exactly what a subscriber would ask.
struct SubscriptionFlags: ParsableArguments {
    // Unconditional: a negative value must reach validate() and its range message; otherwise
    // it is refused as a missing value, and only "--distance-filter=-5" gets that far.
    @Option(name: .customLong("distance-filter"), parsing: .unconditional, help: "Deliver a fix only once it is this many metres from the last delivered one.")
    var distanceFilter: Double = 0
    @Option(name: .customLong("desired-accuracy"), parsing: .unconditional, help: "Deliver only fixes with a 95 % horizontal accuracy of at most this many metres.")
    var desiredAccuracy: Double?
    @Option(name: .customLong("minimum-interval"), parsing: .unconditional, help: "Deliver at most one fix per this many seconds (of fix time).")
    var minimumInterval: Double = 0
    @Flag(help: "Every fix, outliers included: locations bypass the outlier gate (docs/semantics.md, \"Outliers\").")
    var raw = false
    @Flag(name: .customLong("pauses-when-stationary"), help: "Pause locations while the device is still (a paused event), until it moves (resumed).")
    var pausesWhenStationary = false
    @Option(name: .customLong("activity-type"), help: "How long still is still, with --pauses-when-stationary: automotive, fitness or other.")
    var activityType: String = ActivityType.other.rawValue

    var options: SubscriptionOptions {
        var o = SubscriptionOptions(distanceFilter: distanceFilter, desiredAccuracy: desiredAccuracy, minimumInterval: minimumInterval)
        o.raw = raw
        o.pausesWhenStationary = pausesWhenStationary
        o.activityType = ActivityType(rawValue: activityType) ?? .other  // checked by validate()
        return o
    }

    func validate() throws {
        // The same limits the daemon enforces, so a replay never accepts what a subscription would refuse.
        let l = SubscriptionOptions.limits
        guard l.distanceFilter.contains(distanceFilter) else {
            throw ValidationError("--distance-filter \(numberText(distanceFilter)) is out of range; expected \(Int(l.distanceFilter.lowerBound))…\(Int(l.distanceFilter.upperBound)) metres")
        }
        if let a = desiredAccuracy, !l.desiredAccuracy.contains(a) {
            throw ValidationError("--desired-accuracy \(numberText(a)) is out of range; expected \(Int(l.desiredAccuracy.lowerBound))…\(Int(l.desiredAccuracy.upperBound)) metres")
        }
        guard l.minimumInterval.contains(minimumInterval) else {
            throw ValidationError("--minimum-interval \(numberText(minimumInterval)) is out of range; expected \(Int(l.minimumInterval.lowerBound))…\(Int(l.minimumInterval.upperBound)) seconds")
        }
        guard ActivityType(rawValue: activityType) != nil else {
            throw ValidationError("--activity-type '\(activityType)': expected automotive, fitness or other")
        }
    }
}

/// A failure that is not the command line's — a file that cannot be opened, read or written,
/// an unknown scenario, locationd unreachable or saying no: exit 1 with the reason, not 64
/// with a usage line (`ValidationError` is for bad flags and values).
struct RuntimeError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

struct SocketFlag: ParsableArguments {
    @Option(name: .long, help: "locationd's socket (default: $LOCATIOND_SOCKET or /run/locationd/locationd.sock).")
    var socket: String?

    var path: String { socket ?? Self.defaultPath }

    /// `$LOCATIOND_SOCKET`, else locationd's own default.
    static var defaultPath: String {
        getenv("LOCATIOND_SOCKET").map { String(cString: $0) } ?? "/run/locationd/locationd.sock"
    }
}

/// Buffered writes to standard output (or `fd`: standard error for warnings) without
/// Foundation; flushes at 64 KiB and on demand.
struct StandardOutput {
    var buffer: [UInt8] = []
    let fd: Int32

    init(fd: Int32 = STDOUT_FILENO) {
        self.fd = fd
        buffer.reserveCapacity(fd == STDOUT_FILENO ? 1 << 17 : 256)
    }

    mutating func flushIfFull() { if buffer.count >= 1 << 16 { flush() } }

    mutating func flush() {
        var offset = 0
        while offset < buffer.count {
            let n = buffer.withUnsafeBytes { write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 { if errno == EINTR { continue }; break }  // output gone (e.g. closed pipe): stop
            offset += n
        }
        buffer.removeAll(keepingCapacity: true)
    }

    mutating func line(_ text: String) {
        buffer.append(contentsOf: text.utf8)
        buffer.append(UInt8(ascii: "\n"))
        flushIfFull()
    }
}

func writeText(_ text: String, to path: String?) throws {
    guard let path else {
        var out = StandardOutput()
        out.buffer.append(contentsOf: text.utf8)
        out.flush()
        return
    }
    try writeBytes(Array(text.utf8), to: path)
}

func writeBytes(_ bytes: [UInt8], to path: String?) throws {
    guard let path else {
        var out = StandardOutput()
        out.buffer = bytes
        out.flush()
        return
    }
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
    guard fd >= 0 else { throw RuntimeError("\(path): cannot write: \(String(cString: strerror(errno)))") }
    defer { close(fd) }
    var offset = 0
    while offset < bytes.count {
        let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + offset, $0.count - offset) }
        guard n > 0 else { throw RuntimeError("\(path): write failed: \(String(cString: strerror(errno)))") }
        offset += n
    }
}

/// The whole file (`-`: standard input); a file that cannot be opened or read throws a
/// `RuntimeError` naming it, what it was to be (`what`, e.g. "NMEA log") and the reason.
func readFileBytes(_ path: String, what: String) throws -> [UInt8] {
    let fd = path == "-" ? STDIN_FILENO : open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { throw RuntimeError("\(path): cannot open \(what): \(String(cString: strerror(errno)))") }
    defer { if fd != STDIN_FILENO { close(fd) } }
    var data: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 1 << 16)
    while true {
        let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
        if n < 0 {
            if errno == EINTR { continue }
            throw RuntimeError("\(path): cannot read \(what): \(String(cString: strerror(errno)))")
        }
        if n == 0 { break }
        data.append(contentsOf: chunk[0..<n])
    }
    return data
}

/// The whole file as text, or nil when it cannot be opened or read (or is a directory).
func readTextFile(_ path: String) -> String? {
    guard path != "-", let bytes = try? readFileBytes(path, what: "file") else { return nil }
    return String(decoding: bytes, as: UTF8.self)
}

/// This executable's path (/proc/self/exe, symbolic links resolved), or nil.
func executablePath() -> String? {
    var buffer = [CChar](repeating: 0, count: 4097)
    let n = readlink("/proc/self/exe", &buffer, 4096)
    guard n > 0 else { return nil }
    return String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// A region id as the human-readable output prints it: as it is, or quoted, with `\"`, `\\`,
/// `\t`, `\n`, `\r` and `\u00XX` escapes, when it holds a control character (C0, DEL, C1,
/// U+2028/U+2029) or starts with a quote. A tab or newline would break the columns and lines;
/// an escape sequence would reach the terminal (the daemon accepts any id of 1…256 bytes
/// without NUL).
func printableID(_ id: String) -> String {
    func isControl(_ v: UInt32) -> Bool { v < 0x20 || (0x7F...0x9F).contains(v) || v == 0x2028 || v == 0x2029 }
    guard id.hasPrefix("\"") || id.unicodeScalars.contains(where: { isControl($0.value) }) else { return id }
    var out = "\""
    for scalar in id.unicodeScalars {
        switch scalar {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case "\t": out += "\\t"
        case "\n": out += "\\n"
        case "\r": out += "\\r"
        case _ where isControl(scalar.value):
            let hex = String(scalar.value, radix: 16)
            out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
        default: out.unicodeScalars.append(scalar)
        }
    }
    return out + "\""
}
