import Foundation
import LocationCore
import NMEA
import TestSupport
import Testing
@testable import LocationDaemon

/// What gpsd 3.22 reported for a log: its `.chk` (see shared/corpus/gpsd/README.md).
struct ChkExpectation {
    struct Position: Equatable { var time: Timestamp; var lat: Double; var lon: Double; var mode: Int; var eph: Double? }
    /// Every TPV with mode ≥ 2, lat, lon and time, in order.
    var positions: [Position] = []
    /// TPVs with mode ≤ 1, or a status that is no measurement.
    var noFixes = 0
    /// TPVs with mode ≥ 2 but no time or no lat/lon (GPSDSource reports nothing for them).
    var unusablePositions = 0
    /// Every TPV the source reports something for, in order: a position, or a no-fix with its time.
    enum Report { case position(Position), noFix(Timestamp?) }
    var reports: [Report] = []

    init(contentsOf url: URL) throws {
        let text = try String(contentsOf: url, encoding: .utf8)
        for line in text.split(whereSeparator: \.isNewline) where line.hasPrefix(#"{"class":"TPV""#) {
            let obj = try JSONSerialization.jsonObject(with: Data(line.utf8)) as! [String: Any]
            let mode = obj["mode"] as? Int ?? 0
            // Status 5, 7, 8 (dead reckoning, surveyed-in/manual, simulator) are no fix to us
            // (docs/gpsd.md, "TPV → Fix"): garmin-geko201's demo mode.
            let status = obj["status"] as? Int ?? 1
            if mode <= 1 || [5, 7, 8].contains(status) {
                noFixes += 1
                reports.append(.noFix(try (obj["time"] as? String).map(Self.parseTime)))
                continue
            }
            guard let lat = obj["lat"] as? Double, let lon = obj["lon"] as? Double,
                  let ts = obj["time"] as? String else { unusablePositions += 1; continue }
            let position = Position(time: try Self.parseTime(ts), lat: lat, lon: lon, mode: mode, eph: obj["eph"] as? Double)
            positions.append(position)
            reports.append(.position(position))
        }
    }

    /// What the source passes on of `reports`: each epoch gpsd reports in pieces once, as its
    /// last piece (`GPSDEpochPieces`, unit-tested on its own; here fed the `.chk`'s order, the
    /// pieces of an epoch arriving together). The positions, and how many no-fixes.
    var passedOn: (positions: [Position], noFixes: Int) {
        var pieces = GPSDEpochPieces()
        var out: [EngineInput] = []
        var byTime: [Timestamp: [Position]] = [:]
        for report in reports {
            switch report {
            case .position(let p):
                byTime[p.time, default: []].append(p)
                // The fix carries its index among its time's positions in `speed`, to find it again.
                let fix = Fix(time: p.time, coordinate: Coordinate(latitude: p.lat, longitude: p.lon), mode: .threeD,
                              speed: Double(byTime[p.time]!.count - 1))
                _ = pieces.timed(.fix(fix), at: p.time, now: { 0 }) { out.append($0) }
            case .noFix(let t?):
                _ = pieces.timed(.noFix(t), at: t, now: { 0 }) { out.append($0) }
            case .noFix(nil):
                pieces.flush { out.append($0) }
                out.append(.noFix(nil))
            }
        }
        pieces.flush { out.append($0) }
        var positions: [Position] = [], noFixes = 0
        for input in out {
            switch input {
            case .fix(let f): positions.append(byTime[f.time]![Int(f.speed!)])
            case .noFix: noFixes += 1
            default: break
            }
        }
        return (positions, noFixes)
    }

    /// "2024-10-30T09:38:02.000Z" → Timestamp.
    static func parseTime(_ s: String) throws -> Timestamp {
        let parts = s.dropLast().split(whereSeparator: { "-T:".contains($0) })
        guard parts.count == 6, let y = Int(parts[0]), let mo = Int(parts[1]), let d = Int(parts[2]),
              let h = Int(parts[3]), let mi = Int(parts[4]) else { throw GPSDHarness.Failure(description: "bad time \(s)") }
        let secParts = parts[5].split(separator: ".")
        let sec = Int(secParts[0])!
        var ns = 0
        if secParts.count > 1 {
            let frac = String(secParts[1].prefix(9)).padding(toLength: 9, withPad: "0", startingAt: 0)
            ns = Int(frac)!
        }
        return CivilTime(year: y, month: mo, day: d, hour: h, minute: mi, second: sec, nanosecond: ns).timestamp
    }
}

private let corpusAvailable = GPSDHarness.corpusLog("ublox-8") != nil

@Suite("GPSDSource through a real gpsd",
       .enabled(if: GPSDHarness.isAvailable, "gpsd is not installed (apt install gpsd)"),
       .enabled(if: corpusAvailable, "corpus absent: ../shared/corpus/gpsd"), .timeLimit(.minutes(5)))
struct GPSDEndToEndTests {
    /// A curated set; `GPSD_ALL_LOGS=1 swift test --filter GPSDEndToEnd` runs every log.
    static let logs: [String] = ProcessInfo.processInfo.environment["GPSD_ALL_LOGS"] == nil ? curated
        : ((try? FileManager.default.contentsOfDirectory(atPath: GPSDHarness.corpusDirectory.path)) ?? [])
            .filter { $0.hasSuffix(".log") }.map { String($0.dropLast(4)) }
            .filter { knownExceptions[$0] == nil }.sorted()

    /// Logs whose replay through this recipe is known to differ (see docs/gpsd.md).
    static let knownExceptions = [
        "tcp-torture": "gpsd's output depends on how the writes are split (corpus README)",
        "triton400": "gpsd 3.22 never reports \"activated\":0 for it, so the replay has no end marker",
    ]

    static let curated = [
        "garmin17n",          // DGPS, first epoch with 5 partial TPVs
        "ublox-8",            // $GN/$GP/$GL
        "telit-he910",        // 37 no-fix epochs first
        "bt451",              // time goes backwards, car
        "haicom-305N",        // +1024-week shift, fix losses
        "bundg_zeus_9",       // 22 sentence types, 2186 TPVs
        "gp-320fw-2019-04-07-coldboot",  // NUL bytes, truncated lines, bad checksums
        "ublox-zed-f9p-nmea", // GST every epoch
    ]

    /// `log` served to a real gpsd and read by a `GPSDSource` until gpsd reports the replay's
    /// end: what the source passed on, and its statistics.
    static func throughGPSD(_ log: URL, name: String) async throws -> (EventRecorder, GPSDSource.Statistics) {
        let gpsd = try GPSDHarness()
        defer { gpsd.shutdown() }
        try gpsd.serve(log: log)
        let recorder = EventRecorder()
        let source = GPSDSource(configuration: .init(host: gpsd.host, port: gpsd.portString),
                                sink: recorder.sink, onDeviceDeactivated: recorder.deviceDeactivated)
        source.start()
        defer { source.stop() }
        try #require(await recorder.firstDeviceDeactivated(timeout: 30) != nil, "no end-of-replay marker from gpsd for \(name)")
        source.stop()
        return (recorder, source.statistics)
    }

    /// A real gpsd with no receiver data answers the idle probe: the quiet connection stays.
    /// A probe is sent at every other check (the answer counts as a read) and must be answered
    /// before the next one, 1 s later: gpsd answers at once, so even a loaded machine is in time.
    @Test func aQuietGPSDAnswersTheIdleProbeAndStaysConnected() async throws {
        let gpsd = try GPSDHarness()
        defer { gpsd.shutdown() }
        let recorder = EventRecorder()
        let source = GPSDSource(configuration: .init(host: gpsd.host, port: gpsd.portString, idleProbe: 1), sink: recorder.sink)
        source.start()
        defer { source.stop() }
        // By the third probe the checks after the first two have run: an unanswered probe would
        // have dropped the connection there (connectionsLost, a second connection).
        #expect(await waitUntil(timeout: 30) { source.statistics.idleProbes >= 3 })
        let stats = source.statistics
        #expect(stats.connections == 1 && stats.connectionsLost == 0, "\(stats)")
        #expect(recorder.events == [.input(.source(.connected))])
    }

    @Test("every position TPV of the log, in order", arguments: logs)
    func replayMatchesChk(_ name: String) async throws {
        let log = try #require(GPSDHarness.corpusLog(name), "corpus log \(name) missing")
        let expected = try ChkExpectation(contentsOf: log.appendingPathExtension("chk"))
        if Self.curated.contains(name) {
            try #require(!expected.positions.isEmpty, "\(name).chk has no position TPVs")
        }

        let (recorder, stats) = try await Self.throughGPSD(log, name: name)
        let got = recorder.fixes
        let (positions, noFixesPassed) = expected.passedOn
        #expect(got.count == positions.count, "\(name): fix count")
        for (i, (f, e)) in zip(got, positions).enumerated() {
            let same = f.time == e.time
                && abs(f.coordinate.latitude - e.lat) <= 1e-9
                && abs(f.coordinate.longitude - e.lon) <= 1e-9
                && Int(f.mode.rawValue) == e.mode
            #expect(same, "\(name) #\(i): got \(f) expected \(e)")
            if !same { break }
            if let eph = e.eph {
                #expect(abs((f.horizontalAccuracy ?? .nan) - eph) < 1e-6, "\(name) #\(i): eph")
            } else {
                #expect(f.horizontalAccuracy == nil, "\(name) #\(i): eph")
            }
        }
        // The TPVs' no-fixes, and one more at the end when the log had TPVs: gpsd deactivating
        // the log's device (the receiver that sent them) is reported as no fix at once.
        let hadTPVs = expected.positions.count + expected.noFixes + expected.unusablePositions > 0
        let noFixes = recorder.events.filter { if case .input(.noFix) = $0 { true } else { false } }.count
        #expect(noFixes == noFixesPassed + (hadTPVs ? 1 : 0), "\(name): no-fix TPVs")
        let inputs = recorder.events.filter { if case .input = $0 { true } else { false } }
        if hadTPVs {
            #expect(inputs.suffix(2) == [.input(.noFix(nil)), .input(.source(.disconnected))], "\(name): \(inputs.suffix(3))")
        }
        #expect(stats.ignoredTPVs == expected.unusablePositions, "\(name): mode ≥ 2 TPVs without time or position")
        // Status events: connected first, no repeats.
        let states = recorder.events.compactMap { e -> SourceState? in
            if case .input(.source(let s)) = e { s } else { nil }
        }
        #expect(states.first == .connected)
        #expect(zip(states, states.dropFirst()).allSatisfy { $0 != $1 })
    }

    /// gpsd reports haicom-305N's epochs in two pieces: after GGA, with a speed it derived from
    /// the position change (9.2 m/s standing still) and no course; after RMC, with the
    /// receiver's. What the source passes on is the whole epoch, as a replay of the same log
    /// decodes it: the same speed and course at every time of day both have (gpsd dates this
    /// dateless log by the machine's clock, so times are compared as times of day).
    @Test func anEpochInPiecesIsPassedOnWholeAsAReplayDecodesIt() async throws {
        let log = try #require(GPSDHarness.corpusLog("haicom-305N"), "corpus log haicom-305N missing")
        var decoder = NMEADecoder()
        var replayed: [Int64: Fix] = [:]
        let bytes = try [UInt8](Data(contentsOf: log))
        let day: Int64 = 86_400 * 1_000_000_000
        func keep(_ epoch: NMEAEpoch) { if let f = epoch.fix { replayed[epoch.timeOfDay] = f } }
        decoder.feed(bytes, onEpoch: keep)
        decoder.finish(onEpoch: keep)
        // An assumed date: the log has none, and undated positions are no fixes.
        if replayed.isEmpty {
            var options = NMEADecoder.Options()
            options.assumedDate = CivilTime(year: 2026, month: 1, day: 1)
            decoder = NMEADecoder(options: options)
            decoder.feed(bytes, onEpoch: keep)
            decoder.finish(onEpoch: keep)
        }
        try #require(replayed.count > 50, "\(replayed.count) fixes replayed")

        let (recorder, stats) = try await Self.throughGPSD(log, name: "haicom-305N")
        let fixes = recorder.fixes
        try #require(fixes.count > 50)
        var compared = 0
        for f in fixes {
            guard let r = replayed[((f.time.nanoseconds % day) + day) % day] else { continue }
            compared += 1
            #expect(f.speed.map { ($0 * 1000).rounded() } == r.speed.map { ($0 * 1000).rounded() } && f.course == r.course,
                    "at \(f.time): gpsd path speed \(String(describing: f.speed)) course \(String(describing: f.course)), replay \(String(describing: r.speed)) \(String(describing: r.course))")
        }
        #expect(compared >= fixes.count - 1, "\(compared) of \(fixes.count) compared")
        #expect(stats.epochPiecesDropped == 0)
    }

    @Test("reconnects: gpsd absent, started, killed mid-stream, restarted")
    func reconnect() async throws {
        let first = try #require(GPSDHarness.corpusLog("bundg_zeus_9"))
        let second = try #require(GPSDHarness.corpusLog("ublox-8"))
        let gpsd = try GPSDHarness(startGPSD: false)
        defer { gpsd.shutdown() }
        let recorder = EventRecorder()
        let source = GPSDSource(configuration: .init(host: gpsd.host, port: gpsd.portString),
                                sink: recorder.sink, onDeviceDeactivated: recorder.deviceDeactivated)
        source.start()
        defer { source.stop() }

        // 1. No gpsd: one .disconnected, the source keeps retrying without crashing.
        #expect(await recorder.first(.source(.disconnected)) == 0)

        // 2. gpsd appears: .connected and fixes within 2 s. The log has no `# EOF`, so
        //    gpsd stays attached to the feed ("mid-stream").
        try gpsd.serve(log: first, endOfReplay: false)
        let clock = ContinuousClock()
        var started = clock.now
        try gpsd.start()
        let connected = try #require(await recorder.first(.source(.connected), from: 1))
        let fix = try #require(await recorder.firstFix(from: connected))
        #expect(clock.now - started < reconnectBound, "connected + first fix took \(clock.now - started)")
        _ = fix
        let disconnectedBeforeConnect = recorder.events[..<connected].filter { $0 == .input(.source(.disconnected)) }
        #expect(disconnectedBeforeConnect.count == 1, "repeated .disconnected while gpsd was absent")

        // 3. Kill gpsd mid-stream: .disconnected.
        let mark = recorder.count
        gpsd.kill()
        let lost = try #require(await recorder.first(.source(.disconnected), from: mark))
        #expect(source.statistics.connectionsLost == 1)

        // 4. Restart on the same port with a second log: .connected and its fixes again.
        try gpsd.serve(log: second)
        started = clock.now
        try gpsd.start()
        let again = try #require(await recorder.first(.source(.connected), from: lost))
        let fixAgain = try #require(await recorder.firstFix(from: again))
        #expect(clock.now - started < reconnectBound, "reconnect took \(clock.now - started)")
        let end = try #require(await recorder.firstDeviceDeactivated(from: fixAgain))

        // The second connection delivered exactly the second log's fixes.
        let expected = try ChkExpectation(contentsOf: second.appendingPathExtension("chk"))
        let secondFixes = recorder.events[again..<end].compactMap { e -> Fix? in
            if case .input(.fix(let f)) = e { f } else { nil }
        }
        #expect(secondFixes.map(\.time) == expected.passedOn.positions.map(\.time))
        #expect(gpsd.feedConnections == 2)
        source.stop()
        #expect(recorder.events.last == .input(.source(.disconnected)))
    }
}

@Suite("GPSDHarness", .enabled(if: GPSDHarness.isAvailable, "gpsd is not installed (apt install gpsd)"), .timeLimit(.minutes(5)))
struct GPSDHarnessTests {
    @Test func releaseKillsGPSD() throws {
        var pid: Int32 = 0
        var port: UInt16 = 0
        do {
            let h = try GPSDHarness()
            pid = try #require(h.processIdentifier)
            port = h.gpsdPort
            #expect(GPSDHarness.canConnect(port: port))
        }
        #expect(kill(pid, 0) != 0, "gpsd \(pid) still running after the harness was released")
        #expect(!GPSDHarness.canConnect(port: port))
    }

    @Test func restartKeepsThePort() throws {
        let h = try GPSDHarness()
        defer { h.shutdown() }
        let first = try #require(h.processIdentifier)
        try h.restart()
        let second = try #require(h.processIdentifier)
        #expect(first != second)
        #expect(GPSDHarness.canConnect(port: h.gpsdPort))
        h.shutdown()
        #expect(!h.isRunning)
        #expect(throws: GPSDHarness.Failure.self) { try h.start() }
    }
}
