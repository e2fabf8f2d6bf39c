import Foundation
import Glibc
import LocationCore
import NMEA
import TestSupport
import Testing

/// A reload (SIGHUP) decides open gpsd-protocol and NMEA-socket connections again, as it does
/// Unix-socket sessions (docs/compatibility.md): made approximate, they get the published cell
/// from then on; made denied, the gpsd client gets ERROR and both are closed.
@Suite(.serialized, .timeLimit(.minutes(3)), .enabled(if: GPSDListenerDaemon.available, "gpsd corpus not found at ../shared/corpus/gpsd"))
struct CompatibilityReloadTests {
    @Test("Reload: precise → approximate → denied, on a gpsd-protocol and an NMEA-socket connection")
    func reloadDecidesOpenConnections() async throws {
        let log = try #require(GPSDHarness.corpusLog(GPSDListenerDaemon.log))
        let dir = try DaemonProcess.makeDirectory()
        let notify = try DatagramSocket(path: dir.appendingPathComponent("notify.sock").path)
        let config = dir.appendingPathComponent("locationd.toml")
        // This test process is the program: both connections are identified as it (inet_diag
        // for TCP, SO_PEERCRED for the Unix socket), by its user.
        func policy(_ authorization: String, _ accuracy: String) throws {
            try "[policy.me]\nuser = \(getuid())\nauthorization = \"\(authorization)\"\naccuracy = \"\(accuracy)\"\n"
                .write(to: config, atomically: true, encoding: .utf8)
        }
        try policy("when-in-use", "precise")
        let port = try GPSDHarness.freePort()
        let nmeaPath = dir.appendingPathComponent("nmea.sock").path
        // At the log's own pace: the replay outlasts the test.
        let daemon = try DaemonProcess(
            spawning: ["--config", config.path, "--socket", dir.appendingPathComponent("locationd.sock").path,
                       "--replay", log.path, "--speed", "1", "--privacy-seed", "7",
                       "--gpsd-listen", "127.0.0.1:\(port)", "--nmea-socket", nmeaPath],
            environment: ["NOTIFY_SOCKET": notify.path], directory: dir)
        defer { daemon.stop() }
        func reload() throws {
            daemon.signal(SIGHUP)
            _ = try SystemdTests.read(notify) { SystemdTests.lines($0).contains("READY=1") }
        }
        _ = try SystemdTests.read(notify) { SystemdTests.lines($0).contains("READY=1") }

        let gpsd = RawStream(try ThousandGPSDClientsTests.connect(port: port))
        let nmea = RawStream(try RawStream.connect(path: nmeaPath))
        let watch = Array("?WATCH={\"enable\":true,\"json\":true};".utf8)
        try #require(send(gpsd.fd, watch, watch.count, Int32(MSG_NOSIGNAL)) == watch.count)
        let fixes = try GPSDListenerDaemon.replayedFixes()
        func isReplayed(_ c: Coordinate, within degrees: Double) -> Bool {
            fixes.contains { abs($0.coordinate.latitude - c.latitude) <= degrees && abs($0.coordinate.longitude - c.longitude) <= degrees }
        }

        // Precise: gpsd's 3D TPVs and NMEA positions of the replay.
        #expect(gpsd.read { Self.tpvs($0).contains { $0["mode"] as? Int == 3 } }, "\(gpsd.text)")
        #expect(nmea.read { !Self.positions($0).isEmpty }, "\(nmea.text)")
        #expect(Self.tpvs(gpsd.text).allSatisfy { isReplayed(Coordinate(latitude: $0["lat"] as? Double ?? 0, longitude: $0["lon"] as? Double ?? 0), within: 1e-9) })
        #expect(Self.positions(nmea.text).allSatisfy { isReplayed($0, within: 1e-6) })

        // Approximate: the reload subscribes both again; from the cell it sends at once on, the
        // published cell only (fixes passed on before the reload took effect come first).
        try policy("when-in-use", "approximate")
        let gpsdBefore = gpsd.drain(), nmeaBefore = nmea.drain()
        try reload()
        func isCell(_ t: [String: Any]) -> Bool {
            t["mode"] as? Int == 2 && Set(t.keys).isSubset(of: ["class", "device", "mode", "time", "lat", "lon", "eph"])
                && !isReplayed(Coordinate(latitude: t["lat"] as? Double ?? 0, longitude: t["lon"] as? Double ?? 0), within: 1e-7)
        }
        #expect(gpsd.read { _ in Self.tpvs(gpsd.text(from: gpsdBefore)).contains(where: isCell) }, "\(gpsd.text)")
        let firstCell = Self.tpvs(gpsd.text(from: gpsdBefore)).firstIndex(where: isCell) ?? 0
        let centre = try #require(Self.tpvs(gpsd.text(from: gpsdBefore)).dropFirst(firstCell).first.map {
            Coordinate(latitude: $0["lat"] as? Double ?? 0, longitude: $0["lon"] as? Double ?? 0)
        })
        // NMEA's 5 decimals of minutes: within 1e-6°.
        func isCentre(_ p: Coordinate) -> Bool { abs(centre.latitude - p.latitude) <= 1e-6 && abs(centre.longitude - p.longitude) <= 1e-6 }
        #expect(nmea.read { _ in Self.positions(nmea.text(from: nmeaBefore)).contains(where: isCentre) }, "\(nmea.text)")

        // Denied: the gpsd client gets ERROR naming the rule, then both are closed.
        try policy("denied", "approximate")
        _ = gpsd.drain()
        _ = nmea.drain()
        let approximate = Self.tpvs(gpsd.text(from: gpsdBefore)).dropFirst(firstCell)
        let gpsdApproximate = gpsd.drain()
        for t in approximate {
            #expect(isCell(t), "\(t)")
            #expect(t["lat"] as? Double == centre.latitude && t["lon"] as? Double == centre.longitude, "the log stays in one cell: \(t)")
        }
        let nmeaPositions = Self.positions(nmea.text(from: nmeaBefore))
        let nmeaFirstCell = nmeaPositions.firstIndex(where: isCentre) ?? nmeaPositions.count
        #expect(nmeaPositions.dropFirst(nmeaFirstCell).allSatisfy(isCentre), "\(nmeaPositions)")
        #expect(nmeaPositions.prefix(nmeaFirstCell).allSatisfy { isReplayed($0, within: 1e-6) }, "\(nmeaPositions)")
        try reload()
        #expect(gpsd.read { _ in false } && gpsd.isClosed, "not closed: \(gpsd.text)")
        #expect(nmea.read { _ in false } && nmea.isClosed, "not closed")
        let last = GPSDListenerDaemon.objects(gpsd.text(from: gpsdApproximate))
        #expect(last.map { $0["class"] as? String } == ["ERROR"], "\(last)")
        #expect((last.last?["message"] as? String)?.contains("policy rule 'me'") == true, "\(last)")
        #expect(daemon.isRunning)
    }

    static func tpvs(_ text: String) -> [[String: Any]] {
        GPSDListenerDaemon.objects(text).filter { $0["class"] as? String == "TPV" }
    }

    /// The positions of the NMEA text's sentences, through the project's decoder.
    static func positions(_ text: String) -> [Coordinate] {
        var decoder = NMEADecoder()
        var out: [Coordinate] = []
        decoder.feed(Array(text.utf8)) { if let f = $0.fix { out.append(f.coordinate) } }
        decoder.finish { if let f = $0.fix { out.append(f.coordinate) } }
        return out
    }
}

/// A client socket read from the test's thread: everything it has been sent, and whether the
/// peer closed it. Reads are bounded by a deadline that only ends a hang.
final class RawStream {
    let fd: Int32
    private var bytes: [UInt8] = []
    private(set) var isClosed = false
    var text: String { String(decoding: bytes, as: UTF8.self) }
    /// The text from byte `offset` on (a `drain()`'s result).
    func text(from offset: Int) -> String { String(decoding: bytes.dropFirst(offset), as: UTF8.self) }

    init(_ fd: Int32) { self.fd = fd }
    deinit { Glibc.close(fd) }

    static func connect(path: String) throws -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0, withSockaddr(path, { Glibc.connect(fd, $0, $1) }) == 0 else {
            throw DaemonProcess.Failure(description: "connect \(path): \(errno)")
        }
        return fd
    }

    /// Reads until `done` holds for the text so far, the peer closes, or `timeout` seconds pass;
    /// returns whether `done` held or the peer closed.
    func read(timeout: Double = 20, until done: (String) -> Bool) -> Bool {
        let deadline = ContinuousClock.now + .seconds(timeout)
        while !done(text) && !isClosed && ContinuousClock.now < deadline {
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            if poll(&p, 1, 100) > 0 { receive() }
        }
        return done(text) || isClosed
    }

    /// Reads what has arrived, without waiting; returns how many bytes have been read in all.
    func drain() -> Int {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        while !isClosed && poll(&p, 1, 0) > 0 { if !receive() { break } }
        return bytes.count
    }

    @discardableResult
    private func receive() -> Bool {
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
        if n > 0 { bytes += chunk[0..<n]; return true }
        if n == 0 || (errno != EAGAIN && errno != EINTR) { isClosed = true }
        return false
    }
}
