import Foundation
import LocationClient
import LocationCore
import LocationProtocol
import Testing

/// `locationctl status` as a user runs it: the real executable against the real daemon.
@Suite(.serialized) struct LocationCtlSessionTests {
    static var locationctl: String { LocationCtlReplayTests.locationctl.path }

    @Test func statusPrintsEveryConnectionAsATable() async throws {
        let daemon = try DaemonProcess(arguments: ["--gpsd", "127.0.0.1:1"])
        defer { daemon.stop() }
        let navigator = try await daemon.connect()
        defer { navigator.close() }
        let weather = try await daemon.connect()
        defer { weather.close() }
        try await navigator.startSession(.always)
        try await navigator.subscribe()
        try await weather.startSession(.whenInUse, purpose: "radar")
        let me = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path

        let text = try LocationCtlReplayTests.run(["status", "--socket", daemon.socketPath])
        #expect(text.status == 0, "\(text.err)")
        let lines = text.out.split(separator: "\n").map(String.init)
        #expect(lines.contains("sessions:     2") && lines.contains("subscribers:  1") && lines.contains("receiver:     watching"), "\(text.out)")
        // The probe DaemonProcess.connect opened may still be closing: count the rows instead.
        let header = try #require(lines.firstIndex { $0.hasPrefix("conn  ") }, "\(text.out)")
        #expect(lines[header].split(separator: " ", omittingEmptySubsequences: true)
            == ["conn", "pid", "uid", "program", "rule", "grant", "subscribed"])
        let rows = lines[(header + 1)...].prefix { !$0.hasPrefix("* ") }.map {
            $0.split(separator: "  ", omittingEmptySubsequences: true).map { $0.trimmingCharacters(in: .whitespaces) }
        }
        let owner = "owner (built in: root and the daemon's user)"
        #expect(rows.contains { $0.count == 7 && $0[2] == "0" && $0[3] == me && $0[4] == owner && $0[5] == "always precise" && $0[6] == "yes" },
                "\(text.out)")
        #expect(rows.contains { $0.count == 7 && $0[3] == me && $0[5] == "when-in-use precise (purpose radar)" && $0[6] == "no" },
                "\(text.out)")
        let mine = rows.filter { $0.first?.hasSuffix("*") == true }
        #expect(mine.count == 1 && mine.first?[3] == Self.locationctl && mine.first?[5] == "no session", "\(text.out)")
        #expect(lines.last == "* this connection")
        #expect(lines.contains("connections:  \(rows.count)"), "\(text.out)")

        let json = try LocationCtlReplayTests.run(["status", "--socket", daemon.socketPath, "--json"])
        #expect(json.status == 0, "\(json.err)")
        #expect(json.out.hasSuffix("}\n") && json.out.split(separator: "\n").count == 1, "\(json.out)")
        guard case .statusReply(let reply) = try ServerMessage.decode(String(json.out.dropLast())) else { Issue.record("not a status reply: \(json.out)"); return }
        #expect(reply.connectionsShown == .all && reply.connections?.count == reply.connected)
        let own = try #require(reply.connections?.first { $0.isSelf })
        #expect(own.executable == Self.locationctl && own.session == nil && own.pid != getpid())
    }
}
