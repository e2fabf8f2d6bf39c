import Foundation
import LocationProtocol
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// A real mosquitto broker with its own config on a free loopback port; restartable on the
/// same port. `persistent`: it keeps sessions and queued messages in its folder across a
/// restart (`persistence true`), as a fleet's broker does; otherwise in memory only.
final class Broker: @unchecked Sendable {
    let directory: String
    let port: UInt16
    let extraConfig: String
    let persistent: Bool
    private(set) var process: Child?

    init(directory: String, extraConfig: String = "allow_anonymous true\n", persistent: Bool = false) throws {
        self.directory = directory
        self.extraConfig = extraConfig
        self.persistent = persistent
        self.port = try freePort()
        try start()
    }

    func start() throws {
        let conf = "\(directory)/mosquitto.conf"
        // Started as root, mosquitto writes its database as the mosquitto user.
        if persistent { chmod(directory, 0o777) }
        let persistence = persistent ? "persistence true\npersistence_location \(directory)/\nautosave_interval 1\n" : "persistence false\n"
        try "listener \(port) 127.0.0.1\n\(persistence)\(extraConfig)".write(toFile: conf, atomically: true, encoding: .utf8)
        let child = try Child(["/usr/sbin/mosquitto", "-c", conf], name: "mosquitto", directory: directory)
        process = child
        try waitUntil("mosquitto listening on \(port)", detail: { child.stderr }) { canConnect(port: port) || !child.isRunning }
        guard child.isRunning else { throw Failure(description: "mosquitto exited: \(child.stderr)") }
    }

    func kill() {
        process?.stop()
        process = nil
    }

    /// Stops it as its service manager would (SIGTERM: a persistent broker saves its database).
    func stop() throws {
        if let process {
            process.kill(SIGTERM)
            guard process.waitForExit() != nil else { throw Failure(description: "mosquitto did not stop") }
        }
        process = nil
    }

    /// `stop()`, and started again on the same port.
    func restart() throws {
        try stop()
        try start()
    }
}

/// `mosquitto_sub -v` on `BASE/#` (one line per message: topic, space, payload), ready once a
/// probe published through the broker came back.
final class Subscriber: @unchecked Sendable {
    let process: Child
    let base: String

    /// `persistent`: a session the broker keeps (client id, clean session off), so that what is
    /// published while the subscriber reconnects waits for it; and without the retained copy
    /// the broker sends at every (re)subscribe (`-R`, as OwnTracks Recorder ignores it): that is
    /// the broker's snapshot of the latest location, not a delivery of it.
    init(broker: Broker, base: String, directory: String, extra: [String] = [], name: String = "sub", persistent: Bool = false) throws {
        self.base = base
        let session = persistent ? ["-c", "-i", "test-\(name)", "-R"] : []
        process = try Child(["/usr/bin/mosquitto_sub", "-h", "127.0.0.1", "-p", "\(broker.port)", "-v", "-q", "1",
                             "-t", "\(base)/#", "-t", base] + session + extra, name: name, directory: directory)
        let probe = "\(base)/probe"
        try waitUntil("mosquitto_sub to subscribe", detail: { self.process.stderr }) {
            _ = try? run(["/usr/bin/mosquitto_pub", "-h", "127.0.0.1", "-p", "\(broker.port)", "-t", probe, "-m", "{}"] + extra)
            return process.stdout.contains(probe)
        }
    }

    /// Every message so far: (topic, payload), the probes left out.
    var messages: [(topic: String, payload: String)] {
        process.stdout.split(separator: "\n").compactMap { line -> (topic: String, payload: String)? in
            let parts = line.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2, !parts[0].hasSuffix("/probe") else { return nil }
            return (String(parts[0]), String(parts[1]))
        }
    }

    /// The parsed payloads of the messages of one `_type`.
    func objects(_ type: String) -> [JSONValue] {
        messages.compactMap { try? JSONParser().parse($0.payload) }.filter { $0["_type"] == .string(type) }
    }
}

/// locationd replaying an NMEA log (`--replay LOG`; it waits for the first subscriber).
func startLocationd(directory: String, log: String, extra: [String] = [], database: String? = nil) throws -> Child {
    try Child([binDirectory + "/locationd", "--socket", "\(directory)/ld.sock", "--database", database ?? "\(directory)/ld.db",
               "--replay", log, "--log-level", "debug"] + extra, name: "locationd", directory: directory)
}

/// locationd-mqtt with `config` (TOML text) written beside it; with `journal`, logging to that
/// stand-in journald as under systemd.
func startBridge(directory: String, broker: Broker, topic: String, config: String = "", name: String = "bridge",
                 environment: [String: String] = [:], journal: StandInJournal? = nil) throws -> Child {
    let path = "\(directory)/mqtt.toml"
    try config.write(toFile: path, atomically: true, encoding: .utf8)
    let argv = [binDirectory + "/locationd-mqtt", "--config", path, "--socket", "\(directory)/ld.sock",
                "--broker", "127.0.0.1:\(broker.port)", "--topic", topic, "--status-file", "\(directory)/status.json",
                "--log-level", "debug"]
    guard let journal else { return try Child(argv, name: name, directory: directory, environment: environment) }
    let (added, wrapper, prelude) = try journal.launch(stderrPath: "\(directory)/\(name).err")
    return try Child(wrapper + ["/bin/sh", "-c", prelude + "exec \"$0\" \"$@\""] + argv, name: name, directory: directory,
                     environment: environment.merging(added) { mine, _ in mine })
}

/// The demo trip's log (`locationctl simulate demo`), written once per directory.
func demoLog(in directory: String) throws -> String {
    let path = "\(directory)/demo.nmea"
    let r = try run([binDirectory + "/locationctl", "simulate", "demo", "-o", path])
    guard r.status == 0 else { throw Failure(description: "locationctl simulate: \(r.err)") }
    return path
}

/// What `locationctl replay` computes for the log: the events a subscriber of locationd gets
/// (`options`: more of replay's, e.g. `--accuracy approximate`).
func expectedEvents(log: String, events: String, options: [String] = []) throws -> [JSONValue] {
    let r = try run([binDirectory + "/locationctl", "replay", log, "--events", events] + options)
    guard r.status == 0 else { throw Failure(description: "locationctl replay: \(r.err)") }
    return r.out.split(separator: "\n").compactMap { try? JSONParser().parse(String($0)) }
}

/// A test's folder with the demo log, a broker and a subscriber on `topic`/#; all stopped and
/// removed when released.
final class Fleet {
    let directory: String
    let log: String
    let broker: Broker
    let sub: Subscriber

    init(_ name: String, topic: String, persistent: Bool = false) throws {
        directory = try makeDirectory(name)
        log = try demoLog(in: directory)
        broker = try Broker(directory: directory, persistent: persistent)
        sub = try Subscriber(broker: broker, base: topic, directory: directory, persistent: persistent)
    }

    deinit {
        sub.process.stop()
        broker.kill()
        try? FileManager.default.removeItem(atPath: directory)
    }
}
