import LocationCore
#if canImport(Glibc)
import Glibc
#endif

/// Turns an NMEA log into the engine inputs a live source would have produced: the one
/// replay path shared by the daemon's replay source and `locationctl replay`, so both publish
/// the same events for the same log.
public enum NMEAReplay {
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
        public init(description: String) { self.description = description }
    }

    /// Calls `body` with `.source(.connected)`, then one input per epoch of the log (`.fix` or
    /// `.noFix`), then `.source(.disconnected)` at the end of the file.
    public static func inputs(
        fromFile path: String, options: NMEADecoder.Options = .init(),
        _ body: (EngineInput) throws -> Void
    ) throws {
        let fd = path == "-" ? STDIN_FILENO : open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            throw Failure(description: "\(path): cannot open NMEA log: \(String(cString: strerror(errno)))")
        }
        defer { if fd != STDIN_FILENO { close(fd) } }
        var decoder = NMEADecoder(options: options)
        var failure: Error?
        try body(.source(.connected))
        let chunk = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 16, alignment: 16)
        defer { chunk.deallocate() }
        while failure == nil {
            let n = read(fd, chunk.baseAddress, chunk.count)
            if n < 0 {
                if errno == EINTR { continue }
                throw Failure(description: "\(path): read failed: \(String(cString: strerror(errno)))")
            }
            if n == 0 { break }
            decoder.feed(UnsafeRawBufferPointer(rebasing: chunk[0..<n])) { epoch in
                guard failure == nil else { return }
                do { try body(epoch.engineInput) } catch { failure = error }
            }
        }
        if let failure { throw failure }
        decoder.finish { epoch in
            guard failure == nil else { return }
            do { try body(epoch.engineInput) } catch { failure = error }
        }
        if let failure { throw failure }
        try body(.source(.disconnected))
    }
}
