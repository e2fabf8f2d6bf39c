import CDaemonSupport
import Foundation
import LocationDaemon
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// systemd's protocols as our own code speaks them (no libsystemd): the exact datagrams, the
/// environment rules, and the journal's two transports. The daemon-level tests are in
/// SystemdTests.swift.
@Suite(.timeLimit(.minutes(5))) struct SystemdProtocolTests {
    static func environment(_ values: [String: String]) -> EnvironmentLookup {
        { values[$0] }
    }

    static func directory() throws -> URL {
        let dir = URL(fileURLWithPath: "/tmp/ld-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir
    }

    // MARK: notify

    @Test func notifySendsOneDatagramToThePath() throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let socket = try DatagramSocket(path: dir.appendingPathComponent("notify.sock").path)
        let notifier = SystemdNotifier(environment: Self.environment(["NOTIFY_SOCKET": socket.path]))
        #expect(notifier.isEnabled && notifier.problem == nil)
        #expect(notifier.notify("READY=1\nSTATUS=gpsd localhost:2947: fix; 2 subscribers"))
        #expect(socket.receiveText(timeout: 5) == "READY=1\nSTATUS=gpsd localhost:2947: fix; 2 subscribers")
        #expect(notifier.notify("WATCHDOG=1"))
        #expect(socket.receiveText(timeout: 5) == "WATCHDOG=1")
    }

    @Test func notifyReachesAnAbstractSocket() throws {
        let name = "@locationd-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let address = try UnixSocketAddress(name)
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        try #require(fd >= 0)
        defer { close(fd) }
        try #require(address.withSockaddr { bind(fd, $0, $1) } == 0, "bind \(name): \(String(cString: strerror(errno)))")
        // The bound name is exactly the bytes after '@', without a terminating NUL.
        var bound = sockaddr_un()
        var length = socklen_t(MemoryLayout<sockaddr_un>.size)
        _ = withUnsafeMutablePointer(to: &bound) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        #expect(Int(length) == MemoryLayout<sockaddr_un>.offset(of: \.sun_path)! + name.utf8.count)

        let notifier = SystemdNotifier(environment: Self.environment(["NOTIFY_SOCKET": name]))
        #expect(notifier.notify("STOPPING=1"))
        var buffer = [UInt8](repeating: 0, count: 256)
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        try #require(poll(&pfd, 1, 5000) == 1)
        let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        #expect(String(decoding: buffer[0..<max(n, 0)], as: UTF8.self) == "STOPPING=1")
    }

    @Test func notifyIsOffWithoutOrWithAnUnusableSocket() {
        let off = SystemdNotifier(environment: Self.environment([:]))
        #expect(!off.isEnabled && off.problem == nil && !off.notify("READY=1"))

        let relative = SystemdNotifier(environment: Self.environment(["NOTIFY_SOCKET": "run/notify"]))
        #expect(!relative.isEnabled && !relative.notify("READY=1"))
        #expect(relative.problem?.contains("NOTIFY_SOCKET=run/notify") == true, "\(relative.problem ?? "")")
        #expect(relative.problem?.contains("@name") == true)

        let long = "/" + String(repeating: "x", count: 120)
        let tooLong = SystemdNotifier(environment: Self.environment(["NOTIFY_SOCKET": long]))
        #expect(tooLong.problem?.contains("107 bytes") == true, "\(tooLong.problem ?? "")")
    }

    @Test func notifyToANonexistentSocketFails() {
        let notifier = SystemdNotifier(environment: Self.environment(["NOTIFY_SOCKET": "/tmp/ld-none-\(getpid())/notify.sock"]))
        #expect(notifier.isEnabled)
        #expect(!notifier.notify("READY=1"))
    }

    // MARK: watchdog

    @Test func watchdogIntervalAndOwner() {
        let me: pid_t = 4242
        func usec(_ values: [String: String]) -> UInt64? {
            SystemdNotifier.watchdogMicroseconds(environment: Self.environment(values), pid: me)
        }
        #expect(usec([:]) == nil)
        #expect(usec(["WATCHDOG_USEC": "10000000"]) == 10_000_000)
        #expect(usec(["WATCHDOG_USEC": "10000000", "WATCHDOG_PID": "4242"]) == 10_000_000)
        #expect(usec(["WATCHDOG_USEC": "10000000", "WATCHDOG_PID": "4243"]) == nil, "meant for another process")
        #expect(usec(["WATCHDOG_USEC": "10000000", "WATCHDOG_PID": "x"]) == nil)
        #expect(usec(["WATCHDOG_USEC": "0"]) == nil)
        #expect(usec(["WATCHDOG_USEC": "-5"]) == nil)
        #expect(usec(["WATCHDOG_USEC": "10s"]) == nil)
    }

    // MARK: socket activation

    @Test func passedDescriptorsAreCountedOnlyForUs() throws {
        func count(_ values: [String: String]) throws(SocketActivation.Failure) -> Int {
            try SocketActivation.passedCount(environment: Self.environment(values), pid: 77)
        }
        #expect(try count([:]) == 0)
        #expect(try count(["LISTEN_FDS": "1"]) == 0, "no LISTEN_PID: not for us")
        #expect(try count(["LISTEN_PID": "78", "LISTEN_FDS": "1"]) == 0, "inherited from a parent")
        #expect(try count(["LISTEN_PID": "77", "LISTEN_FDS": "2", "LISTEN_FDNAMES": "a:b"]) == 2)
        #expect(try count(["LISTEN_PID": "77"]) == 0)
        #expect(throws: SocketActivation.Failure.invalid(variable: "LISTEN_FDS", value: "one")) {
            try count(["LISTEN_PID": "77", "LISTEN_FDS": "one"])
        }
        #expect(throws: SocketActivation.Failure.invalid(variable: "LISTEN_PID", value: "me")) {
            try count(["LISTEN_PID": "me", "LISTEN_FDS": "1"])
        }
        let message = SocketActivation.Failure.invalid(variable: "LISTEN_FDS", value: "one").description
        #expect(message.contains("LISTEN_FDS=one") && message.contains("unset it"))
    }

    @Test func onlyAListeningUnixStreamSocketIsServed() throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let address = try UnixSocketAddress(dir.appendingPathComponent("s.sock").path)
        let stream = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(stream) }
        try #require(address.withSockaddr { bind(stream, $0, $1) } == 0)
        #expect(!SocketActivation.isListeningUnixStream(stream), "bound, not listening")
        try #require(listen(stream, 4) == 0)
        #expect(SocketActivation.isListeningUnixStream(stream))

        let datagram = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        defer { close(datagram) }
        #expect(!SocketActivation.isListeningUnixStream(datagram))
        let tcp = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(tcp) }
        #expect(listen(tcp, 4) == 0)
        #expect(!SocketActivation.isListeningUnixStream(tcp), "listening, but not AF_UNIX")
        var pipeEnds: [CInt] = [0, 0]
        try #require(pipe(&pipeEnds) == 0)
        defer { close(pipeEnds[0]); close(pipeEnds[1]) }
        #expect(!SocketActivation.isListeningUnixStream(pipeEnds[0]))
    }

    // MARK: journal

    @Test func journalDatagramIsExactIncludingTheBinarySafeForm() throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let socket = try DatagramSocket(path: dir.appendingPathComponent("journal.sock").path)
        let writer = JournalWriter(path: socket.path)
        #expect(writer.send([("MESSAGE", "two\nlines"), ("PRIORITY", "6"), ("EMPTY", "")]))
        let got = try #require(socket.receive(timeout: 5))
        var expected = Array("MESSAGE\n".utf8)
        expected += [9, 0, 0, 0, 0, 0, 0, 0]  // "two\nlines" is 9 bytes, 64-bit little-endian
        expected += Array("two\nlines\nPRIORITY=6\nEMPTY=\n".utf8)
        #expect(got == expected)
    }

    @Test func journalEntryTooLargeForADatagramGoesInASealedMemfd() throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let socket = try DatagramSocket(path: dir.appendingPathComponent("journal.sock").path)
        let writer = JournalWriter(path: socket.path)
        // 4 MiB: far above any AF_UNIX datagram (the send buffer, 208 KiB by default) → EMSGSIZE.
        let big = String(repeating: "0123456789abcdef", count: 4 * 65536)
        let fields = [("MESSAGE", "large"), ("LOCATIOND_DUMP", big), ("LOCATIOND_LINES", "a\nb")]
        #expect(writer.send(fields))

        var pfd = pollfd(fd: socket.fd, events: Int16(POLLIN), revents: 0)
        try #require(poll(&pfd, 1, 5000) == 1, "nothing arrived")
        var buffer = [UInt8](repeating: 0, count: 4096)
        var passed: CInt = -1
        let n = buffer.withUnsafeMutableBytes { locationd_receive_with_descriptor(socket.fd, $0.baseAddress, $0.count, &passed) }
        #expect(n == 0, "the payload of a memfd datagram is empty")
        try #require(passed >= 0, "no descriptor came with the datagram")
        defer { close(passed) }

        let size = Int(lseek(passed, 0, SEEK_END))
        let expected = JournalWriter.encode(fields)
        #expect(size == expected.count)
        var content = [UInt8](repeating: 0, count: size)
        let read = content.withUnsafeMutableBytes { pread(passed, $0.baseAddress, $0.count, 0) }
        #expect(read == size)
        #expect(content == expected)
        let parsed = try JournalTests.parse(content)
        #expect(parsed["LOCATIOND_DUMP"] == big && parsed["LOCATIOND_LINES"] == "a\nb")
        // Sealed: journald refuses a memfd the sender could still change.
        #expect(pwrite(passed, "x", 1, 0) < 0 && errno == EPERM)
    }

    @Test func journalEntryThatFitsGoesAsAPlainDatagram() throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let socket = try DatagramSocket(path: dir.appendingPathComponent("journal.sock").path)
        let writer = JournalWriter(path: socket.path)
        let fields = [("MESSAGE", String(repeating: "m", count: 100_000))]
        #expect(writer.send(fields))
        var buffer = [UInt8](repeating: 0, count: 256 * 1024)
        var passed: CInt = -1
        var pfd = pollfd(fd: socket.fd, events: Int16(POLLIN), revents: 0)
        try #require(poll(&pfd, 1, 5000) == 1)
        let n = buffer.withUnsafeMutableBytes { locationd_receive_with_descriptor(socket.fd, $0.baseAddress, $0.count, &passed) }
        #expect(passed == -1)
        #expect(Array(buffer[0..<max(n, 0)]) == JournalWriter.encode(fields))
    }

    /// A journal that stops reading (journald busy, stopped or hung): once its queue is full an
    /// entry is dropped and counted instead of holding the thread that logs (the event loop,
    /// for most of the daemon's messages) until it reads again, and once it reads, the count
    /// comes first. (Unbounded, as sd_journal_send waits, the 200 sends here never returned.)
    @Test func aJournalThatStopsReadingIsNotWaitedForAndTheDroppedAreCounted() throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let socket = try DatagramSocket(path: dir.appendingPathComponent("journal.sock").path)
        let writer = JournalWriter(path: socket.path)
        // 200 entries of 8 KB: more than the sender's socket buffer holds (≈ 208 KiB by default)
        // whatever the receiving queue's length (net.unix.max_dgram_qlen: 10 here, 512 where
        // systemd sets it).
        let sent = 200
        let padding = String(repeating: "x", count: 8000)
        for i in 0..<sent { #expect(writer.send([("MESSAGE", "m\(i) " + padding)])) }
        var queued: [String] = []
        while let d = socket.receive(timeout: 0) { queued.append(try JournalTests.parse(d)["MESSAGE"] ?? "?") }
        #expect(!queued.isEmpty && queued.count < sent, "\(queued.count) of \(sent) queued")
        #expect(queued == (0..<queued.count).map { "m\($0) " + padding })
        // Several threads log as the journal comes back: the count is reported once, whole.
        let threads = 4
        DispatchQueue.concurrentPerform(iterations: threads) { i in _ = writer.send([("MESSAGE", "after \(i)")]) }
        var reports: [[String: String]] = [], after = 0
        while let d = socket.receive(timeout: 0) {
            let entry = try JournalTests.parse(d)
            if entry["LOCATIOND_DROPPED"] != nil { reports.append(entry) } else if entry["MESSAGE"]?.hasPrefix("after") == true { after += 1 }
        }
        let report = try #require(reports.first)
        #expect(reports.count == 1, "\(reports)")
        #expect(after == threads)
        #expect(report["LOCATIOND_DROPPED"] == String(sent - queued.count))
        #expect(report["PRIORITY"] == "4")
        #expect(report["MESSAGE"] == "\(sent - queued.count) log messages were dropped while the journal was full (journald busy, stopped or hung)")
    }

    @Test func journalSendFailsWithoutAJournal() {
        #expect(!JournalWriter(path: "/tmp/ld-none-\(getpid())/journal.sock").send([("MESSAGE", "x")]))
        #expect(!JournalWriter(path: "relative/journal.sock").send([("MESSAGE", "x")]))
    }
}
