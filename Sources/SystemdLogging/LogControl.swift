import Logging
import Synchronization

/// Settings every log handler of the process reads on each message, so a reload (SIGHUP) can
/// change them live: the level, and whether coordinates are logged precisely.
public final class LogControl: Sendable {
    private let levelIndex: Atomic<Int>
    private let precise: Atomic<Bool>

    public init(level: Logger.Level = .info, preciseCoordinates: Bool = false) {
        levelIndex = Atomic(Self.index(level))
        precise = Atomic(preciseCoordinates)
    }

    public var level: Logger.Level {
        get { Logger.Level.allCases[levelIndex.load(ordering: .relaxed)] }
        set { levelIndex.store(Self.index(newValue), ordering: .relaxed) }
    }

    public var preciseCoordinates: Bool {
        get { precise.load(ordering: .relaxed) }
        set { precise.store(newValue, ordering: .relaxed) }
    }

    private static func index(_ level: Logger.Level) -> Int { Logger.Level.allCases.firstIndex(of: level) ?? 2 }

    /// A position for a log line. The journal is readable by more people than the socket
    /// (docs/configuration.md, log.precise_coordinates): unless `preciseCoordinates`, rounded to 0.01° (≈ 1.1 km north–south,
    /// less east–west away from the equator) and marked so.
    public func describe(latitude: Double, longitude: Double) -> String {
        if preciseCoordinates { return "\(latitude),\(longitude)" }
        return "\(Self.bucket(latitude)),\(Self.bucket(longitude)) (rounded to 0.01°)"
    }

    static func bucket(_ degrees: Double) -> String {
        let hundredths = Int((degrees * 100).rounded())
        let sign = hundredths < 0 ? "-" : ""
        let m = abs(hundredths)
        let frac = m % 100
        return "\(sign)\(m / 100).\(frac < 10 ? "0" : "")\(frac)"
    }
}

/// A handler's level: its own when set through `Logger.logLevel`, else the process-wide one.
struct SharedLevel {
    let control: LogControl
    var local: Logger.Level?
    var level: Logger.Level {
        get { local ?? control.level }
        set { local = newValue }
    }
}
