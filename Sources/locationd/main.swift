import LocationDaemon
import Logging
import SystemdLogging
#if canImport(Glibc)
import Glibc
#endif

// Argument parsing and wiring only; everything else lives in LocationDaemon.
func fail(_ text: String, status: Int32) -> Never {
    LogBackend.startupError(text, identifier: "locationd")
    exit(status)
}

let options: DaemonOptions
do {
    switch try DaemonOptions.parse(Array(CommandLine.arguments.dropFirst())) {
    case .help:
        print(DaemonOptions.usage)
        exit(0)
    case .version:
        print("locationd \(Daemon.version)")
        exit(0)
    case .checkConfig(let checked):
        // Standard error, as errors go: standard output stays the effective configuration.
        for warning in checked.warnings {
            let line = "locationd: warning: \(warning)\n"
            _ = line.withCString { write(STDERR_FILENO, $0, strlen($0)) }
        }
        print("# \(checked.configFile.map { "\($0): valid" } ?? "no config file; defaults"), with command-line flags applied")
        print(ConfigSchema.render(checked), terminator: "")
        exit(0)
    case .run(let parsed):
        options = parsed
    }
} catch {
    fail(error.description, status: error.exitCode)
}

let logControl = LogControl(level: Logger.Level(rawValue: options.logLevel) ?? .info,
                            preciseCoordinates: options.preciseCoordinates)
let backend = LogBackend.bootstrap(identifier: "locationd", control: logControl)
let logger = Logger(label: "locationd")
logger.debug("logging", metadata: ["backend": "\(backend)", "config": "\(options.configFile ?? "none")"])

run(options, logControl: logControl, logger: logger)

/// Runs the daemon on a detached task while the main thread waits, and exits with its outcome.
/// Not top-level `await`: that makes main async, and the runtime then parks the main thread in
/// `dispatch_main()`, which ends it with `pthread_exit` — a forced unwind that reads ≈ 0.4 MiB
/// of the binary's unwind tables into memory at every start (docs/benchmarks.md, "Footprint").
/// Nothing in the daemon runs on the main actor.
func run(_ options: DaemonOptions, logControl: LogControl, logger: Logger) -> Never {
    Task.detached {
        do {
            try await Daemon.run(options, logControl: logControl, logger: logger)
        } catch {
            logger.critical("\(error)")
            LogBackend.exit(Daemon.exitStatus(for: error))
        }
        LogBackend.exit(0)
    }
    while true { pause() }
}
