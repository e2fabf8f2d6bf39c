import ArgumentParser
import LocationCore
import LocationProtocol
#if canImport(Glibc)
import Glibc
#endif

/// Subscription options, shared by `watch` (sent to the daemon) and `replay` (run in-process),
/// so a replay is asked exactly what a subscriber would ask.
struct SubscriptionFlags: ParsableArguments {
    @Option(name: .customLong("distance-filter"), help: "Deliver a fix only once it is this many metres from the last delivered one.")
    var distanceFilter: Double = 0
    @Option(name: .customLong("desired-accuracy"), help: "Deliver only fixes with a 95 % horizontal accuracy of at most this many metres.")
    var desiredAccuracy: Double?
    @Option(name: .customLong("minimum-interval"), help: "Deliver at most one fix per this many seconds (of fix time).")
    var minimumInterval: Double = 0

    var options: SubscriptionOptions {
        SubscriptionOptions(distanceFilter: distanceFilter, desiredAccuracy: desiredAccuracy, minimumInterval: minimumInterval)
    }

    func validate() throws {
        // The same limits the daemon enforces, so a replay never accepts what a subscription would refuse.
        let l = SubscriptionOptions.limits
        guard l.distanceFilter.contains(distanceFilter) else {
            throw ValidationError("--distance-filter \(distanceFilter) is out of range; expected \(Int(l.distanceFilter.lowerBound))…\(Int(l.distanceFilter.upperBound)) metres")
        }
        if let a = desiredAccuracy, !l.desiredAccuracy.contains(a) {
            throw ValidationError("--desired-accuracy \(a) is out of range; expected \(Int(l.desiredAccuracy.lowerBound))…\(Int(l.desiredAccuracy.upperBound)) metres")
        }
        guard l.minimumInterval.contains(minimumInterval) else {
            throw ValidationError("--minimum-interval \(minimumInterval) is out of range; expected \(Int(l.minimumInterval.lowerBound))…\(Int(l.minimumInterval.upperBound)) seconds")
        }
    }
}

/// The daemon said no: exit 1 with its reason, not 64 with a usage line (the command line was fine).
struct Refusal: Error, CustomStringConvertible {
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

/// Buffered writes to standard output without Foundation; flushes at 64 KiB and on demand.
struct StandardOutput {
    var buffer: [UInt8] = []

    init() { buffer.reserveCapacity(1 << 17) }

    mutating func flushIfFull() { if buffer.count >= 1 << 16 { flush() } }

    mutating func flush() {
        var offset = 0
        while offset < buffer.count {
            let n = buffer.withUnsafeBytes { write(STDOUT_FILENO, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 { if errno == EINTR { continue }; break }  // stdout gone (e.g. closed pipe): stop
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
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
    guard fd >= 0 else { throw ValidationError("\(path): cannot write: \(String(cString: strerror(errno)))") }
    defer { close(fd) }
    let bytes = Array(text.utf8)
    var offset = 0
    while offset < bytes.count {
        let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + offset, $0.count - offset) }
        guard n > 0 else { throw ValidationError("\(path): write failed: \(String(cString: strerror(errno)))") }
        offset += n
    }
}
