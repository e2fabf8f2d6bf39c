import Foundation
import TestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The bridge logs as locationd does (SystemdLogging; docs/systemd.md, "Journal"): structured
/// entries to journald under systemd, identified as `locationd-mqtt`; one line per message on
/// stderr otherwise; an error before logging is set up with journald's error prefix.
@Suite(.serialized, .timeLimit(.minutes(5))) struct BridgeJournalTests {
    static let topic = "owntracks/alice/journal"

    /// Entries until one whose MESSAGE starts with `prefix`; all of them, in order.
    static func entries(_ journal: StandInJournal, until prefix: String, detail: () -> String) throws -> [[String: String]] {
        var seen: [[String: String]] = []
        while !seen.contains(where: { $0["MESSAGE"]?.hasPrefix(prefix) == true }) {
            guard let entry = try journal.receive(timeout: 20) else {
                throw TestFailure(description: "no journal entry \"\(prefix)…\" after \(seen.map { $0["MESSAGE"] ?? "" }); \(detail())")
            }
            seen.append(entry)
        }
        return seen
    }

    @Test(.enabled(if: StandInJournal.isAvailable && have("mosquitto", "mosquitto_sub"),
                   "needs root, unshare (a stand-in journald at /run/systemd/journal/socket in a mount namespace) and mosquitto"))
    func theBridgeLogsToTheJournal() throws {
        let fleet = try Fleet("mq-journal", topic: Self.topic)
        let journal = try StandInJournal(directory: URL(fileURLWithPath: fleet.directory))
        // No locationd: the bridge connects to the broker and retries locationd's socket.
        let bridge = try startBridge(directory: fleet.directory, broker: fleet.broker, topic: Self.topic, journal: journal)
        defer { bridge.stop() }
        var entries = try Self.entries(journal, until: "connected to the broker") { bridge.stderr }
        entries += try Self.entries(journal, until: "cannot subscribe to locationd") { bridge.stderr }

        for entry in entries {
            #expect(entry["SYSLOG_IDENTIFIER"] == "locationd-mqtt", "\(entry)")
            #expect(entry["LOCATIOND_LOGGER"] == "locationd-mqtt", "\(entry)")
        }
        // --log-level debug: the backend chosen, at debug priority.
        let logging = try #require(entries.first { $0["MESSAGE"]?.hasPrefix("logging") == true })
        #expect(logging["PRIORITY"] == "7" && logging["LOCATIOND_BACKEND"] == "journal", "\(logging)")
        let starting = try #require(entries.first { $0["MESSAGE"]?.hasPrefix("starting") == true })
        #expect(starting["PRIORITY"] == "6")
        #expect(starting["LOCATIOND_BROKER"] == "127.0.0.1:\(fleet.broker.port)")
        #expect(starting["LOCATIOND_TOPIC"] == Self.topic)
        #expect(starting["CODE_FILE"]?.hasSuffix("main.swift") == true)
        let retry = try #require(entries.last)
        #expect(retry["PRIORITY"] == "4")
        #expect(retry["LOCATIOND_SOCKET"] == "\(fleet.directory)/ld.sock" && retry["LOCATIOND_ERROR"] != nil, "\(retry)")
        #expect(bridge.stderr.isEmpty, "nothing on stderr while the journal takes it: \(bridge.stderr)")

        // The last entry of a stop is sent before the process exits.
        bridge.kill(SIGTERM)
        #expect(bridge.waitForExit() == 0)
        var messages: [String] = []
        while let entry = try journal.receive(timeout: 0) { messages.append(entry["MESSAGE"] ?? "") }
        #expect(messages.last == "stopped signal=SIGTERM", "\(messages)")
    }

    /// A configuration refused at start (exit 78) is reported before logging is set up: with
    /// stderr the journal's stream, with the `<3>` prefix journald reads as priority error.
    @Test func aConfigErrorAtStartIsAnErrorInTheJournal() throws {
        let dir = try makeDirectory("mq-jconf")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let config = "\(dir)/mqtt.toml"
        try "[broker]\nkeepalive = 1\n".write(toFile: config, atomically: true, encoding: .utf8)
        let stderrPath = "\(dir)/bridge.err"
        #expect(FileManager.default.createFile(atPath: stderrPath, contents: nil))
        var st = stat()
        #expect(stat(stderrPath, &st) == 0)
        let bridge = try Child([binDirectory + "/locationd-mqtt", "--config", config, "--topic", Self.topic], name: "bridge",
                               directory: dir, environment: ["JOURNAL_STREAM": "\(st.st_dev):\(st.st_ino)"])
        #expect(bridge.waitForExit() == 78)
        #expect(bridge.stderr == "<3>locationd-mqtt: \(config):2: 'broker.keepalive' is 1; expected 5…65535 seconds\n")
    }
}
