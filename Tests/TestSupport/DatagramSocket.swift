import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A datagram socket bound to a fresh path: stands in for systemd's notify socket or for the
/// journal. `receive` waits with `poll` and a deadline that only guards against a hang.
/// With `timestamps`, the kernel stamps each datagram with when it was queued (SO_TIMESTAMP),
/// which `receiveTimestamped` returns: a test that reads late still sees when each was sent.
/// (Off by default: the stamp is a control message of its own, which a receive sized for one
/// passed descriptor would not have room for.)
public final class DatagramSocket: @unchecked Sendable {
    public let path: String
    public let fd: CInt

    public init(path: String, timestamps: Bool = false) throws {
        self.path = path
        unlink(path)
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw TestFailure(description: "socket: \(errno)") }
        var one: Int32 = 1
        guard !timestamps || setsockopt(fd, SOL_SOCKET, SO_TIMESTAMP, &one, socklen_t(MemoryLayout<Int32>.size)) == 0 else {
            let e = errno
            close(fd)
            throw TestFailure(description: "SO_TIMESTAMP: \(String(cString: strerror(e)))")
        }
        let rc = withSockaddr(path) { bind(fd, $0, $1) }
        guard rc == 0 else { throw TestFailure(description: "bind \(path): \(String(cString: strerror(errno)))") }
    }

    deinit { close(fd); unlink(path) }

    /// The next datagram, or nil when none arrives within `timeout` seconds.
    public func receive(timeout: Double) -> [UInt8]? {
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            let ms = Int32(max(0, deadline.timeIntervalSinceNow) * 1000)
            let n = poll(&pfd, 1, ms)
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return nil }
            var buffer = [UInt8](repeating: 0, count: 256 * 1024)
            let got = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard got >= 0 else { return nil }
            return Array(buffer[0..<got])
        }
    }

    public func receiveText(timeout: Double) -> String? { receive(timeout: timeout).map { String(decoding: $0, as: UTF8.self) } }

    /// The next datagram as text and when the kernel queued it (SCM_TIMESTAMP, seconds since the
    /// epoch), or nil when none arrives within `timeout` seconds. Needs `timestamps`.
    public func receiveTimestamped(timeout: Double) throws -> (text: String, time: Double)? {
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            let n = poll(&pfd, 1, Int32(max(0, deadline.timeIntervalSinceNow) * 1000))
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return nil }
            break
        }
        var buffer = [UInt8](repeating: 0, count: 256 * 1024)
        // A cmsghdr (length, level, type) then the timeval, each 8-byte aligned (CMSG_* do not
        // import into Swift).
        let control = UnsafeMutableRawBufferPointer.allocate(byteCount: 128, alignment: 8)
        defer { control.deallocate() }
        var stamp: Double?
        let got: Int = buffer.withUnsafeMutableBytes { data in
            var iov = iovec(iov_base: data.baseAddress, iov_len: data.count)
            return withUnsafeMutablePointer(to: &iov) { iovPointer in
                var message = msghdr()
                message.msg_iov = iovPointer
                message.msg_iovlen = 1
                message.msg_control = control.baseAddress
                message.msg_controllen = control.count
                let n = recvmsg(fd, &message, 0)
                guard n >= 0 else { return -1 }
                var offset = 0
                let header = MemoryLayout<Int>.size + 2 * MemoryLayout<Int32>.size
                while offset + header <= Int(message.msg_controllen) {
                    let length = control.load(fromByteOffset: offset, as: Int.self)
                    let level = control.load(fromByteOffset: offset + MemoryLayout<Int>.size, as: Int32.self)
                    let type = control.load(fromByteOffset: offset + MemoryLayout<Int>.size + 4, as: Int32.self)
                    if level == SOL_SOCKET && type == SCM_TIMESTAMP && length >= header + MemoryLayout<timeval>.size {
                        let tv = control.load(fromByteOffset: offset + header, as: timeval.self)
                        stamp = Double(tv.tv_sec) + Double(tv.tv_usec) / 1e6
                    }
                    guard length > 0 else { break }
                    offset += (length + 7) & ~7
                }
                return n
            }
        }
        guard got >= 0 else { throw TestFailure(description: "recvmsg: \(String(cString: strerror(errno)))") }
        guard let stamp else { throw TestFailure(description: "a datagram without SCM_TIMESTAMP") }
        return (String(decoding: buffer[0..<got], as: UTF8.self), stamp)
    }
}

