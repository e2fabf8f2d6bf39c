import Foundation
import LocationClient
import LocationCore
@testable import LocationDaemon
import LocationProtocol
import NIOCore
import NIOEmbedded
#if canImport(Glibc)
import Glibc
#endif
import TestSupport
import Testing

/// The open-file limit (docs/systemd.md, "Open files"): the daemon lifts its soft limit to the
/// hard one, says when that is still too low, and works with descriptors above 1,023.
@Suite(.serialized, .timeLimit(.minutes(5))) struct DescriptorLimitTests {
    // MARK: The decision

    @Test func softIsRaisedToHardNeverLowered() {
        // systemd's default for services: 1,024 soft, 524,288 hard.
        #expect(DescriptorLimit.raisedSoft(from: .init(soft: 1024, hard: 524_288)) == 524_288)
        #expect(DescriptorLimit.raisedSoft(from: .init(soft: 1024, hard: 8192)) == 8192)
        // LimitNOFILE=8192 sets both: nothing to do.
        #expect(DescriptorLimit.raisedSoft(from: .init(soft: 8192, hard: 8192)) == nil)
        #expect(DescriptorLimit.raisedSoft(from: .init(soft: 1024, hard: 1024)) == nil)
        // "unlimited" is refused for RLIMIT_NOFILE: the kernel's default nr_open instead.
        let unlimited = DescriptorLimit.unlimited
        #expect(DescriptorLimit.raisedSoft(from: .init(soft: 1024, hard: unlimited)) == 1 << 20)
        #expect(DescriptorLimit.raisedSoft(from: .init(soft: unlimited, hard: unlimited)) == nil)
    }

    @Test func shortLimitsAreThoseBelowTwoThousand() {
        #expect(DescriptorLimit.isShort(.init(soft: 1024, hard: 1024)))
        #expect(DescriptorLimit.isShort(.init(soft: 2047, hard: 4096)))
        #expect(!DescriptorLimit.isShort(.init(soft: 2048, hard: 2048)))
        #expect(!DescriptorLimit.isShort(.init(soft: 524_288, hard: 524_288)))
        #expect(DescriptorLimit(soft: 1024, hard: DescriptorLimit.unlimited).description == "1024 soft, unlimited hard")
    }

    // MARK: The real daemon

    /// `Max open files` of `/proc/PID/limits`: (soft, hard).
    static func openFiles(of pid: pid_t) -> (soft: String, hard: String)? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/limits", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("Max open files") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            return (String(fields[3]), String(fields[4]))
        }
        return nil
    }

    /// The test process's hard limit: the spawned daemon's can be at most that.
    static var ownHard: UInt64 { DescriptorLimit.current()?.hard ?? 1024 }

    /// Connects once the daemon serves (polling its startup, not pacing the test).
    static func connect(_ daemon: DaemonProcess) async throws -> LocationClient {
        let deadline = Date().addingTimeInterval(10)
        while true {
            do { return try await LocationClient.connect(path: daemon.socketPath) } catch {
                guard Date() < deadline, daemon.waitForExit(timeout: 0) == nil else {
                    throw DaemonProcess.Failure(description: "cannot connect: \(error); stderr: \(daemon.stderrText())")
                }
                try await Task.sleep(for: .milliseconds(20))
            }
        }
    }

    static func arguments(_ dir: URL, _ more: [String]) -> [String] {
        ["--socket", dir.appendingPathComponent("locationd.sock").path, "--database", "none", "--log-level", "info"] + more
    }

    /// Started with systemd's default soft limit (1,024) under a higher hard one, the daemon's
    /// soft limit is the hard one (/proc/PID/limits), and it logs both at info.
    @Test func spawnedDaemonRaisesItsSoftLimitToTheHardOne() async throws {
        let hard = min(Self.ownHard, 4096)
        try #require(hard > 1024, "the test process's hard RLIMIT_NOFILE is \(hard): cannot test a raise")
        let dir = try DaemonProcess.makeDirectory()
        let daemon = try DaemonProcess(spawning: Self.arguments(dir, ["--gpsd", "127.0.0.1:1"]), environment: [:],
                                       directory: dir, openFiles: (1024, hard))
        defer { daemon.stop() }
        try await Self.connect(daemon).close()
        let limits = try #require(Self.openFiles(of: daemon.pid))
        #expect(limits.soft == "\(hard)" && limits.hard == "\(hard)", "Max open files: \(limits)")
        #expect(daemon.stderrText().contains("info locationd: open-file limit hard=\(hard) soft=\(hard) was=1024"), "\(daemon.stderrText())")
        #expect(!daemon.stderrText().contains("LimitNOFILE="), "a notice although \(hard) is enough")
    }

    /// With a hard limit of 1,024 nothing can be raised: a notice names the limit and the fix.
    @Test func aLowHardLimitIsNamedWithItsFix() async throws {
        let dir = try DaemonProcess.makeDirectory()
        let daemon = try DaemonProcess(spawning: Self.arguments(dir, ["--gpsd", "127.0.0.1:1"]), environment: [:],
                                       directory: dir, openFiles: (1024, 1024))
        defer { daemon.stop() }
        try await Self.connect(daemon).close()
        let limits = try #require(Self.openFiles(of: daemon.pid))
        #expect(limits.soft == "1024" && limits.hard == "1024")
        let log = daemon.stderrText()
        let notice = log.split(separator: "\n").first { $0.contains("LimitNOFILE=") }
        #expect(notice?.contains("1024 soft, 1024 hard") == true, "\(log)")
        #expect(notice?.contains(" notice locationd: ") == true, "\(notice ?? "no notice")")
    }

    /// The raised limit is usable: with 1,100 connections open, the gpsd connection (opened when
    /// a session needs fixes) gets a descriptor above 1,023 — where libgps's `gps_waiting`
    /// (pselect, FD_SET) would abort the daemon — and fixes still flow.
    @Test(.enabled(if: GPSDHarness.isAvailable, "gpsd is not installed (apt-get install gpsd)"))
    func gpsdOnADescriptorAbove1023StillDeliversFixes() async throws {
        let hard = min(Self.ownHard, 4096)
        try #require(hard >= 2048, "the test process's hard RLIMIT_NOFILE is \(hard): cannot hold 1,100 connections")
        // This process holds the other ends of the connections too.
        var own = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &own)
        let original = own
        own.rlim_cur = max(own.rlim_cur, rlim_t(hard))
        setrlimit(Int32(RLIMIT_NOFILE.rawValue), &own)
        defer { var o = original; setrlimit(Int32(RLIMIT_NOFILE.rawValue), &o) }

        let gpsd = try GPSDHarness()
        defer { gpsd.shutdown() }
        let log = DaemonEndToEndTests.walk(count: 5, startSecond: 0)
        let dir = try DaemonProcess.makeDirectory()
        let daemon = try DaemonProcess(spawning: Self.arguments(dir, ["--gpsd", "\(gpsd.host):\(gpsd.portString)"]),
                                       environment: [:], directory: dir, openFiles: (1024, hard))
        defer { daemon.stop() }
        try await Self.connect(daemon).close()

        var clients: [RawClient] = []
        defer { for c in clients { c.close() } }
        for i in 0..<1100 {
            var c = try RawClient(path: daemon.socketPath)
            try #require(c.waitFor("\"hello\"") != nil, "connection \(i): no hello; \(daemon.stderrText().suffix(500))")
            clients.append(c)
        }
        let client = try await Self.connect(daemon)
        defer { client.close() }
        var reader = MessageReader(client)
        try await client.startSession(.whenInUse)
        try client.send(.subscribe(id: .number(1), options: SubscriptionOptions()))
        let seen: [ServerMessage]
        do {
            // Served once the subscription is open: fixes before it would not be delivered.
            _ = try await reader.read(timeout: 20) { $0.contains { if case .subscribed = $0 { true } else { false } } }
            gpsd.serve(bytes: log.bytes)
            seen = try await reader.read(timeout: 20) { $0.fixes.count >= log.fixes.count }
        } catch {
            _ = daemon.waitForExit(timeout: 1)
            Issue.record("\(error); daemon: \(daemon.stderrText().split(separator: "\n").filter { !$0.contains("connection opened") }.prefix(30).joined(separator: "\n"))")
            return
        }
        #expect(seen.fixes.map(\.time) == log.fixes.map(\.time))
        let fd = Self.descriptor(of: daemon.pid, connectedToPort: gpsd.gpsdPort)
        #expect(fd.map { $0 > 1023 } == true, "the gpsd connection is on descriptor \(fd.map(String.init) ?? "none")")
        #expect(daemon.waitForExit(timeout: 0) == nil, "the daemon died: \(daemon.stderrText().suffix(1000))")
    }

    /// CPU time (user + system, clock ticks) the process has used (/proc/PID/stat).
    static func cpuTicks(of pid: pid_t) -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = text.lastIndex(of: ")") else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let user = Int(fields[11]), let system = Int(fields[12]) else { return nil }
        return user + system
    }

    /// Out of descriptors, accept() fails with EMFILE while the connection stays in the listen
    /// queue: the daemon pauses accepting (it does not retry at once, at 100 % CPU), says so once
    /// with the limit and the fix, and serves the waiting connections once descriptors are free.
    @Test func outOfDescriptorsTheDaemonWaitsAndRecovers() async throws {
        let dir = try DaemonProcess.makeDirectory()
        let daemon = try DaemonProcess(spawning: Self.arguments(dir, ["--gpsd", "127.0.0.1:1"]), environment: [:],
                                       directory: dir, openFiles: (1024, 1024))
        defer { daemon.stop() }
        try await Self.connect(daemon).close()
        // Room for 25 connections over what it holds now (descriptors inherited from this test
        // process included, however many earlier tests left open).
        let open = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(daemon.pid)/fd").count
        let limit = open + 25
        let prlimit = Process()
        prlimit.executableURL = URL(fileURLWithPath: "/usr/bin/prlimit")
        prlimit.arguments = ["--pid", "\(daemon.pid)", "--nofile=\(limit):\(limit)"]
        try prlimit.run()
        prlimit.waitUntilExit()
        let lowered = prlimit.terminationStatus == 0
        #expect(lowered, "prlimit --pid \(daemon.pid) --nofile=\(limit):\(limit) failed")
        guard lowered else { return }
        // Connecting succeeds while the listen queue (128) has room, accepted or not.
        var clients: [RawClient] = []
        defer { for c in clients { c.close() } }
        for _ in 0..<60 { clients.append(try RawClient(path: daemon.socketPath)) }
        let deadline = Date().addingTimeInterval(10)
        while !daemon.stderrText().contains("cannot accept a connection"), Date() < deadline { usleep(10_000) }
        let log = daemon.stderrText()
        let line = log.split(separator: "\n").first { $0.contains("cannot accept a connection") }
        #expect(line?.contains(" error locationd: ") == true, "\(log.suffix(1500))")
        #expect(line?.contains("open-file limit (RLIMIT_NOFILE, \(limit) soft, \(limit) hard)") == true, "\(line ?? "no line")")
        #expect(line?.contains("LimitNOFILE=") == true, "\(line ?? "no line")")
        // Each accepted connection was sent its hello before the next accept failed; the rest
        // wait in the listen queue, in order.
        let accepted = clients.indices.filter { clients[$0].waitFor("\"hello\"", timeout: 0.05) != nil }
        let waiting = accepted.count..<clients.count
        try #require(accepted == Array(0..<accepted.count) && accepted.count >= 10 && !waiting.isEmpty,
                     "accepted under a limit of \(limit) (\(open) open before): \(accepted)")

        // While no descriptor is free: no hello, and the daemon idles (a retry loop would use
        // the whole second of CPU).
        let before = try #require(Self.cpuTicks(of: daemon.pid))
        let started = Date()
        #expect(clients[waiting.last!].waitFor("\"hello\"", timeout: 1.5) == nil)
        let elapsed = Date().timeIntervalSince(started)
        let used = Double(try #require(Self.cpuTicks(of: daemon.pid)) - before) / Double(sysconf(Int32(_SC_CLK_TCK)))
        #expect(used < elapsed * 0.3, "the daemon used \(used) s of CPU in \(elapsed) s while out of descriptors")
        #expect(daemon.stderrText().split(separator: "\n").filter { $0.contains("cannot accept a connection") }.count == 1,
                "the failure is logged once a minute, not at every attempt")

        // Descriptors freed (the accepted connections closed): as many waiting ones are served.
        for i in accepted { clients[i].close() }
        for i in waiting.prefix(accepted.count) {
            #expect(clients[i].waitFor("\"hello\"", timeout: 10) != nil, "connection \(i) was not served after descriptors were freed")
        }
        clients.removeFirst(accepted.count)
        #expect(daemon.stderrText().contains("notice locationd: accepting connections again after"), "\(daemon.stderrText().suffix(1000))")
        #expect(daemon.waitForExit(timeout: 0) == nil, "the daemon died: \(daemon.stderrText().suffix(1000))")
    }

    /// The daemon's descriptor whose TCP connection goes to `port` on 127.0.0.1 (/proc/net/tcp).
    static func descriptor(of pid: pid_t, connectedToPort port: UInt16) -> Int? {
        // Read to the end: procfs reports size 0, and a one-page read misses sockets once earlier
        // tests have left a longer table (TIME_WAIT entries in a full run).
        guard let handle = FileHandle(forReadingAtPath: "/proc/net/tcp") else { return nil }
        defer { try? handle.close() }
        let table = String(decoding: handle.readDataToEndOfFile(), as: UTF8.self)
        let remote = String(format: "0100007F:%04X", port)
        let inodes = Set(table.split(separator: "\n").dropFirst().compactMap { line -> String? in
            let f = line.split(separator: " ", omittingEmptySubsequences: true)
            return f.count > 9 && f[2] == remote ? String(f[9]) : nil
        })
        let dir = "/proc/\(pid)/fd"
        for name in (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? [] {
            guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "\(dir)/\(name)"),
                  target.hasPrefix("socket:[") else { continue }
            if inodes.contains(String(target.dropFirst(8).dropLast())) { return Int(name) }
        }
        return nil
    }
}

/// At the limit with clients coming and going, each 1 s retry accepts one connection and the
/// next accept fails again: the error and the recovery are each logged at most once a minute
/// (they reset each other's minute and alternated every second).
@Suite struct AcceptFailureLogTests {
    @Test func churnAtTheLimitIsLoggedAtMostOnceAMinute() throws {
        let loop = EmbeddedEventLoop()
        let channel = EmbeddedChannel(loop: loop)
        let log = CapturedLog()
        try channel.pipeline.syncOperations.addHandler(AcceptFailures(registry: ConnectionRegistry(eventLoop: loop, configuration: SocketServer.Configuration(path: "/unused")), logger: log.logger))
        _ = try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        for _ in 0..<90 {
            channel.pipeline.fireErrorCaught(IOError(errnoCode: EMFILE, reason: "accept"))
            loop.advanceTime(by: .seconds(1))
            channel.pipeline.syncOperations.fireChannelRead(NIOAny(channel as any Channel))
        }
        #expect(log.messages(.error).count == 2, "\(log.messages(.error))")
        #expect(log.messages(.notice).count == 2, "\(log.messages(.notice))")
        #expect(log.messages(.notice).first?.hasPrefix("accepting connections again after 1 failed attempt") == true)
        #expect(log.messages(.notice).last?.hasPrefix("accepting connections again after 60 failed attempts") == true)
    }
}
