// locationd-mqtt: publishes what locationd delivers to an MQTT broker as OwnTracks JSON
// (docs/mqtt.md). Argument parsing and wiring only; the mapping is in the OwnTracks module.
import Glibc
import Logging
import OwnTracks
import SystemdLogging
import TOMLConfig

let usage = """
    usage: locationd-mqtt [--config FILE] [--socket PATH] [--broker HOST:PORT] [--topic owntracks/USER/DEVICE]
                          [--status-file PATH] [--log-level LEVEL]
           locationd-mqtt --check-config [--config FILE] [...]
           locationd-mqtt --status [--status-file PATH]
    Publishes locationd's locations, region transitions and visits to an MQTT broker in OwnTracks
    JSON, at least once (docs/mqtt.md). Options override the config file (default \(BridgeConfig.defaultPath)).
    """

/// Before logging is set up: a refused option or file, on stderr.
func fail(_ message: String, status: Int32) -> Never {
    LogBackend.startupError(message, identifier: "locationd-mqtt")
    exit(status)
}

/// The whole file, or nil when it does not exist; other errors are fatal (exit 78, EX_CONFIG).
func readFile(_ path: String, what: String) -> String? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    if fd < 0 {
        if errno == ENOENT { return nil }
        fail("\(path): cannot read the \(what): \(String(cString: strerror(errno)))", status: 78)
    }
    defer { close(fd) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65_536)
    while true {
        let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n < 0 && errno == EINTR { continue }
        if n < 0 { fail("\(path): cannot read the \(what): \(String(cString: strerror(errno)))", status: 78) }
        if n == 0 { break }
        bytes += chunk[0..<n]
        if bytes.count > 1 << 20 { fail("\(path): the \(what) is larger than 1 MiB", status: 78) }
    }
    return String(decoding: bytes, as: UTF8.self)
}

var arguments = Array(CommandLine.arguments.dropFirst())
var configPath: String?
var overrides: [(String, String)] = []
var statusPath = "/run/locationd-mqtt/status.json"
var showStatus = false
var checkOnly = false
var logLevel = Logger.Level.info
while !arguments.isEmpty {
    let flag = arguments.removeFirst()
    func value() -> String {
        guard !arguments.isEmpty, !arguments[0].hasPrefix("--") else { fail("\(flag) needs a value\n\(usage)", status: 64) }
        return arguments.removeFirst()
    }
    switch flag {
    case "-h", "--help": print(usage); exit(0)
    case "--version": print("locationd-mqtt 0.1.0"); exit(0)
    case "--config": configPath = value()
    case "--socket", "--broker", "--topic": overrides.append((flag, value()))
    case "--status-file": statusPath = value()
    case "--status": showStatus = true
    case "--check-config": checkOnly = true
    case "--log-level":
        let v = value()
        guard let level = Logger.Level(rawValue: v) else {
            fail("--log-level '\(v)': expected one of \(Logger.Level.allCases.map(\.rawValue).joined(separator: ", "))", status: 64)
        }
        logLevel = level
    default: fail("unknown option '\(flag)'\n\(usage)", status: 64)
    }
}

if showStatus {
    guard let text = readFile(statusPath, what: "status file") else {
        fail("\(statusPath): no status: locationd-mqtt is not running (or runs with another --status-file)", status: 3)
    }
    print(text, terminator: "")
    exit(0)
}

var config = BridgeConfig()
let file = configPath ?? BridgeConfig.defaultPath
if let text = readFile(file, what: "configuration") {
    do { try config.apply(text, file: file) } catch { fail("\(error)", status: 78) }
} else if configPath != nil {
    fail("\(file): no such file (leave out --config to run without one)", status: 78)
}
for (flag, v) in overrides {
    switch flag {
    case "--socket":
        if let problem = BridgeConfig.socketProblem(v) { fail("--socket '\(v)': \(problem)", status: 64) }
        config.socket = v
    case "--broker":
        guard let (host, port) = BridgeConfig.parseAddress(v) else {
            fail("--broker '\(v)': \(BridgeConfig.addressProblem(v) ?? "")", status: 64)
        }
        config.host = host
        config.port = port
    default:
        if let problem = BridgeConfig.topicProblem(v) { fail("--topic '\(v)': \(problem)", status: 64) }
        config.topic = v
    }
}
if let problem = config.problem { fail(problem, status: 64) }

let credentials = getenv("CREDENTIALS_DIRECTORY").map { String(cString: $0) }
var password: String?
if !config.passwordFile.isEmpty {
    let path = BridgeConfig.credentialPath(config.passwordFile, credentialsDirectory: credentials)
    guard let text = readFile(path, what: "password file") else {
        fail("\(path): no such password file ([broker] password_file; a name without / is looked up in $CREDENTIALS_DIRECTORY)", status: 78)
    }
    password = String(text.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false).first ?? "")
}
for (key, path) in [("ca_file", config.caFile), ("cert_file", config.certFile), ("key_file", config.keyFile)] where !path.isEmpty {
    let resolved = BridgeConfig.credentialPath(path, credentialsDirectory: credentials)
    if access(resolved, R_OK) != 0 { fail("\(resolved): [broker] \(key) cannot be read: \(String(cString: strerror(errno)))", status: 78) }
}
if checkOnly {
    print("\(file): ok; broker \(config.host):\(config.port), topic \(config.topic), client id \(config.effectiveClientID)")
    exit(0)
}

// The journal under systemd, as locationd's (docs/systemd.md, "Journal").
let backend = LogBackend.bootstrap(identifier: "locationd-mqtt", control: LogControl(level: logLevel))
let log = Logger(label: "locationd-mqtt")
log.debug("logging", metadata: ["backend": "\(backend)", "config": "\(file)"])

// SIGTERM/SIGINT: the status file goes with the process; the broker publishes the last will.
let signalSources = stopOnSignals(removing: statusPath, log: log)

let status = StatusFile(path: statusPath)
let resolve = { (path: String) -> String? in path.isEmpty ? nil : BridgeConfig.credentialPath(path, credentialsDirectory: credentials) }
let encoder = OwnTracksEncoder(base: config.topic, tid: config.effectiveTID)
let options = MQTTClient.Options(
    clientID: config.effectiveClientID, host: config.host, port: config.port, keepalive: config.keepalive,
    username: config.username.isEmpty ? nil : config.username, password: password,
    caFile: resolve(config.caFile), certFile: resolve(config.certFile), keyFile: resolve(config.keyFile),
    will: encoder.lastWill(connectedAt: Bridge.now()))
log.info("starting", metadata: ["broker": "\(config.host):\(config.port)", "topic": "\(config.topic)", "socket": "\(config.socket)"])
do {
    try await Bridge(config: config, log: log, status: status).run(mqttOptions: options)
} catch {
    log.critical("\(error)")
    LogBackend.exit(1)
}
