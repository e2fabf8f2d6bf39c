import Foundation
import Testing

/// The shipped systemd/locationd-mqtt.service allows what the bridge opens (PID 1 here is not
/// systemd, so the unit is read and checked against the bridge's needs; scripts/check-units
/// runs systemd-analyze on it).
@Suite struct BridgeUnitTests {
    static let root = "/" + #filePath.split(separator: "/").dropLast(3).joined(separator: "/")

    func lines() throws -> [String: [String]] {
        let text = try String(contentsOfFile: Self.root + "/systemd/locationd-mqtt.service", encoding: .utf8)
        var out: [String: [String]] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            let parts = line.split(separator: "=", maxSplits: 1)
            if parts.count == 2 { out[String(parts[0]), default: []].append(String(parts[1])) }
        }
        return out
    }

    @Test func theUnitAllowsWhatTheBridgeUses() throws {
        let unit = try lines()
        // locationd's Unix socket and journald's (/run/systemd/journal/socket, not hidden), and
        // the broker over TCP (any address: no IPAddressDeny).
        #expect(unit["InaccessiblePaths"] == nil && unit["TemporaryFileSystem"] == nil)
        #expect(Set(unit["RestrictAddressFamilies"]?.first?.split(separator: " ").map(String.init) ?? []) == ["AF_UNIX", "AF_INET", "AF_INET6"])
        #expect(unit["IPAddressDeny"] == nil && unit["PrivateNetwork"] == nil)
        // The status file lives in its RuntimeDirectory.
        #expect(unit["RuntimeDirectory"] == ["locationd-mqtt"])
        #expect(unit["ExecStart"]?.first?.contains("--status-file /run/locationd-mqtt/status.json") == true)
        #expect(unit["ExecStart"]?.first?.contains("--config /etc/locationd/mqtt.toml") == true)
        // The socket is group location's (mode 0660); the user is the bridge's own, for its identity.
        #expect(unit["Group"] == ["location"] && unit["User"] == ["locationd-mqtt"])
        #expect(unit["After"]?.contains { $0.contains("locationd.service") } == true)
        #expect(unit["RestartPreventExitStatus"] == ["64 78"])
    }

    @Test func sysusersCreatesTheBridgesUser() throws {
        let text = try String(contentsOfFile: Self.root + "/systemd/sysusers.d/locationd.conf", encoding: .utf8)
        #expect(text.split(separator: "\n").contains { $0.hasPrefix("u") && $0.contains("locationd-mqtt -:location ") })
    }
}
