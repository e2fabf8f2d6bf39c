import LocationDaemon
import Logging
#if canImport(Glibc)
import Glibc
#endif

// Argument parsing and wiring only; everything else lives in LocationDaemon.
let options: DaemonOptions
do {
    switch try DaemonOptions.parse(Array(CommandLine.arguments.dropFirst())) {
    case .help:
        print(DaemonOptions.usage)
        exit(0)
    case .version:
        print("locationd \(Daemon.version)")
        exit(0)
    case .run(let parsed):
        options = parsed
    }
} catch {
    let text = "locationd: \(error)\n"
    _ = text.withCString { write(STDERR_FILENO, $0, strlen($0)) }
    exit(64)  // EX_USAGE
}

LoggingSystem.bootstrap { label in
    var handler = StreamLogHandler.standardError(label: label)
    handler.logLevel = Logger.Level(rawValue: options.logLevel) ?? .info
    return handler
}
let logger = Logger(label: "locationd")

do {
    try await Daemon.run(options, logger: logger)
} catch {
    logger.critical("\(error)")
    exit(1)
}
