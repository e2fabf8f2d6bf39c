import Foundation
import LocationClient
#if canImport(Glibc)
import Glibc
#endif
@testable import LocationDaemon
import Testing

/// The socket file over a daemon's life (docs/systemd.md, "Shutdown"): it removes the file it
/// created, and only that one.
@Suite(.serialized, .timeLimit(.minutes(2))) struct SocketFileTests {
    /// Connects to `path` once `daemon` serves it (polling its startup, not pacing the test).
    static func connect(_ path: String, _ daemon: DaemonProcess) async throws -> LocationClient {
        let deadline = Date().addingTimeInterval(10)
        while true {
            do { return try await LocationClient.connect(path: path) } catch {
                guard Date() < deadline, daemon.waitForExit(timeout: 0) == nil else {
                    throw DaemonProcess.Failure(description: "cannot connect: \(error); stderr: \(daemon.stderrText())")
                }
                try await Task.sleep(for: .milliseconds(20))
            }
        }
    }

    /// A socket file deleted while the daemon runs (`rm`, a cleaner of /tmp) left it serving
    /// nobody new, with nothing logged; the next check makes it again, says so, and programs
    /// connect. A file put in its place by someone else is left alone, logged once.
    @Test func aDeletedSocketFileIsMadeAgain() async throws {
        let log = CapturedLog()
        let h = try await ServerHarness.start(log: log) { $0.socketFileCheck = .hours(1) }  // checked by hand
        defer { h.stopIfRunning() }
        let connected = RawSocket(path: h.path)
        #expect(connected.readLine()?.contains(#""type":"hello""#) == true)
        #expect(unlink(h.path) == 0)
        try await h.hub.eventLoop.submit { h.server.checkSocketFile() }.get()
        try await h.hub.eventLoop.submit { h.server.checkSocketFile() }.get()  // nothing more to do
        let again = RawSocket(path: h.path)
        #expect(again.readLine()?.contains(#""type":"hello""#) == true)
        #expect(log.messages(.warning).filter { $0.contains("the socket file \(h.path) was deleted while locationd ran; made it again") }.count == 1,
                "\(log.entries)")
        // Deleted again, and another socket put there before the check: not taken over.
        #expect(unlink(h.path) == 0)
        let foreign = try SocketServer.bindSocket(h.path, mode: 0o600)
        let identity = FileIdentity(path: h.path)
        for _ in 0..<2 { try await h.hub.eventLoop.submit { h.server.checkSocketFile() }.get() }
        #expect(FileIdentity(path: h.path) == identity)
        #expect(log.messages(.error).filter { $0.contains("the socket file \(h.path) is no longer the one this daemon made") }.count == 1,
                "\(log.entries)")
        connected.send(#"{"type":"hello"}"# + "\n")  // the connection made at the start still works
        #expect(connected.readLine()?.contains(#""type":"hello""#) == true)
        // That other socket goes stale (its server was killed): taken back, as a start would.
        close(foreign)
        try await h.hub.eventLoop.submit { h.server.checkSocketFile() }.get()
        let back = RawSocket(path: h.path)  // refused, were the stale socket still there
        #expect(back.readLine()?.contains(#""type":"hello""#) == true)
        #expect(log.messages(.warning).contains("the socket file \(h.path) was replaced by one nobody listens on (its server gone) while locationd ran; made it again, and programs can connect"),
                "\(log.entries)")
        await h.stop()
        #expect(FileIdentity(path: h.path) == nil, "the stop leaves the file it made")
    }

    /// A's socket file is removed while it runs and B binds the same path; A's shutdown leaves
    /// B's socket in place, and B's own shutdown removes it.
    @Test func aStoppingDaemonLeavesAnotherDaemonsSocketAlone() async throws {
        let aDirectory = try DaemonProcess.makeDirectory()
        let a = try DaemonProcess(spawning: DescriptorLimitTests.arguments(aDirectory, ["--gpsd", "127.0.0.1:1"]),
                                  environment: [:], directory: aDirectory)
        defer { a.stop() }
        let path = a.socketPath
        try await DescriptorLimitTests.connect(a).close()
        #expect(unlink(path) == 0)

        let bDirectory = try DaemonProcess.makeDirectory()
        let b = try DaemonProcess(spawning: ["--socket", path, "--database", "none", "--gpsd", "127.0.0.1:1"],
                                  environment: [:], directory: bDirectory)
        defer { b.stop() }
        let client = try await Self.connect(path, b)
        let status = try await client.status()
        client.close()
        #expect(status.connected == 1)

        a.signal(SIGTERM)
        #expect(a.waitForExit() == 0, "\(a.stderrText().suffix(1000))")
        #expect(access(path, F_OK) == 0, "A's shutdown removed B's socket file; A: \(a.stderrText().suffix(800))")
        #expect(a.stderrText().contains("notice locationd: the socket file is not the one this daemon created"), "\(a.stderrText().suffix(800))")
        let again = try await LocationClient.connect(path: path)
        again.close()

        b.signal(SIGTERM)
        #expect(b.waitForExit() == 0, "\(b.stderrText().suffix(1000))")
        #expect(access(path, F_OK) != 0, "B did not remove its own socket file")
    }

    /// A start on `socket` that is to fail (as the daemon's user when `asDaemonUser`): its exit
    /// status and log.
    static func failedStart(socket: String, asDaemonUser: Bool) throws -> (status: Int32?, log: String) {
        let daemon = try DaemonProcess(arguments: ["--gpsd", "127.0.0.1:1", "--socket", socket], database: "none",
                                       launcher: asDaemonUser ? ReadOnlyDatabaseTests.asDaemonUser : [])
        defer { daemon.stop() }
        let status = daemon.waitForExit()
        return (status, daemon.stderrText())
    }

    /// A socket directory the daemon's user cannot write: the start fails naming the socket, the
    /// directory, the user and the fix.
    @Test(.enabled("user 'daemon' cannot run the built locationd (a parent folder is not searchable by others)") {
        try OtherUserTests.daemonUserCanRunLocationd()
    })
    func aSocketDirectoryTheDaemonsUserCannotWriteIsNamedWithTheFix() async throws {
        let dir = try DaemonProcess.makeDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        chmod(dir.path, 0o555)
        let path = dir.appendingPathComponent("x.sock").path
        let (status, log) = try Self.failedStart(socket: path, asDaemonUser: true)
        #expect(status == 78, "\(log.suffix(1000))")
        let user = try ReadOnlyDatabaseTests.daemonUser()
        #expect(log.contains("cannot create the socket \(path): Permission denied (its directory \(dir.path) is not writable by user daemon, uid \(user.uid)); make the directory writable by the daemon's user, or set [socket] path (--socket)"), "\(log.suffix(1000))")
    }

    /// A socket directory the daemon's user cannot create (a parent not its to write): the start
    /// fails naming the directory, the parent, the user and the fix.
    @Test(.enabled("user 'daemon' cannot run the built locationd (a parent folder is not searchable by others)") {
        try OtherUserTests.daemonUserCanRunLocationd()
    })
    func aSocketDirectoryTheDaemonsUserCannotCreateIsNamedWithTheFix() async throws {
        let dir = try DaemonProcess.makeDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        chmod(dir.path, 0o755)
        let target = dir.appendingPathComponent("a/b").path
        let (status, log) = try Self.failedStart(socket: target + "/x.sock", asDaemonUser: true)
        #expect(status == 78, "\(log.suffix(1000))")
        let user = try ReadOnlyDatabaseTests.daemonUser()
        #expect(log.contains("\(dir.path)/a: cannot create the socket's directory (the directory \(dir.path) is not writable by user daemon, uid \(user.uid)); create \(target) for the daemon's user (mkdir -p \(target) && chown daemon \(target) && chmod 0755 \(target);"), "\(log.suffix(1000))")
    }

    /// A socket path through a file: `mkdir -p` cannot mend that, so the fix is another path
    /// or removing the file.
    @Test func aSocketPathThroughAFileIsNamedWithTheFix() throws {
        let dir = try DaemonProcess.makeDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("file")
        try Data().write(to: file)
        let (status, log) = try Self.failedStart(socket: file.path + "/sub/x.sock", asDaemonUser: false)
        #expect(status == 78, "\(log.suffix(1000))")
        #expect(log.contains("\(file.path)/sub: cannot create the socket's directory (Not a directory: a component of \(file.path) is a file, not a directory); set [socket] path (--socket) to a path in a directory, or remove the file on the way"),
                "\(log.suffix(1000))")
    }

    /// A second daemon on a socket another one serves says what to do: stop the other, or use
    /// another path.
    @Test func aSocketAnotherDaemonServesIsNamedWithTheFix() async throws {
        let first = try DaemonProcess(arguments: ["--gpsd", "127.0.0.1:1"], database: "none")
        defer { first.stop() }
        try await first.connect().close()
        let second = try DaemonProcess(arguments: ["--gpsd", "127.0.0.1:1"], database: "none", directory: first.directory)
        defer { second.stop() }
        let status = second.waitForExit()
        let log = second.stderrText()
        #expect(status == 1, "\(log.suffix(1000))")
        #expect(log.contains("\(first.socketPath): another server is listening there (another locationd?); stop it (systemctl stop locationd), or give this one another path with --socket or [socket] path"), "\(log.suffix(1000))")
    }

    /// A socket directory, or one on the way to it, that the daemon's user cannot enter: the
    /// start fails naming that directory, the missing search permission and the fix (not
    /// the directory's write permission).
    @Test(.enabled("user 'daemon' cannot run the built locationd (a parent folder is not searchable by others)") {
        try OtherUserTests.daemonUserCanRunLocationd()
    })
    func aSocketDirectoryTheDaemonsUserCannotEnterIsNamedWithTheFix() async throws {
        let dir = try DaemonProcess.makeDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let closed = dir.appendingPathComponent("closed")
        try FileManager.default.createDirectory(at: closed, withIntermediateDirectories: false)
        chmod(closed.path, 0o766)  // readable and writable by others, not searchable
        let user = try ReadOnlyDatabaseTests.daemonUser()
        let own = "make \(closed.path) searchable and writable by the daemon's user (chown daemon \(closed.path) && chmod 0755 \(closed.path))"
        let above = "let the daemon's user search \(closed.path) (chmod o+x, or g+x for a group it is in)"
        // Symbolic links on the way, to the closed directory and to one inside it: the closed
        // one is named, with the link (a bare "stat PATH: Permission denied", or the link
        // blamed, before).
        try FileManager.default.createDirectory(at: closed.appendingPathComponent("inner"), withIntermediateDirectories: false)
        let link = dir.appendingPathComponent("link"), deepLink = dir.appendingPathComponent("deep")
        try FileManager.default.createSymbolicLink(atPath: link.path, withDestinationPath: "closed")
        try FileManager.default.createSymbolicLink(atPath: deepLink.path, withDestinationPath: "closed/inner")
        func via(_ link: URL) -> String { " (on the way through the symbolic link \(link.path))" }
        let cases = [
            (closed.appendingPathComponent("x.sock").path, "the directory \(closed.path)", "", own),
            (closed.path + "//x.sock", "the directory \(closed.path)", "", own),
            (closed.appendingPathComponent("sub/x.sock").path, "\(closed.path), a directory on the way to it,", "", above),
            (link.appendingPathComponent("x.sock").path, "the directory \(closed.path)", via(link), own),
            (deepLink.appendingPathComponent("x.sock").path, "\(closed.path), a directory on the way to it,", via(deepLink), above),
        ]
        for (path, place, through, fix) in cases {
            let daemon = try DaemonProcess(arguments: ["--gpsd", "127.0.0.1:1", "--socket", path], database: "none",
                                           launcher: ReadOnlyDatabaseTests.asDaemonUser)
            defer { daemon.stop() }
            let status = daemon.waitForExit()
            let log = daemon.stderrText()
            #expect(status == 78, "\(log.suffix(1000))")
            #expect(log.contains("cannot create the socket \(path): \(place) cannot be entered by user daemon, uid \(user.uid) (no search permission)\(through); \(fix), or set [socket] path (--socket)"), "\(log.suffix(1000))")
        }
        // A relative path from a working directory it cannot enter: that directory is named (it
        // was the path's first component, which need not even exist).
        let relative = try DaemonProcess(arguments: ["--gpsd", "127.0.0.1:1", "--socket", "run/x.sock"], database: "none",
                                         launcher: ["/usr/bin/env", "-C", closed.path] + ReadOnlyDatabaseTests.asDaemonUser)
        defer { relative.stop() }
        #expect(relative.waitForExit() == 78)
        let log = relative.stderrText()
        #expect(log.contains("cannot create the socket run/x.sock: \(closed.path), a directory on the way to it, cannot be entered by user daemon, uid \(user.uid) (no search permission); \(above)"), "\(log.suffix(1000))")
    }

    /// A file where a directory of the socket's path should be is not blamed for a missing
    /// search permission (a file without an x bit refuses X_OK even to root): the start fails
    /// with "Not a directory", naming the path.
    @Test func aFileInTheSocketsPathIsNotADirectoryNotAPermission() async throws {
        let dir = try DaemonProcess.makeDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("notadir")
        #expect(FileManager.default.createFile(atPath: file.path, contents: Data(), attributes: [.posixPermissions: 0o644]))
        #expect(Database.unsearchable(file.path) == nil && Database.unsearchable(file.path + "/sub") == nil)
        let path = file.appendingPathComponent("x.sock").path
        let daemon = try DaemonProcess(arguments: ["--gpsd", "127.0.0.1:1", "--socket", path], database: "none")
        defer { daemon.stop() }
        let status = daemon.waitForExit()
        let log = daemon.stderrText()
        #expect(status == 78, "\(log.suffix(1000))")
        #expect(log.contains("Not a directory") && log.contains(file.path) && !log.contains("cannot be entered"), "\(log.suffix(1000))")
    }
}

/// The socket from `bind` to serving: it has its mode and listens before anyone can reach it.
@Suite(.serialized) struct SocketBindTests {
    static func path() -> String { "/tmp/locationd-bind-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sock" }

    /// Bound but not yet listening (NIO listens only once it takes the descriptor over), the
    /// socket would refuse connections, so a second daemon starting on the path would take it
    /// for a stale one and unlink it: the first would serve a file nobody can reach.
    @Test func aFreshlyBoundSocketIsNotTakenForAStaleOne() throws {
        let path = Self.path()
        defer { unlink(path) }
        let fd = try SocketServer.bindSocket(path, mode: 0o660)
        defer { close(fd) }
        #expect(throws: SocketServerError.self) { try SocketServer.prepareSocketPath(path) }
        #expect(access(path, F_OK) == 0, "the first daemon's socket was unlinked as stale")
    }

    /// Under a permissive umask bind() made the file 0777: until the chmod after NIO listened,
    /// anyone could connect.
    @Test func theSocketHasItsModeFromTheStart() throws {
        let path = Self.path()
        defer { unlink(path) }
        let old = umask(0)
        defer { umask(old) }
        let fd = try SocketServer.bindSocket(path, mode: 0o660)
        defer { close(fd) }
        var st = stat()
        try #require(lstat(path, &st) == 0)
        #expect(st.st_mode & 0o777 == 0o660, "mode after bind: \(String(st.st_mode & 0o777, radix: 8))")
    }
}
