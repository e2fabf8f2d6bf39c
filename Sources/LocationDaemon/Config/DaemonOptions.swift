import LocationCore
import NMEA
#if canImport(Glibc)
import Glibc
import TOMLConfig
#endif

/// The daemon's settings: defaults, then the config file (locationd.toml), then command-line
/// flags. Parsed by hand: swift-argument-parser would pull FoundationEssentials into the
/// daemon (≈ 3 MiB of resident memory) for a handful of flags.
public struct DaemonOptions: Sendable, Equatable {
    public enum Source: Sendable, Equatable {
        /// gpsd at host:port, read through libgps.
        case gpsd(host: String, port: String)
        /// An NMEA log replayed at `speed`× real time (0 = as fast as possible), decoded with
        /// `decoding` (`replay.date`, `replay.as_gpsd`).
        case replay(path: String, speed: Double, loop: Bool, decoding: NMEADecoder.Options = .init())

        /// A receiver reporting as it goes (its silence is news), not a log.
        public var isLive: Bool { if case .gpsd = self { true } else { false } }
    }

    public static let defaultConfigPath = "/etc/locationd/locationd.toml"

    // [socket]
    public var socketPath = "/run/locationd/locationd.sock"
    public var floodBurst = 200
    public var floodRate = 100.0
    public var unwritableTimeout = 30.0
    public var maxConnectionsPerUser = 256
    // [gpsd]
    public var gpsdHost = "localhost"
    public var gpsdPort = 2947
    /// The one device of gpsd's to read (its path as gpsd names it); empty: every device.
    public var gpsdDevice = ""
    // [replay]
    /// Empty: read gpsd.
    public var replayFile = ""
    public var replaySpeed = 1.0
    public var replayLoop = false
    /// `YYYY-MM-DD`: the date of a log's positions before its first RMC or ZDA; empty: none.
    public var replayDate = ""
    /// Decode the log as gpsd 3.20–3.22 reports it (`NMEADecoder.Options.asGPSD`).
    public var replayAsGPSD = false
    // [log]
    public var logLevel = "info"
    /// Log coordinates as received; off: rounded to 0.01° (≈ 1 km), see docs/configuration.md, log.precise_coordinates.
    public var preciseCoordinates = false
    // [regions]
    /// Regions evaluated per fix per program (the rest rotate in by distance); 0 = all.
    public var regionsMaxActive = 20
    /// Regions one program may register.
    public var regionsMaxRegistered = 10_000
    public var regionsMaxRegisteredPerUser = 20_000
    // [store]
    /// SQLite database of region registrations and states; "" or "none": memory only.
    public var database = "/var/lib/locationd/locationd.db"
    /// Background events kept per program while it is away; beyond it the oldest are dropped
    /// and the program is told by an `overflow` event (docs/protocol.md, "Background delivery").
    public var queueLimit = 10_000
    /// Places kept per program (docs/places.md): past it a new place drops the least visited.
    public var maxPlaces = PlaceBook.defaultLimit
    /// Recent visits kept per program (docs/places.md): past it the oldest is dropped.
    public var maxVisits = VisitHistory.defaultLimit
    /// GeoNames dump whose nearest populated place visit and significant events carry
    /// (docs/places.md); "": none.
    public var gazetteer = ""
    /// Programs of one user that may keep background monitoring, and so a queue, while away.
    public var maxBackgroundProgramsPerUser = Hub.defaultMaxBackgroundProgramsPerUser
    // [gpsd_server]
    /// `ADDRESS:PORT` to serve gpsd's protocol on (docs/compatibility.md); empty: off.
    public var gpsdServerListen = ""
    /// Whether `gpsdServerListen` may be off loopback (its peers then get the default rule).
    public var gpsdServerAllowNonLoopback = false
    // [nmea_server]
    /// Unix socket serving GGA and RMC for GeoClue (docs/compatibility.md); empty: off.
    public var nmeaServerSocket = ""
    // [daemon]
    /// Bound on the graceful shutdown after SIGTERM, seconds; then the stop is abandoned (exit 1).
    public var shutdownTimeout = 5.0
    // [systemd]
    /// Send WATCHDOG=1 when the service manager asks for it (WatchdogSec=).
    public var watchdog = true
    /// A fixed seed for the approximate-location grid (`--privacy-seed`); nil: the secret file.
    public var privacySeed: UInt64?
    /// Access rules, `[policy.NAME]` tables (docs/privacy.md); a reload applies them live.
    public var policy = Policy()

    /// The config file these options were read from, if any.
    public var configFile: String?
    /// What the config file says that is taken but likely a mistake (a rule's executable that
    /// does not exist), `FILE:LINE: …`: printed by --check-config, logged at start and reload.
    /// Not part of the configuration (`==` leaves it out).
    public var warnings: [ConfigError] = []
    /// The command line (reparsed on reload so flags keep overriding the file).
    public var arguments: [String] = []

    public init() {}

    public var regionLimits: RegionMonitor.Limits {
        RegionMonitor.Limits(maxActive: regionsMaxActive == 0 ? nil : regionsMaxActive, maxRegistered: regionsMaxRegistered)
    }

    /// The store's file, or nil to keep registrations in memory only ("", "none", or SQLite's
    /// own ":memory:", which would otherwise take a lock file and a privacy-secret in the working
    /// directory).
    public var databasePath: String? { database.isEmpty || database == "none" || database == ":memory:" ? nil : database }

    /// Where gpsd's protocol is served, nil when it is not.
    public var gpsdServerAddress: ListenAddress? { try? ListenAddress.parse(gpsdServerListen).get() }

    /// Why `gpsdServerListen` may not be served: an address off loopback the config has not allowed.
    var gpsdServerProblem: String? {
        guard let address = gpsdServerAddress, !address.isLoopback, !gpsdServerAllowNonLoopback else { return nil }
        return "\(gpsdServerListen) is not a loopback address: gpsd's clients are identified only on loopback, so locationd serves them elsewhere only with [gpsd_server] allow_non_loopback = true, and every such client then gets [policy.default]"
    }

    /// Why `replay.date` / `--date` is not a date, nil when it is one or empty (none).
    static func replayDateProblem(_ text: String) -> String? {
        guard !text.isEmpty, case .failure(let why) = NMEAReplay.parseDate(text) else { return nil }
        return why.description
    }

    public var source: Source {
        replayFile.isEmpty ? .gpsd(host: gpsdHost, port: String(gpsdPort))
                           : .replay(path: replayFile, speed: replaySpeed, loop: replayLoop,
                                     decoding: NMEADecoder.Options(assumedDate: try? NMEAReplay.parseDate(replayDate).get(),
                                                                   asGPSD: replayAsGPSD))
    }

    public static let usage = """
        USAGE: locationd [--config FILE] [--socket PATH] [--gpsd HOST[:PORT] | --replay LOG [--speed N] [--loop] [--date YYYY-MM-DD] [--as-gpsd]]
                         [--gpsd-listen ADDRESS:PORT] [--nmea-socket PATH]
                         [--log-level LEVEL] [--database PATH|none] [--privacy-seed N]
               locationd --check-config [FILE]

        Location daemon: reads fixes from gpsd (or replays an NMEA log) and serves them to
        subscribers over a Unix socket as JSON lines (docs/protocol.md). Settings come from
        the config file, then from these flags (flags win). Under systemd it speaks the notify
        protocol (READY, STATUS, WATCHDOG, RELOADING, STOPPING), accepts a socket-activated
        socket and logs to the journal (docs/systemd.md).

        OPTIONS:
          --config FILE       read settings from FILE (default: \(defaultConfigPath)
                              when it exists; every option: docs/configuration.md)
          --check-config [FILE]
                              validate the config (FILE or the one --config/default names)
                              with the other flags applied, print the effective settings
                              and exit: 0 when valid, 78 with FILE:LINE: problem otherwise
          --socket PATH       Unix socket to serve (default: /run/locationd/locationd.sock);
                              ignored when systemd passes a socket (locationd.socket)
          --gpsd HOST[:PORT]  gpsd to read (default: localhost:2947); an IPv6 address in
                              brackets with a port: [::1]:2947
          --gpsd-listen ADDRESS:PORT
                              serve gpsd's protocol to gpsd's clients (cgps, gpspipe,
                              libgps, Python's gps) on a loopback address, e.g.
                              127.0.0.1:2948 (default: off; docs/compatibility.md)
          --nmea-socket PATH  serve GGA and RMC sentences for GeoClue on a Unix socket
                              (default: off; docs/compatibility.md)
          --replay LOG        replay an NMEA 0183 log instead of reading gpsd (- = standard
                              input); it must open for reading at start (exit 64, or 78
                              for the file's replay.file). The replay starts when the first
                              subscriber subscribes, and the daemon exits when the log ends
                              unless --loop is given
          --speed N           replay at N× real time; 0 = as fast as possible (default: 1)
          --loop              replay the log again and again
          --date YYYY-MM-DD   the UTC date of the log's positions before its first RMC or
                              ZDA sentence (a GGA/GLL-only log), which are skipped otherwise
          --as-gpsd           decode the log as gpsd 3.20–3.22 reports it: dates before
                              2017 move forward 1024 weeks, accuracy from the DOPs alone
                              (HDOP × 19 m), a GST's estimate ignored (as locationctl
                              replay --as-gpsd)
          --log-level LEVEL   trace, debug, info, notice, warning, error or critical (default: info)
          --database PATH     SQLite database of region registrations and states
                              (default: /var/lib/locationd/locationd.db; none = memory only)
          --privacy-seed N    derive the approximate-location grid from N instead of the
                              secret in the state directory (replays and tests only)
          --version           print the version
          -h, --help          show this help

        SIGNALS:
          SIGTERM, SIGINT     stop gracefully (STOPPING=1), within [daemon] shutdown_timeout
          SIGHUP              reload the config file (RELOADING=1): the access policy
                              ([policy.NAME]), log.level and log.precise_coordinates apply
                              at once; other changes are logged as needing a restart.
                              locationctl reload asks for the same reload on the socket and
                              waits for its outcome

        ENVIRONMENT (set by systemd):
          NOTIFY_SOCKET, WATCHDOG_USEC, WATCHDOG_PID, LISTEN_FDS, LISTEN_PID,
          LISTEN_FDNAMES, JOURNAL_STREAM

        EXIT STATUS: 0 stopped, 1 failed (the unit restarts it), 64 bad flags, 78 bad config
        file or a file or directory it names that only an administrator can mend (database,
        privacy secret, socket directory), 75 a policy user or group the user database could
        not look up for now (the unit restarts it).
        """

    /// Why the options could not be made.
    public enum Failure: Error, Equatable, CustomStringConvertible {
        /// A bad command line (exit 64, EX_USAGE).
        case usage(String)
        /// A bad config file (exit 78, EX_CONFIG), or one naming what could not be looked up
        /// for now (exit 75, EX_TEMPFAIL: `ConfigError.temporary`).
        case config(ConfigError)

        public var description: String {
            switch self {
            case .usage(let s): s
            case .config(let e): e.description
            }
        }
        public var exitCode: Int32 {
            switch self {
            case .usage: 64
            case .config(let e): e.temporary ? 75 : 78
            }
        }
    }

    public enum Parsed: Equatable { case run(DaemonOptions), checkConfig(DaemonOptions), help, version }

    /// Reads a file; nil when it does not exist. Injectable for tests.
    public typealias FileReader = (String) throws(ConfigError) -> String?
    /// Why the replay log at a path cannot be read, nil when it can (`replayProblem(_:)`).
    /// Injectable for tests.
    public typealias ReplayCheck = (String) -> String?

    /// Parses the command line, reads the config file it names (or `defaultConfigPath` when that
    /// exists) and applies the flags on top. A replay log that cannot be opened for reading is
    /// refused here, at start and by `--check-config`, not when the first subscriber starts it.
    public static func parse(_ arguments: [String], defaultConfigPath: String = defaultConfigPath,
                             readFile: FileReader = readTextFile,
                             replayProblem: ReplayCheck = replayProblem,
                             users: (String) throws(Policy.LookupFailure) -> UInt32? = Policy.lookUpUser,
                             groups: (String) throws(Policy.LookupFailure) -> UInt32? = Policy.lookUpGroup) throws(Failure) -> Parsed {
        var flags: [(inout DaemonOptions) -> Void] = []
        var configPath: String?
        // Which option named the file, for the fix when it does not exist.
        var configFlag = "--config"
        var check = false
        var sawReplay = false, sawGPSD = false, sawReplayOption = false, sawGPSDListen = false
        var i = 0
        func value(_ flag: String) throws(Failure) -> String {
            i += 1
            guard i < arguments.count else { throw .usage("\(flag) needs a value") }
            // `--socket --database x` would otherwise make "--database" the socket's path and
            // then fail on "x" as an unknown option, naming neither mistake. A single dash is no
            // option: "-" is standard input for --replay, "-1" a number the flag's check refuses.
            let next = arguments[i]
            if next.hasPrefix("--") || next == "-h" {
                throw .usage("\(flag) needs a value before the option '\(next)' (a path that starts with '-' is written ./\(next))")
            }
            return next
        }
        while i < arguments.count {
            let arg = arguments[i]
            switch arg {
            case "-h", "--help": return .help
            case "--version": return .version
            case "--config":
                configPath = try value(arg)
                configFlag = arg
            case "--check-config":
                check = true
                if i + 1 < arguments.count, !arguments[i + 1].hasPrefix("-") {
                    i += 1
                    configPath = arguments[i]
                    configFlag = arg
                }
            case "--socket":
                let path = try value(arg)
                guard !path.isEmpty else { throw .usage("--socket needs a path") }
                guard path.utf8.count <= ConfigSchema.socketPathMaxBytes else {
                    throw .usage("--socket '\(path)' is \(path.utf8.count) bytes long; at most \(ConfigSchema.socketPathMaxBytes) (a Unix socket address holds 108 bytes with its terminating NUL): choose a shorter path")
                }
                flags.append { $0.socketPath = path }
            case "--gpsd":
                let v = try value(arg)
                guard let (host, port) = Self.hostAndPort(v), let p = Int(port), (1...65535).contains(p) else {
                    let ipv6 = !v.hasPrefix("[") && v.filter({ $0 == ":" }).count > 1 ? " ('\(v)' is not an IPv6 address: \(Self.ipv6Hint))" : ""
                    throw .usage("--gpsd '\(v)': expected HOST, HOST:PORT, [IPv6] or [IPv6]:PORT with a port 1…65535\(ipv6)")
                }
                flags.append { $0.gpsdHost = host; $0.gpsdPort = p; $0.replayFile = "" }
                sawGPSD = true
            case "--gpsd-listen":
                let v = try value(arg)
                if case .failure(let e) = ListenAddress.parse(v) { throw .usage("--gpsd-listen '\(v)': \(e.message)") }
                flags.append { $0.gpsdServerListen = v }
                sawGPSDListen = true
            case "--nmea-socket":
                let path = try value(arg)
                guard !path.isEmpty, path.utf8.count <= ConfigSchema.socketPathMaxBytes else {
                    throw .usage("--nmea-socket needs a path of at most \(ConfigSchema.socketPathMaxBytes) bytes")
                }
                flags.append { $0.nmeaServerSocket = path }
            case "--replay":
                let path = try value(arg)
                guard !path.isEmpty else { throw .usage("--replay needs a path") }
                flags.append { $0.replayFile = path }
                sawReplay = true
            case "--speed":
                let v = try value(arg)
                guard let s = Double(v), s.isFinite, s >= 0 else {
                    throw .usage("--speed '\(v)': expected a number ≥ 0 (0 = as fast as possible)")
                }
                flags.append { $0.replaySpeed = s }
                sawReplayOption = true
            case "--loop":
                flags.append { $0.replayLoop = true }
                sawReplayOption = true
            case "--date":
                let v = try value(arg)
                if let problem = Self.replayDateProblem(v) { throw .usage("--date '\(v)': \(problem)") }
                flags.append { $0.replayDate = v }
                sawReplayOption = true
            case "--as-gpsd":
                flags.append { $0.replayAsGPSD = true }
                sawReplayOption = true
            case "--database":
                let v = try value(arg)
                guard !v.isEmpty else { throw .usage("--database needs a path (or none)") }
                flags.append { $0.database = v }
            case "--privacy-seed":
                let v = try value(arg)
                guard let n = UInt64(v) else { throw .usage("--privacy-seed '\(v)': expected an integer 0…18446744073709551615") }
                flags.append { $0.privacySeed = n }
            case "--log-level":
                let v = try value(arg)
                guard logLevels.contains(v) else {
                    throw .usage("--log-level '\(v)': expected one of \(logLevels.joined(separator: ", "))")
                }
                flags.append { $0.logLevel = v }
            default:
                throw .usage("unknown option '\(arg)'; see locationd --help")
            }
            i += 1
        }
        if sawReplay && sawGPSD { throw .usage("--replay and --gpsd exclude each other") }

        var options = DaemonOptions()
        let path = configPath ?? defaultConfigPath
        let text: String?
        do { text = try readFile(path) } catch { throw .config(error) }
        var replayLine = 0, listenLine = 0
        // A lookup the user database did not answer (75, restarted) is reported last: any
        // mistake below is for good (64, 78) and is the one to name.
        var unanswered: ConfigError?
        if let text {
            do {
                let document = try TOMLDocument.parse(text, file: path)
                replayLine = document.entries.last { $0.table == "replay" && $0.key == "file" }?.line ?? 0
                listenLine = document.entries.last { $0.table == "gpsd_server" && $0.key == "listen" }?.line ?? 0
                do { try ConfigSchema.apply(document, file: path, to: &options, users: users, groups: groups) } catch where error.temporary { unanswered = error }
            } catch {
                throw .config(error)
            }
            options.configFile = path
        } else if configPath != nil {
            let leaveOut = configFlag == "--config" ? "leave out --config to use \(defaultConfigPath) when it exists"
                                                    : "leave out the path to check \(defaultConfigPath)"
            throw .config(ConfigError(file: path, line: 0, message: "no such file; give the path of an existing file, or \(leaveOut)"))
        }
        for flag in flags { flag(&options) }
        if let problem = options.gpsdServerProblem {
            if sawGPSDListen { throw .usage("--gpsd-listen: \(problem)") }
            throw .config(ConfigError(file: path, line: listenLine, message: "'gpsd_server.listen': \(problem)"))
        }
        if sawReplayOption && options.replayFile.isEmpty {
            throw .usage("--speed, --loop, --date and --as-gpsd apply only with --replay (or replay.file in the config)")
        }
        if options.replayLoop && options.replayFile == "-" {
            throw .usage("--loop cannot replay standard input ('-'): it can be read once; give the log's path")
        }
        if !options.replayFile.isEmpty, let problem = replayProblem(options.replayFile) {
            let why = "cannot open it for reading: \(problem)"
            if sawReplay {
                throw .usage("--replay '\(options.replayFile)': \(why); give the path of a readable NMEA log, or - for standard input")
            }
            throw .config(ConfigError(file: path, line: replayLine,
                                      message: "'replay.file' is \(TOMLValue.string(options.replayFile)): \(why); give the path of a readable NMEA log, or \"\" to read gpsd"))
        }
        if let unanswered { throw .config(unanswered) }
        options.arguments = arguments
        return check ? .checkConfig(options) : .run(options)
    }

    /// Re-reads the config file and reapplies the flags this daemon was started with. A changed
    /// replay log must be readable (it applies at the next start); the one replaying is not
    /// looked at again.
    public func reloaded(defaultConfigPath: String = defaultConfigPath, readFile: FileReader = readTextFile,
                         replayProblem: @escaping ReplayCheck = replayProblem) throws(Failure) -> DaemonOptions {
        let replaying = replayFile
        let check: ReplayCheck = { $0 == replaying ? nil : replayProblem($0) }
        switch try Self.parse(arguments, defaultConfigPath: defaultConfigPath, readFile: readFile, replayProblem: check) {
        case .run(let o), .checkConfig(let o): return o
        case .help, .version: return self
        }
    }

    /// Reads a whole file with plain POSIX calls (no Foundation in the daemon).
    /// `HOST[:PORT]`, with an IPv6 address in brackets (`[::1]:2947`, as in URLs) or bare
    /// (`::1`, no port); the port defaults to gpsd's 2947. Nil when the host is empty or the
    /// brackets do not close.
    static func hostAndPort(_ text: String) -> (host: String, port: String)? {
        var host: Substring, port: Substring = "2947"
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            host = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            if !rest.isEmpty {
                guard rest.hasPrefix(":") else { return nil }
                port = rest.dropFirst()
            }
        } else if text.filter({ $0 == ":" }).count > 1 {
            // A bare IPv6 address (no port), with an optional %zone; anything else with two
            // colons is a mistake, not an address: taken as a host name, "1.2.3.4:2947:1" would
            // never resolve.
            guard isIPv6Address(text) else { return nil }
            host = text[...]
        } else {
            let parts = text.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
            host = parts[0]
            if parts.count > 1 { port = parts[1] }
        }
        return host.isEmpty ? nil : (String(host), String(port))
    }

    /// Whether `text` is an IPv6 address as getaddrinfo takes it: the address (inet_pton) and an
    /// optional `%zone`, an interface name (no ':', '/' or blank in one, as Linux's
    /// `dev_valid_name` says, at most 15 bytes) or index: "fe80::1%lo:2947" is a port written
    /// without brackets, which would be taken as part of the zone and dropped.
    static func isIPv6Address(_ text: String) -> Bool {
        let parts = text.split(separator: "%", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 1 || (!parts[1].isEmpty && parts[1].utf8.count <= 15
                                   && !parts[1].contains { $0 == ":" || $0 == "/" || $0.isWhitespace }) else { return false }
        var address = in6_addr()
        return inet_pton(AF_INET6, String(parts[0]), &address) == 1
    }

    /// What to write for a text with colons that is no IPv6 address.
    static let ipv6Hint = "an IPv6 address is written alone (::1), and with a port in brackets ([::1]:2947)"

    /// Why `host` is not a `gpsd.host` (a name or an address alone), with what to write; nil
    /// when it is one. The `--gpsd` forms with a port or brackets would be taken as a host
    /// name, which never resolves.
    @Sendable static func hostProblem(_ host: String) -> String? {
        guard let (name, port) = hostAndPort(host) else {
            if !host.hasPrefix("["), host.filter({ $0 == ":" }).count > 1 {
                return "not an IPv6 address; expected a host name, an IPv4 or an IPv6 address alone, e.g. host = \"::1\" (the port goes in 'gpsd.port')"
            }
            return "expected a host name, an IPv4 or an IPv6 address (the port goes in 'gpsd.port')"
        }
        guard name != host else { return nil }
        // A port gpsd.port would refuse is not suggested for it, nor written as TOML refuses it.
        guard let number = Int(port), (1...65535).contains(number), hostAndPort(name)?.host == name else {
            return "expected a host name, an IPv4 or an IPv6 address (the port goes in 'gpsd.port')"
        }
        return "give the host alone, without brackets or a port: host = \(TOMLValue.string(name))"
            // The number, not the text: "02947" (a leading zero) is no TOML integer.
            + (host.hasSuffix(":" + port) ? " (and port = \(number))" : "")
    }

    /// Why the NMEA log at `path` cannot be replayed, nil when it opens for reading ("-" is
    /// standard input). Opened without waiting (a FIFO's writer may come later) and closed again.
    public static func replayProblem(_ path: String) -> String? { replayProblem(path, unitHides: unitHides) }

    /// `unitHides`: whether the unit running the daemon hides a directory (`unitHides(_:)`).
    static func replayProblem(_ path: String, unitHides: (String) -> Bool) -> String? {
        guard path != "-" else { return nil }
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else {
            let code = errno
            // A link (or a directory on the way that is one) into a hidden directory too: the
            // path alone names none ("/var/lib/locationd/drive.nmea" linked to a home directory).
            if code == ENOENT || code == EACCES {
                if let hidden = hiddenByTheUnit(path, unitHides: unitHides) {
                    return "\(code == ENOENT ? "no such file" : "permission denied"), as the daemon sees it: \(hidden); copy the log to /var/lib/locationd (the unit's state directory) and name that"
                }
            }
            switch code {
            case ENOENT:
                guard !path.hasPrefix("/") else { return "no such file" }
                var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
                let directory = getcwd(&buffer, buffer.count).map { String(cString: $0) } ?? "?"
                return "no such file (a relative path is taken from the working directory, \(directory))"
            case EACCES:
                let user = Database.currentUser()
                return "permission denied for user \(user.name), uid \(user.uid) (the file, or a directory on its path, is not readable by it)"
            default:
                return String(cString: strerror(code))
            }
        }
        defer { close(fd) }
        var st = stat()
        if fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFDIR { return "it is a directory" }
        return nil
    }

    /// Why a file at `path` may exist and yet not for the daemon under the shipped unit, whose
    /// ProtectHome=yes empties /home, /root and /run/user for it and PrivateTmp=yes gives it a /tmp
    /// and /var/tmp of its own; nil for other paths. (A log in a home directory "did not exist".)
    /// The reason only: the caller adds its fix. `unitHides(dir)` says whether the unit really does: INVOCATION_ID alone is no sign (every
    /// process a service starts inherits it, a shell in a terminal that runs as one too, and
    /// another unit may not hide them), and the hint must not name ProtectHome= for a file a user's
    /// shell simply lacks.
    /// A path that leads there through a symbolic link (itself, or a directory on the way)
    /// counts too, saying where it leads: the path alone names none.
    static func hiddenByTheUnit(_ path: String, unitHides: (String) -> Bool) -> String? {
        func hidden(_ path: String) -> String? {
            func under(_ dir: String) -> Bool { path == dir || path.hasPrefix(dir + "/") }
            if let dir = ["/home", "/root", "/run/user"].first(where: under), unitHides(dir) {
                return "the unit's ProtectHome=yes hides \(dir) from locationd"
            }
            if let dir = ["/tmp", "/var/tmp"].first(where: under), unitHides(dir) {
                return "the unit's PrivateTmp=yes gives locationd a \(dir) of its own"
            }
            return nil
        }
        if let reason = hidden(path) { return reason }
        let target = throughLinks(path)
        return hidden(target).map { "it leads to \(target), and \($0)" }
    }

    /// Whether the service running this process hides `dir` from it: under systemd
    /// (INVOCATION_ID, set for every service), ProtectHome=yes lays an inaccessible directory
    /// (mode 0000) over /home, /root and /run/user, and PrivateTmp=yes mounts the unit's own
    /// /tmp/systemd-private-… directory on /tmp and /var/tmp (/proc/self/mountinfo's root field).
    static func unitHides(_ dir: String) -> Bool {
        guard getenv("INVOCATION_ID") != nil else { return false }
        guard dir == "/tmp" || dir == "/var/tmp" else {
            var st = stat()
            return stat(dir, &st) == 0 && st.st_mode & 0o7777 == 0
        }
        guard let bytes = try? readBytes("/proc/self/mountinfo") else { return false }
        // ID PARENT MAJOR:MINOR ROOT MOUNT-POINT …
        return bytes.split(separator: UInt8(ascii: "\n")).contains { line in
            let fields = line.split(separator: UInt8(ascii: " "))
            return fields.count > 4 && fields[4].elementsEqual(dir.utf8)
                // A byte search, not String's contains: that is _StringProcessing's, which the
                // daemon would link for it (docs/benchmarks.md, "Footprint").
                && GPSDMessage.firstRange(of: "/systemd-private-", in: Substring(decoding: fields[3], as: UTF8.self)) != nil
        }
    }

    /// `path` made absolute (from the working directory) with its symbolic links followed as
    /// far as they can be read; the part from the first name that cannot be looked up on is
    /// kept as written. Where a link leads when what it leads to is out of sight.
    static func throughLinks(_ path: String) -> String {
        var pending = path.split(separator: "/").map(String.init)
        var resolved: [String] = []
        if !path.hasPrefix("/") {
            var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
            if let cwd = getcwd(&buffer, buffer.count) { resolved = String(cString: cwd).split(separator: "/").map(String.init) }
        }
        var links = 0
        while !pending.isEmpty {
            let name = pending.removeFirst()
            if name == "." { continue }
            if name == ".." { _ = resolved.popLast(); continue }
            let candidate = "/" + (resolved + [name]).joined(separator: "/")
            var st = stat()
            guard lstat(candidate, &st) == 0 else { resolved += [name] + pending; break }
            guard st.st_mode & S_IFMT == S_IFLNK, links < 40 else { resolved.append(name); continue }
            links += 1
            var buffer = [UInt8](repeating: 0, count: Int(PATH_MAX) + 1)
            let n = buffer.withUnsafeMutableBufferPointer { readlink(candidate, $0.baseAddress!, $0.count - 1) }
            guard n > 0 else { resolved.append(name); continue }
            let target = String(decoding: buffer[..<n], as: UTF8.self)
            if target.hasPrefix("/") { resolved = [] }
            pending = target.split(separator: "/").map(String.init) + pending
        }
        return "/" + resolved.joined(separator: "/")
    }

    /// `unreadableFix`: as `readBytes`'s.
    public static func readFile(_ path: String, unreadableFix: String? = nil) throws(ConfigError) -> String? {
        try readBytes(path, unreadableFix: unreadableFix).map { String(decoding: $0, as: UTF8.self) }
    }

    /// `readFile` for text a person wrote (the config file): bytes that are not UTF-8 are an
    /// error naming their line, not replaced (a Latin-1 executable path would otherwise be
    /// accepted and never match anything).
    public static func readTextFile(_ path: String) throws(ConfigError) -> String? {
        let inside = path.hasSuffix("/") ? "\(path)locationd.toml" : "\(path)/locationd.toml"
        guard let bytes = try readBytes(path, unreadableFix: "make it readable by the daemon's user (chmod 0644, as installed)",
                                        directoryFix: "not a config file; give the file's path (such as \(inside))") else { return nil }
        if let text = String(validating: bytes, as: UTF8.self) { return text }
        var iterator = bytes.makeIterator()
        var decoder = UTF8()
        var line = 1
        while case .scalarValue(let scalar) = decoder.decode(&iterator) {
            if scalar == "\n" { line += 1 }
        }
        throw ConfigError(file: path, line: line, message: "not UTF-8 text; save the file as UTF-8")
    }

    /// The file's bytes (at most 1 MiB), nil when it does not exist. With `unreadableFix`, a file
    /// this process may not read is explained: its user, and the directory on the way it may not
    /// enter or else `unreadableFix`. With `directoryFix`, a directory is said to be one, with
    /// that fix, rather than as read(2)'s bare "Is a directory".
    static func readBytes(_ path: String, unreadableFix: String? = nil, directoryFix: String? = nil) throws(ConfigError) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            let code = errno
            if code == ENOENT { return nil }
            guard code == EACCES, let unreadableFix else {
                throw ConfigError(file: path, line: 0, message: String(cString: strerror(code)))
            }
            let user = Database.currentUser()
            func blocked(_ dir: String, through: String) -> ConfigError? {
                guard let blocked = Database.unsearchable(dir) else { return nil }
                let shown = blocked == "." ? Database.workingDirectory() : blocked
                return ConfigError(file: path, line: 0, message: "cannot be read: the directory \(shown)\(through) cannot be entered by user \(user.name), uid \(user.uid) (no search permission); let the daemon's user search it (chmod o+x, or g+x for a group it is in)")
            }
            if let error = blocked(Database.directory(of: path), through: "") { throw error }
            // Through a symbolic link: the directories on the way to its target count too (a
            // chmod of the file, which is readable, would not help).
            if let error = blocked(Database.directory(of: throughLinks(path)), through: " (on the way through the symbolic link \(path))") { throw error }
            throw ConfigError(file: path, line: 0, message: "cannot be read by user \(user.name), uid \(user.uid) (permission denied); \(unreadableFix)")
        }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n == 0 { break }
            if n < 0 {
                if errno == EINTR { continue }
                if errno == EISDIR, let directoryFix { throw ConfigError(file: path, line: 0, message: "is a directory, \(directoryFix)") }
                throw ConfigError(file: path, line: 0, message: String(cString: strerror(errno)))
            }
            bytes.append(contentsOf: chunk[0..<n])
            if bytes.count > 1 << 20 { throw ConfigError(file: path, line: 0, message: "larger than 1 MiB") }
        }
        return bytes
    }

    public static let logLevels = ["trace", "debug", "info", "notice", "warning", "error", "critical"]

    public static func == (a: DaemonOptions, b: DaemonOptions) -> Bool {
        ConfigSchema.changes(from: a, to: b).isEmpty && a.configFile == b.configFile && a.policy == b.policy && a.privacySeed == b.privacySeed
    }
}
