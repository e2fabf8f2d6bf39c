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
    /// `.noFix`; none for a position without a date, `NMEAEpoch.engineInput`), then
    /// `.source(.disconnected)` at the end of the file. Returns the decoder's statistics, whose
    /// `undatedFixes` a caller names to its user (a GGA/GLL-only log needs
    /// `options.assumedDate`).
    @discardableResult
    public static func inputs(
        fromFile path: String, options: NMEADecoder.Options = .init(),
        _ body: (EngineInput) throws -> Void
    ) throws -> NMEAStatistics {
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
                guard let input = epoch.engineInput else { return }
                do { try body(input) } catch { failure = error }
            }
        }
        if let failure { throw failure }
        decoder.finish { epoch in
            guard failure == nil else { return }
            guard let input = epoch.engineInput else { return }
            do { try body(input) } catch { failure = error }
        }
        if let failure { throw failure }
        try body(.source(.disconnected))
        return decoder.statistics
    }

    /// What a replay tells its user when `statistics.undatedFixes` positions were skipped for
    /// want of a date; `remedy` names how to give one (the flag or key).
    public static func undatedWarning(path: String, count: Int, remedy: String) -> String {
        "\(path): \(count) position\(count == 1 ? "" : "s") had no date (no RMC or ZDA sentence dated them: a GGA/GLL-only log, or the positions before its first date) and \(count == 1 ? "was" : "were") not replayed; \(remedy)"
    }

    /// A date as `YYYY-MM-DD` for `NMEADecoder.Options.assumedDate`, or why it is not one
    /// (its year within `NMEADecoder.datableYears`, as a ZDA's), that reason without the text,
    /// for the caller to name the flag or key and the value.
    public static func parseDate(_ text: String) -> Result<CivilTime, Failure> {
        let bad = Failure(description: "expected a date as YYYY-MM-DD (UTC), e.g. 2012-01-19")
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0].count == 4, parts[1].count == 2, parts[2].count == 2,
              parts.allSatisfy({ $0.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 } }),
              let y = Int(parts[0]), let m = Int(parts[1]), let d = Int(parts[2]) else { return .failure(bad) }
        let years = NMEADecoder.datableYears
        guard years.contains(y) else {
            return .failure(Failure(description: "year \(y) is out of range; expected \(years.lowerBound)…\(years.upperBound)"))
        }
        guard validDays(y, m, d) != nil else {
            return .failure(Failure(description: "there is no such day; expected a date as YYYY-MM-DD (UTC)"))
        }
        return .success(CivilTime(year: y, month: m, day: d))
    }
}
