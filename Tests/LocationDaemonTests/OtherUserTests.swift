import Foundation
import LocationClient
import Testing

/// Another uid (`nobody`, via setpriv) through the real daemon's socket: denied by default,
/// allowed by an explicit rule. Needs root (the test environment runs as root).
@Suite struct OtherUserTests {
    /// Runs a tiny client as nobody: connects, sends `session.start`, prints the reply line.
    static func sessionAsNobody(socket: String) throws -> String {
        let script = """
            import socket,sys
            s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); f=s.makefile('rwb')
            f.readline()
            f.write(b'{"type":"session.start","id":1,"authorization":"always"}\\n'); f.flush()
            print(f.readline().decode().strip())
            """
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        p.arguments = ["--reuid=nobody", "--regid=nogroup", "--clear-groups", "/usr/bin/python3", "-c", script, socket]
        let out = Pipe()
        p.standardOutput = out
        try p.run()
        p.waitUntilExit()
        return String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    }

    static func daemon(config: String) async throws -> DaemonProcess {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("locationd-policy-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let file = dir.appendingPathComponent("locationd.toml")
        try config.write(to: file, atomically: true, encoding: .utf8)
        let d = try DaemonProcess(arguments: ["--config", file.path, "--gpsd", "127.0.0.1:1"], directory: dir)
        let probe = try await d.connect()  // waits for the socket
        probe.close()
        chmod(d.socketPath, 0o666)  // let nobody reach the socket; the policy is what decides
        chmod(dir.path, 0o755)
        return d
    }

    @Test func nobodyDeniedByDefaultAllowedByRule() async throws {
        guard getuid() == 0 else { return }
        let denied = try await Self.daemon(config: "[log]\nlevel = \"debug\"\n")
        let reply = try Self.sessionAsNobody(socket: denied.socketPath)
        #expect(reply.contains("\"code\":\"notAuthorized\""), "\(reply)")
        #expect(reply.contains("policy rule 'default' (everyone) denies location access"), "\(reply)")
        denied.stop()

        let allowed = try await Self.daemon(config: """
            [policy.nobody]
            user = "nobody"
            authorization = "when-in-use"
            accuracy = "approximate"

            """)
        let granted = try Self.sessionAsNobody(socket: allowed.socketPath)
        #expect(granted.hasPrefix("{\"type\":\"session\",\"id\":1,\"state\":\"active\",\"requested\":\"always\",\"authorization\":\"when-in-use\",\"accuracy\":\"approximate\""), "\(granted)")
        #expect(granted.contains("\"rule\":\"nobody\""))
        allowed.stop()
    }
}
