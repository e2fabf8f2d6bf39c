import Foundation
import LocationClient
import LocationProtocol
import TestSupport
import Testing

/// Another uid (`nobody`, via setpriv) through the real daemon's socket: denied by default,
/// allowed by an explicit rule. Needs root (the test environment runs as root).
@Suite(.enabled(if: getuid() == 0, "needs root: runs clients and the daemon as other users (setpriv)"), .timeLimit(.minutes(5)))
struct OtherUserTests {
    /// Whether the user `daemon` can run the built locationd (every parent folder of the build
    /// must be searchable by others).
    static func daemonUserCanRunLocationd() throws -> Bool {
        try runToExit(URL(fileURLWithPath: "/usr/bin/setpriv"),
                      ["--reuid=daemon", "--regid=daemon", "--clear-groups", "/usr/bin/test", "-x", DaemonProcess.executable.path]).status == 0
    }

    /// Runs a tiny client as nobody: connects, sends `request` (one line; by default an
    /// `always` `session.start`), prints the reply line. (The clients' sockets time out after
    /// 10 s: a daemon that does not answer fails the test instead of hanging it.)
    static func requestAsNobody(socket: String, groups: String? = nil,
                                request: String = #"{"type":"session.start","id":1,"authorization":"always"}"#) throws -> String {
        let script = """
            import socket,sys
            s=socket.socket(socket.AF_UNIX); s.settimeout(10); s.connect(sys.argv[1]); f=s.makefile('rwb')
            f.readline()
            f.write(sys.argv[2].encode() + b'\\n'); f.flush()
            print(f.readline().decode().strip())
            """
        return try runToExit(URL(fileURLWithPath: "/usr/bin/setpriv"),
                             ["--reuid=nobody", "--regid=nogroup", groups.map { "--groups=\($0)" } ?? "--clear-groups",
                              "/usr/bin/python3", "-c", script, socket, request]).out
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
        let denied = try await Self.daemon(config: "[log]\nlevel = \"debug\"\n")
        let reply = try Self.requestAsNobody(socket: denied.socketPath)
        #expect(reply.contains("\"code\":\"notAuthorized\""), "\(reply)")
        #expect(reply.contains("policy rule 'default' (everyone) denies location access"), "\(reply)")
        denied.stop()

        let allowed = try await Self.daemon(config: """
            [policy.nobody]
            user = "nobody"
            authorization = "when-in-use"
            accuracy = "approximate"

            """)
        let granted = try Self.requestAsNobody(socket: allowed.socketPath)
        #expect(granted.hasPrefix("{\"type\":\"session\",\"id\":1,\"state\":\"active\",\"requested\":\"always\",\"authorization\":\"when-in-use\",\"accuracy\":\"approximate\""), "\(granted)")
        #expect(granted.contains("\"rule\":\"nobody\""))
        allowed.stop()
    }

    /// A rule naming the peer's lowest supplementary group matches (the kernel's list starts
    /// after a tab, which must not cost the first group).
    @Test func theFirstSupplementaryGroupMatchesItsRule() async throws {
        let daemon = try await Self.daemon(config: """
            [policy.first]
            group = 5
            authorization = "when-in-use"

            [policy.second]
            group = 998
            authorization = "always"

            """)
        defer { daemon.stop() }
        let reply = try Self.requestAsNobody(socket: daemon.socketPath, groups: "5,998")
        #expect(reply.contains(#""rule":"first""#), "\(reply)")
    }

    /// A rule denying a supplementary group holds for a peer that is gone by the time the daemon
    /// identifies it: a process of that group connects, hands the socket to a child and exits.
    /// Read from /proc/PID/status after the accept, a pid already gone would have no groups, and
    /// the next rule (here the default) would grant a session.
    @Test func aGroupRuleHoldsForAPeerThatExitedBeforeItWasIdentified() async throws {
        let daemon = try await Self.daemon(config: """
            [policy.kids]
            group = 60
            authorization = "denied"

            [policy.default]
            authorization = "when-in-use"
            accuracy = "approximate"

            """)
        defer { daemon.stop() }
        #expect(try Self.requestAsNobody(socket: daemon.socketPath, groups: "60").contains("policy rule 'kids'"))

        // Stopped, the daemon stands for a busy one: it accepts only after the connecting
        // process has exited and been reaped.
        let pid = daemon.pid
        kill(pid, SIGSTOP)
        defer { kill(pid, SIGCONT) }
        func state() throws -> String {
            let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
            return String(stat[stat.range(of: ") ", options: .backwards)!.upperBound...].prefix(1))
        }
        while try state() != "T" { await Task.yield() }
        let script = """
            import os,socket,sys
            s=socket.socket(socket.AF_UNIX); s.settimeout(10); s.connect(sys.argv[1])
            if os.fork()!=0: os._exit(0)
            sys.stdin.readline(); f=s.makefile('rwb'); f.readline()
            f.write(b'{"type":"session.start","id":1,"authorization":"always"}\\n'); f.flush()
            print(f.readline().decode().strip(), flush=True)
            """
        // posix_spawn and waitpid: Foundation's Process takes the client for running as long as
        // the child it forked holds the descriptor Process watches.
        var input: [CInt] = [0, 0], output: [CInt] = [0, 0]
        #expect(pipe(&input) == 0 && pipe(&output) == 0)
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, input[0], 0)
        posix_spawn_file_actions_adddup2(&actions, output[1], 1)
        for fd in input + output { posix_spawn_file_actions_addclose(&actions, fd) }
        let arguments = ["/usr/bin/setpriv", "--reuid=nobody", "--regid=nogroup", "--groups=60", "/usr/bin/python3", "-c", script,
                         daemon.socketPath]
        let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var client: pid_t = 0
        #expect(posix_spawn(&client, argv[0]!, &actions, nil, argv, environ) == 0)
        close(input[0])
        close(output[1])
        var status: Int32 = 0
        #expect(waitpid(client, &status, 0) == client && status == 0)  // the process that connected is gone
        kill(pid, SIGCONT)
        #expect(write(input[1], "go\n", 3) == 3)
        close(input[1])
        let result = FileHandle(fileDescriptor: output[0], closeOnDealloc: true)
        let reply = String(decoding: result.readDataToEndOfFile(), as: UTF8.self)
        #expect(reply.contains(#""code":"notAuthorized""#) && reply.contains("policy rule 'kids'"), "\(reply)")
    }


    /// nobody's status lists only its own connection; root's, at the same time, lists nobody's
    /// connection too, with its rule and grant (docs/privacy.md, "Status").
    @Test func statusShowsOtherProgramsOnlyToRoot() async throws {
        let daemon = try await Self.daemon(config: """
            [policy.nobody]
            user = "nobody"
            authorization = "when-in-use"
            accuracy = "approximate"

            """)
        defer { daemon.stop() }
        let root = try await daemon.connect()
        defer { root.close() }
        try await root.startSession(.always)

        // nobody opens a session, asks for status, prints both replies, then stays connected
        // until its stdin closes, so root's status sees it.
        let script = """
            import socket,sys
            s=socket.socket(socket.AF_UNIX); s.settimeout(10); s.connect(sys.argv[1]); f=s.makefile('rwb')
            f.readline()
            f.write(b'{"type":"session.start","id":1}\\n{"type":"status","id":2}\\n'); f.flush()
            print(f.readline().decode().strip()); print(f.readline().decode().strip(), flush=True)
            sys.stdin.read()
            """
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        p.arguments = ["--reuid=nobody", "--regid=nogroup", "--clear-groups", "/usr/bin/python3", "-c", script, daemon.socketPath]
        let input = Pipe(), output = Pipe()
        p.standardInput = input
        p.standardOutput = output
        try p.run()
        defer { try? input.fileHandleForWriting.close(); p.waitUntilExit() }
        var text = ""
        while text.filter({ $0 == "\n" }).count < 2 {
            let chunk = output.fileHandleForReading.availableData
            guard !chunk.isEmpty else { break }  // nobody's client died: the checks below say how
            text += String(decoding: chunk, as: UTF8.self)
        }
        let lines = text.split(separator: "\n").map(String.init)
        try #require(lines.count == 2, "\(text)")
        guard case .session(let grant) = try ServerMessage.decode(lines[0]) else { Issue.record("\(lines[0])"); return }
        #expect(grant.rule == "nobody" && grant.accuracy == .approximate)
        guard case .statusReply(let own) = try ServerMessage.decode(lines[1]) else { Issue.record("\(lines[1])"); return }
        #expect(own.connectionsShown == .own)
        let mine = try #require(own.connections)
        #expect(mine.count == 1, "\(mine)")
        #expect(mine.first?.isSelf == true && mine.first?.uid == 65534 && mine.first?.rule == "nobody")
        #expect(mine.first?.session == StatusReply.SessionGrant(authorization: .whenInUse, accuracy: .approximate))
        #expect(own.sessions == 2 && (own.connected ?? 0) >= 2)

        let all = try await root.status()
        #expect(all.connectionsShown == .all)
        let entries = try #require(all.connections)
        #expect(entries.count == all.connected)
        let nobody = try #require(entries.first { $0.uid == 65534 })
        #expect(nobody.connection == mine.first?.connection && !nobody.isSelf && nobody.rule == "nobody")
        #expect(nobody.executable?.hasPrefix("/usr/bin/python3") == true)
        #expect(nobody.session == StatusReply.SessionGrant(authorization: .whenInUse, accuracy: .approximate))
        let me = try #require(entries.first { $0.isSelf })
        #expect(me.uid == 0 && me.session == StatusReply.SessionGrant(authorization: .always, accuracy: .precise))
    }

    /// locationctl run by a user outside the socket's group (mode 0660) is told the group and
    /// how to join it, not only "Permission denied"; a member connects; a socket of group root
    /// (a daemon started by hand as root) is not answered with "join root".
    @Test(.enabled("user 'nobody' cannot run the built locationctl (a parent folder is not searchable by others)") {
        try runToExit(URL(fileURLWithPath: "/usr/bin/setpriv"),
                      ["--reuid=nobody", "--regid=nogroup", "--clear-groups", "/usr/bin/test", "-x", LocationCtlReplayTests.locationctl.path]).status == 0
    })
    func locationctlOutsideTheSocketsGroupIsToldHowToJoinIt() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("locationd-group-\(UUID().uuidString.prefix(8))")
        let daemon = try DaemonProcess(arguments: ["--gpsd", "127.0.0.1:1"], database: "none", directory: dir)
        defer { daemon.stop() }
        try await daemon.connect().close()  // waits for the socket
        chmod(dir.path, 0o755)
        let group = try #require(getgrnam("daemon")).pointee.gr_gid
        #expect(chown(daemon.socketPath, 0, group) == 0 && chmod(daemon.socketPath, 0o660) == 0)
        func statusAsNobody(groups: String) throws -> (status: Int32, out: String, err: String) {
            try LocationCtlReplayTests.run(["--reuid=nobody", "--regid=nogroup", groups, LocationCtlReplayTests.locationctl.path,
                                            "status", "--socket", daemon.socketPath],
                                           executable: URL(fileURLWithPath: "/usr/bin/setpriv"))
        }

        let outside = try statusAsNobody(groups: "--clear-groups")
        #expect(outside.status == 1, "\(outside.err)")
        #expect(outside.err == "Error: cannot connect to locationd at \(daemon.socketPath): permission denied: only root and members of the socket's group 'daemon' may connect, and user nobody is not one in this login; add it with sudo usermod -aG daemon nobody, then log in again (a login started before keeps its old groups; docs/systemd.md, \"The location group\")\n",
                "\(outside.err)")

        let member = try statusAsNobody(groups: "--groups=\(group)")
        #expect(member.status == 0, "\(member.err)")
        #expect(member.out.contains("source:"), "\(member.out)")

        #expect(chown(daemon.socketPath, 0, 0) == 0)
        let rootGroup = try statusAsNobody(groups: "--clear-groups")
        #expect(rootGroup.status == 1, "\(rootGroup.err)")
        #expect(rootGroup.err.contains("permission denied: the socket's group is root, so only root may connect") && !rootGroup.err.contains("usermod"),
                "\(rootGroup.err)")
    }

    /// The daemon as the unprivileged user it runs as under the shipped unit: without
    /// CAP_SYS_PTRACE it cannot read another user's executable (and says so at start); with it
    /// (the unit's AmbientCapabilities=) it can, and a rule naming the executable matches.
    @Test(.enabled("user 'daemon' cannot run the built locationd (a parent folder is not searchable by others)") {
        try OtherUserTests.daemonUserCanRunLocationd()
    })
    func anUnprivilegedDaemonIdentifiesOtherUsersProgramsOnlyWithCapSysPtrace() async throws {
        let python = URL(fileURLWithPath: "/usr/bin/python3").resolvingSymlinksInPath().path
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("locationd-cap-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let config = dir.appendingPathComponent("locationd.toml")
        try "[policy.python]\nexecutable = \"\(python)\"\nauthorization = \"always\"\n".write(to: config, atomically: true, encoding: .utf8)
        chmod(dir.path, 0o755)
        chmod(config.path, 0o644)
        let script = """
            import socket,sys
            s=socket.socket(socket.AF_UNIX); s.settimeout(10); s.connect(sys.argv[1]); f=s.makefile('rwb')
            f.readline()
            f.write(b'{"type":"session.start","id":1,"authorization":"always"}\\n{"type":"status","id":2}\\n'); f.flush()
            print(f.readline().decode().strip()); print(f.readline().decode().strip())
            """
        for withCapability in [false, true] {
            let caps = withCapability ? ["--inh-caps=+sys_ptrace", "--ambient-caps=+sys_ptrace"] : []
            let daemon = try DaemonProcess(arguments: ["--config", config.path, "--gpsd", "127.0.0.1:1"], database: "none",
                                           launcher: ["/usr/bin/setpriv", "--reuid=daemon", "--regid=daemon", "--clear-groups"] + caps)
            defer { daemon.stop() }
            let probe = try await daemon.connect()
            probe.close()
            chmod(daemon.socketPath, 0o666)
            let lines = try runToExit(URL(fileURLWithPath: "/usr/bin/setpriv"),
                                      ["--reuid=nobody", "--regid=nogroup", "--clear-groups", python, "-c", script, daemon.socketPath])
                .out.split(separator: "\n").map(String.init)
            try #require(lines.count == 2, "\(lines)")
            guard case .statusReply(let status) = try ServerMessage.decode(lines[1]),
                  let mine = status.connections?.first(where: \.isSelf) else { Issue.record("\(lines[1])"); return }
            daemon.signal(SIGTERM)
            _ = daemon.waitForExit()
            let log = daemon.stderrText()
            if withCapability {
                #expect(mine.executable == python)
                #expect(lines[0].contains(#""rule":"python""#), "\(lines[0])")
                #expect(!log.contains("cannot identify other users' programs"))
            } else {
                #expect(mine.executable == nil)
                #expect(lines[0].contains(#""code":"notAuthorized""#), "\(lines[0])")
                #expect(log.contains("cannot identify other users' programs: reading another user's /proc/PID/exe needs CAP_SYS_PTRACE"), "\(log.suffix(2000))")
            }
        }
    }
}
