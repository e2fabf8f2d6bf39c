import LocationDaemon
import Logging
#if canImport(Glibc)
import Glibc
#endif

// Argument parsing and wiring only; everything else lives in LocationDaemon.
func fail(_ text: String, status: Int32) -> Never {
    let line = "locationd: \(text)\n"
    _ = line.withCString { write(STDERR_FILENO, $0, strlen($0)) }
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
let backend = LogBackend.bootstrap(control: logControl)
let logger = Logger(label: "locationd")
logger.debug("logging", metadata: ["backend": "\(backend)", "config": "\(options.configFile ?? "none")"])

do {
    try await Daemon.run(options, logControl: logControl, logger: logger)
} catch {
    logger.critical("\(error)")
    exit(1)
}
