import Foundation
import LocationCore
import LocationProtocol
import Simulation
import Testing

/// Offline reverse geocoding (docs/places.md, "Locality"): with a gazetteer generated in GeoNames'
/// format, visit and significant events carry the nearest populated place, looked up from the
/// position the event shows.
@Suite(.serialized, .timeLimit(.minutes(5)))
struct LocalityTests {
    /// The demo scenario's log, and a gazetteer with a town 300 m north of each true stay (named
    /// after it) and one far away.
    static func demo(in dir: URL) throws -> (log: URL, gazetteer: URL, truth: [TrueVisit]) {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let scenario = try Scenario.parse(String(contentsOf: root.appendingPathComponent("Scenarios/demo.json"), encoding: .utf8))
        let output = Simulator(scenario).run()
        let log = dir.appendingPathComponent("demo.nmea")
        try Data(output.nmea).write(to: log)
        var rows = output.truth.enumerated().map { n, v in
            let town = Scenario.offset(v.coordinate, north: 300, east: 0)
            return GeoNamesSample.row(id: n + 1, name: "Town \(n)", latitude: town.latitude, longitude: town.longitude,
                                      countryCode: "DE", admin1: "0\(n + 1)")
        }
        rows.append(GeoNamesSample.row(id: 99, name: "Faraway", latitude: -40, longitude: 170, countryCode: "NZ", admin1: "E7"))
        let gazetteer = dir.appendingPathComponent("cities500.txt")
        try Data(rows.joined().utf8).write(to: gazetteer)
        return (log, gazetteer, output.truth)
    }

    static func directory() throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("locality-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir
    }

    /// The `locality` object of a line, and the line's own position.
    static func locality(of line: String) throws -> (name: String, countryCode: String, admin1: String, distance: Double, at: Coordinate)? {
        guard case .object(let o) = try JSONParser().parse(line) else { return nil }
        guard case .number(let lat)? = o["latitude"], case .number(let lon)? = o["longitude"] else { return nil }
        guard case .object(let l)? = o["locality"] else { return nil }
        guard case .string(let name)? = l["name"], case .string(let cc)? = l["countryCode"], case .string(let a1)? = l["admin1"],
              case .number(let d)? = l["distance"] else { return nil }
        return (name, cc, a1, d, Coordinate(latitude: lat, longitude: lon))
    }

    /// The town a locality names, from the gazetteer's rows.
    static func town(_ name: String, in gazetteer: URL) throws -> Coordinate {
        let row = try String(contentsOf: gazetteer, encoding: .utf8).split(separator: "\n").first { $0.split(separator: "\t")[1] == name }!
        let c = row.split(separator: "\t", omittingEmptySubsequences: false)
        return Coordinate(latitude: Double(c[4])!, longitude: Double(c[5])!)
    }

    @Test func replayedVisitsAndSignificantChangesCarryTheNearestTown() throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (log, gazetteer, truth) = try Self.demo(in: dir)
        let replay = try LocationCtlReplayTests.run(["replay", log.path, "--events", "visits,significant", "--gazetteer", gazetteer.path])
        #expect(replay.status == 0, "\(replay.err)")
        let lines = replay.out.split(separator: "\n").map(String.init)
        let visits = lines.filter { $0.hasPrefix("{\"type\":\"visit\"") }
        #expect(visits.count == 2 * truth.count - 1)
        #expect(lines.contains { $0.hasPrefix("{\"type\":\"significant\"") })
        for line in lines {
            let l = try #require(try Self.locality(of: line), "no locality in \(line)")
            // The nearest of the generated towns to the event's own position, at its distance.
            let nearest = truth.indices.min { a, b in
                Geodesy.distance(l.at, try! Self.town("Town \(a)", in: gazetteer)) < Geodesy.distance(l.at, try! Self.town("Town \(b)", in: gazetteer))
            }!
            #expect(l.name == "Town \(nearest)" && l.countryCode == "DE" && l.admin1 == "0\(nearest + 1)", "\(line)")
            #expect(abs(l.distance - Geodesy.distance(l.at, try Self.town(l.name, in: gazetteer))) <= 1, "\(line)")
        }
        // A visit is at a stay: a town is at most 300 m away (its own, or a nearer neighbour's).
        for line in visits {
            let l = try #require(try Self.locality(of: line))
            #expect(l.distance < 310, "\(line)")
        }
        // Without a gazetteer, no locality.
        let plain = try LocationCtlReplayTests.run(["replay", log.path, "--events", "visits,significant"])
        #expect(!plain.out.contains("locality"))
        #expect(plain.out.split(separator: "\n").count == lines.count)
    }

    /// An approximate program's localities are those of its cell centres: the distance is from
    /// the published position (a precise lookup's would differ by the hundreds of metres
    /// between a stay and its cell's centre).
    @Test func approximateLocalityIsLookedUpFromTheCellCentre() throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (log, gazetteer, truth) = try Self.demo(in: dir)
        let replay = try LocationCtlReplayTests.run(["replay", log.path, "--events", "visits", "--accuracy", "approximate",
                                                     "--privacy-seed", "42", "--gazetteer", gazetteer.path])
        #expect(replay.status == 0, "\(replay.err)")
        let visits = replay.out.split(separator: "\n").map(String.init).filter { $0.hasPrefix("{\"type\":\"visit\"") }
        #expect(!visits.isEmpty)
        let grid = PrivacyGrid(secret: 42)
        for line in visits {
            let l = try #require(try Self.locality(of: line), "no locality in \(line)")
            #expect(Geodesy.distance(l.at, grid.centre(of: grid.cell(of: l.at).cell)) < 0.5, "not a cell centre: \(line)")
            #expect(abs(l.distance - Geodesy.distance(l.at, try Self.town(l.name, in: gazetteer))) <= 1, "\(line)")
            let stay = truth.map(\.coordinate).min { Geodesy.distance($0, l.at) < Geodesy.distance($1, l.at) }!
            #expect(Geodesy.distance(stay, l.at) > 5, "the cell centre is not the stay")
        }
    }

    @Test func replayNamesAMalformedRowByLine() throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (log, gazetteer, _) = try Self.demo(in: dir)
        var text = try String(contentsOf: gazetteer, encoding: .utf8)
        text += "100\tBroken\tBroken\t\t12.5\teast\tP\tPPL\tDE\t\t01\t\t\t\t1\t\t1\tUTC\t2024-01-01\n"
        try Data(text.utf8).write(to: gazetteer)
        let rows = text.split(separator: "\n").count
        let replay = try LocationCtlReplayTests.run(["replay", log.path, "--events", "visits", "--gazetteer", gazetteer.path])
        #expect(replay.status != 0 && replay.out.isEmpty)
        #expect(replay.err.contains("\(gazetteer.path):\(rows): longitude 'east' is not a number in -180…180"), "\(replay.err)")
        // So does the index build, which writes nothing.
        let build = try LocationCtlReplayTests.run(["gazetteer", "build", gazetteer.path])
        #expect(build.status == 1 && build.err.contains("\(gazetteer.path):\(rows): longitude 'east' is not a number in -180…180"), "\(build.err)")
        #expect(!FileManager.default.fileExists(atPath: gazetteer.path + ".idx"))
    }

    /// The daemon with `[geocoding] gazetteer` sends the lines replay prints (read raw: the
    /// client library's messages do not keep `locality`).
    @Test func daemonSendsTheLocalitiesReplayPrints() async throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (log, gazetteer, _) = try Self.demo(in: dir)
        let config = dir.appendingPathComponent("locationd.toml")
        try "[geocoding]\ngazetteer = \"\(gazetteer.path)\"\n".write(to: config, atomically: true, encoding: .utf8)
        let replay = try LocationCtlReplayTests.run(["replay", log.path, "--events", "visits,significant", "--gazetteer", gazetteer.path])
        let expected = replay.out.split(separator: "\n").map(String.init)
        #expect(expected.allSatisfy { $0.contains("\"locality\":{") })

        let daemon = try DaemonProcess(arguments: ["--config", config.path, "--replay", log.path, "--speed", "0"])
        defer { daemon.stop() }
        try await daemon.connect().close()  // the socket is up
        let raw = RawSocket(path: daemon.socketPath)
        raw.send("{\"type\":\"session.start\",\"authorization\":\"always\"}\n{\"type\":\"subscribe\",\"events\":[\"visits\",\"significant\"]}\n")
        var received: [String] = []
        var disconnected = 0
        while disconnected < 2, let line = raw.readLine() {
            if line.hasPrefix("{\"type\":\"visit\"") || line.hasPrefix("{\"type\":\"significant\"") { received.append(line) }
            if line.hasPrefix("{\"type\":\"status\",\"state\":\"disconnected\"") { disconnected += 1 }
        }
        #expect(received == expected)
    }

    /// Under the shipped unit (ProtectHome=yes, played by a mode-0000 tmpfs on /home in a mount
    /// namespace of the daemon's own, as SystemdTests do), a gazetteer in a home directory is
    /// named as hidden by the unit, with where to put it.
    @Test(.enabled(if: getuid() == 0 && DaemonProcess.canHideHome)) func aGazetteerTheUnitHidesSaysWhy() throws {
        let path = "/home/nobody-\(UUID().uuidString.prefix(8))/cities500.txt"
        let dir = try DaemonProcess.makeDirectory()
        let config = dir.appendingPathComponent("locationd.toml")
        try "[geocoding]\ngazetteer = \"\(path)\"\n".write(to: config, atomically: true, encoding: .utf8)
        let daemon = try DaemonProcess(spawning: ["--config", config.path, "--gpsd", "127.0.0.1:1", "--socket", dir.appendingPathComponent("s").path,
                                                   "--database", "none"],
                                       environment: ["INVOCATION_ID": "0123456789abcdef0123456789abcdef"], directory: dir,
                                       wrapper: ["/usr/bin/unshare", "-m"], prelude: "mount -t tmpfs -o mode=000 tmpfs /home || exit 98; ")
        defer { daemon.stop() }
        #expect(daemon.waitForExit() == 78, "\(daemon.stderrText())")
        #expect(daemon.stderrText().contains("\(path): gazetteer cannot be opened: no such file, as the daemon sees it: the unit's ProtectHome=yes hides /home from locationd; move it to /var/lib/locationd"), "\(daemon.stderrText())")
    }

    /// A gazetteer the daemon cannot use stops its start with 78, naming the file and line.
    @Test func daemonRefusesAMalformedGazetteer() throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let gazetteer = dir.appendingPathComponent("cities500.txt")
        try Data((GeoNamesSample.row(id: 1, name: "A", latitude: 1, longitude: 2, countryCode: "XX", admin1: "01") + "2\tB\n").utf8).write(to: gazetteer)
        let config = dir.appendingPathComponent("locationd.toml")
        try "[geocoding]\ngazetteer = \"\(gazetteer.path)\"\n".write(to: config, atomically: true, encoding: .utf8)
        let daemon = try DaemonProcess(arguments: ["--config", config.path, "--gpsd", "127.0.0.1:1"])
        defer { daemon.stop() }
        #expect(daemon.waitForExit() == 78, "\(daemon.stderrText().suffix(1000))")
        #expect(daemon.stderrText().contains("\(gazetteer.path):2: gazetteer: 2 columns"), "\(daemon.stderrText().suffix(1000))")
    }

    /// The visit and significant lines a daemon with `[geocoding] gazetteer = PATH` sends for
    /// the log, and its log.
    static func daemonLines(gazetteer: URL, log: URL, in dir: URL) async throws -> (lines: [String], log: String) {
        let config = dir.appendingPathComponent("locationd.toml")
        try "[geocoding]\ngazetteer = \"\(gazetteer.path)\"\n".write(to: config, atomically: true, encoding: .utf8)
        let daemon = try DaemonProcess(arguments: ["--config", config.path, "--replay", log.path, "--speed", "0"])
        defer { daemon.stop() }
        try await daemon.connect().close()  // the socket is up
        let raw = RawSocket(path: daemon.socketPath)
        raw.send("{\"type\":\"session.start\",\"authorization\":\"always\"}\n{\"type\":\"subscribe\",\"events\":[\"visits\",\"significant\"]}\n")
        var received: [String] = []
        var disconnected = 0
        while disconnected < 2, let line = raw.readLine() {
            if line.hasPrefix("{\"type\":\"visit\"") || line.hasPrefix("{\"type\":\"significant\"") { received.append(line) }
            if line.hasPrefix("{\"type\":\"status\",\"state\":\"disconnected\"") { disconnected += 1 }
        }
        return (received, daemon.stderrText())
    }

    /// `locationctl gazetteer build` writes PATH.idx; the daemon loads it while the dump is the
    /// file it was built from (same size and modification time) — shown by a dump edited in
    /// place and given its old time back, whose new name the daemon does not see — and reads
    /// the dump, saying why, once the dump has changed.
    @Test func daemonLoadsThePrebuiltIndexWhileTheDumpIsUnchanged() async throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (log, gazetteer, truth) = try Self.demo(in: dir)
        let built = try LocationCtlReplayTests.run(["gazetteer", "build", gazetteer.path])
        #expect(built.status == 0, "\(built.err)")
        #expect(built.out == "\(gazetteer.path).idx: \(truth.count + 1) places, index of \(gazetteer.path) as it is now\n")
        let fromDump = try LocationCtlReplayTests.run(["replay", log.path, "--events", "visits,significant", "--gazetteer", gazetteer.path])
        let expected = fromDump.out.split(separator: "\n").map(String.init)
        #expect(expected.contains { $0.contains("\"name\":\"Town 0\"") })

        // The same bytes but one name, and the old modification time.
        var st = stat()
        #expect(stat(gazetteer.path, &st) == 0)
        let text = try String(contentsOf: gazetteer, encoding: .utf8)
        try Data(text.replacingOccurrences(of: "\tTown 0\tTown 0\t", with: "\tTovn 0\tTovn 0\t").utf8).write(to: gazetteer)
        var times = [st.st_atim, st.st_mtim]
        #expect(utimensat(AT_FDCWD, gazetteer.path, &times, 0) == 0)
        let indexed = try await Self.daemonLines(gazetteer: gazetteer, log: log, in: dir)
        #expect(indexed.lines == expected)
        let replayed = try LocationCtlReplayTests.run(["replay", log.path, "--events", "visits,significant", "--gazetteer", gazetteer.path])
        #expect(replayed.out == fromDump.out && replayed.err.isEmpty, "\(replayed.err)")
        #expect(indexed.log.contains("gazetteer file=\(gazetteer.path).idx places=\(truth.count + 1)"), "\(indexed.log.suffix(2000))")

        // A new modification time: the dump is read (its new name), and the log says why.
        var later = [st.st_atim, timespec(tv_sec: st.st_mtim.tv_sec + 1, tv_nsec: st.st_mtim.tv_nsec)]
        #expect(utimensat(AT_FDCWD, gazetteer.path, &later, 0) == 0)
        let reread = try await Self.daemonLines(gazetteer: gazetteer, log: log, in: dir)
        #expect(reread.lines == expected.map { $0.replacingOccurrences(of: "\"name\":\"Town 0\"", with: "\"name\":\"Tovn 0\"") })
        #expect(reread.log.contains("gazetteer index not used"), "\(reread.log.suffix(2000))")
        #expect(reread.log.contains("was built from another version of the dump"), "\(reread.log.suffix(2000))")
        #expect(reread.log.contains("gazetteer file=\(gazetteer.path) places="), "\(reread.log.suffix(2000))")
        let replayedAgain = try LocationCtlReplayTests.run(["replay", log.path, "--events", "visits,significant", "--gazetteer", gazetteer.path])
        #expect(replayedAgain.out.split(separator: "\n").map(String.init) == reread.lines)
        #expect(replayedAgain.err.contains("\(gazetteer.path).idx: was built from another version of the dump"), "\(replayedAgain.err)")

        // A damaged index is passed over the same way.
        let index = gazetteer.path + ".idx"
        #expect(truncate(index, 100) == 0)
        let damaged = try await Self.daemonLines(gazetteer: gazetteer, log: log, in: dir)
        #expect(damaged.log.contains("(truncated or damaged)"), "\(damaged.log.suffix(2000))")
        #expect(damaged.lines == reread.lines)
    }
}
