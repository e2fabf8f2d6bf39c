/// The daemon's command line. Parsed by hand: swift-argument-parser would pull
/// FoundationEssentials into the daemon (≈ 3 MiB of resident memory) for five flags.
public struct DaemonOptions: Sendable, Equatable {
    public enum Source: Sendable, Equatable {
        /// gpsd at host:port, read through libgps.
        case gpsd(host: String, port: String)
        /// An NMEA log replayed at `speed`× real time (0 = as fast as possible).
        case replay(path: String, speed: Double, loop: Bool)
    }

    public var socketPath = "/run/locationd/locationd.sock"
    public var source = Source.gpsd(host: "localhost", port: "2947")
    public var logLevel = "info"
    /// SQLite database of region registrations and states; `nil` (`--database none`) keeps them in memory only.
    public var databasePath: String? = "/var/lib/locationd/locationd.db"

    public init() {}

    public static let usage = """
        USAGE: locationd [--socket PATH] [--gpsd HOST[:PORT] | --replay LOG [--speed N] [--loop]]
                         [--log-level LEVEL] [--database PATH|none]

        Location daemon: reads fixes from gpsd (or replays an NMEA log) and serves them to
        subscribers over a Unix socket as JSON lines (see docs/protocol.md).

        OPTIONS:
          --socket PATH       Unix socket to serve (default: /run/locationd/locationd.sock)
          --gpsd HOST[:PORT]  gpsd to read (default: localhost:2947)
          --replay LOG        replay an NMEA 0183 log instead of reading gpsd; the replay
                              starts when the first subscriber subscribes, and the daemon
                              exits when the log ends unless --loop is given
          --speed N           replay at N× real time; 0 = as fast as possible (default: 1)
          --loop              replay the log again and again
          --log-level LEVEL   trace, debug, info, notice, warning, error or critical (default: info)
          --database PATH     SQLite database of region registrations and states
                              (default: /var/lib/locationd/locationd.db; none = memory only)
          --version           print the version
          -h, --help          show this help
        """

    public struct UsageError: Error, CustomStringConvertible, Equatable {
        public var description: String
    }

    public enum Parsed: Equatable { case run(DaemonOptions), help, version }

    public static func parse(_ arguments: [String]) throws(UsageError) -> Parsed {
        var options = DaemonOptions()
        var replayPath: String?
        var speed = 1.0, loop = false, sawGPSD = false, sawSpeed = false
        var i = 0
        func value(_ flag: String) throws(UsageError) -> String {
            i += 1
            guard i < arguments.count else { throw UsageError(description: "\(flag) needs a value") }
            return arguments[i]
        }
        while i < arguments.count {
            let arg = arguments[i]
            switch arg {
            case "-h", "--help": return .help
            case "--version": return .version
            case "--socket":
                options.socketPath = try value(arg)
                guard !options.socketPath.isEmpty else { throw UsageError(description: "--socket needs a path") }
            case "--gpsd":
                let v = try value(arg)
                let parts = v.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
                let host = String(parts[0]), port = parts.count > 1 ? String(parts[1]) : "2947"
                guard !host.isEmpty, let p = Int(port), (1...65535).contains(p) else {
                    throw UsageError(description: "--gpsd '\(v)': expected HOST or HOST:PORT with a port 1…65535")
                }
                options.source = .gpsd(host: host, port: port)
                sawGPSD = true
            case "--replay": replayPath = try value(arg)
            case "--speed":
                let v = try value(arg)
                guard let s = Double(v), s.isFinite, s >= 0 else {
                    throw UsageError(description: "--speed '\(v)': expected a number ≥ 0 (0 = as fast as possible)")
                }
                speed = s
                sawSpeed = true
            case "--loop": loop = true
            case "--database":
                let v = try value(arg)
                guard !v.isEmpty else { throw UsageError(description: "--database needs a path (or none)") }
                options.databasePath = v == "none" ? nil : v
            case "--log-level":
                let v = try value(arg)
                guard Self.logLevels.contains(v) else {
                    throw UsageError(description: "--log-level '\(v)': expected one of \(Self.logLevels.joined(separator: ", "))")
                }
                options.logLevel = v
            default:
                throw UsageError(description: "unknown option '\(arg)'; see locationd --help")
            }
            i += 1
        }
        if let path = replayPath {
            guard !sawGPSD else { throw UsageError(description: "--replay and --gpsd exclude each other") }
            options.source = .replay(path: path, speed: speed, loop: loop)
        } else if sawSpeed || loop {
            throw UsageError(description: "--speed and --loop apply only with --replay")
        }
        return .run(options)
    }

    public static let logLevels = ["trace", "debug", "info", "notice", "warning", "error", "critical"]
}
