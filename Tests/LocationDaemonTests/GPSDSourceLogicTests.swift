import Foundation
import LocationCore
@testable import LocationDaemon
import Logging
import TestSupport
import Testing

/// The source's connection logic against `FakeGPSD`, a scripted gpsd on a real TCP port:
/// reconnects, what is reported when, framing of gpsd's byte stream, stop and release.
/// (GPSDEndToEndTests and FaultTests do the same against a real gpsd.)
@Suite("GPSDSource connection and reconnect logic (scripted gpsd over TCP)", .timeLimit(.minutes(5)))
struct GPSDSourceLogicTests {
    static let watch = #"?WATCH={"enable":true,"json":true};"# + "\n"

    static func time(_ s: Int) -> Timestamp {
        CivilTime(year: 2026, month: 11, day: 21, hour: 0, minute: 0, second: s, nanosecond: 0).timestamp
    }
    static func iso(_ s: Int) -> String { "2026-11-21T00:00:\(s < 10 ? "0" : "")\(s).000Z" }

    /// A gpsd 3.22 TPV with a 3D position at (1, `s`).
    static func tpv(_ s: Int) -> String {
        #"{"class":"TPV","device":"/dev/ttyACM0","mode":3,"time":"\#(iso(s))","ept":0.005,"lat":1.000000000,"lon":\#(s).000000000,"altHAE":12.5,"epx":3.1,"epy":4.2,"eph":7.5,"speed":0.25,"track":90.0}"#
    }
    static func fix(_ s: Int) -> EngineInput {
        .fix(Fix(time: time(s), coordinate: Coordinate(latitude: 1, longitude: Double(s)), mode: .threeD,
                 altitudeHAE: 12.5, horizontalAccuracy: 7.5, speed: 0.25, course: 90))
    }
    static let version = #"{"class":"VERSION","release":"3.22","rev":"3.22","proto_major":3,"proto_minor":14}"#
    static let positionWithoutTime = #"{"class":"TPV","device":"/dev/ttyACM0","mode":2,"lat":1.0,"lon":1.0}"#
    static func noFix(_ s: Int) -> String { #"{"class":"TPV","device":"/dev/ttyACM0","mode":1,"time":"\#(iso(s))"}"# }
    static let endOfLog = #"{"class":"DEVICE","path":"tcp://x","driver":"NMEA0183","activated":0}"#
    /// `tpv(s)` as sent by another receiver, and gpsd's report that a receiver's device is gone.
    static func tpv(_ s: Int, device: String) -> String { tpv(s).replacingOccurrences(of: "/dev/ttyACM0", with: device) }
    static func gone(_ device: String) -> String { #"{"class":"DEVICE","path":"\#(device)","driver":"u-blox","activated":0}"# }

    /// A source against a scripted gpsd of one step, with what it reports and logs; idle checks
    /// every `idleProbe` seconds (the default 10 s keeps them out of a test's way). The caller
    /// stops the source and shuts the fake gpsd down.
    static func scripted(_ step: FakeGPSD.Step, idleProbe: Double = 10) throws
        -> (gpsd: FakeGPSD, source: GPSDSource, recorder: EventRecorder, log: CapturedLog, port: Int) {
        let port = Int(try GPSDHarness.freePort())
        let gpsd = try FakeGPSD(port: port, steps: [step])
        let recorder = EventRecorder(), log = CapturedLog()
        let source = GPSDSource(configuration: .init(host: "127.0.0.1", port: String(port), initialBackoff: 0.001,
                                                     maximumBackoff: 0.004, idleProbe: idleProbe),
                                sink: recorder.sink, logger: log.logger)
        return (gpsd, source, recorder, log, port)
    }

    static func source(port: Int, backoff: (Double, Double) = (0.001, 0.004), recorder: EventRecorder = EventRecorder(),
                       log: CapturedLog? = nil) -> GPSDSource {
        GPSDSource(configuration: .init(host: "127.0.0.1", port: String(port),
                                        initialBackoff: backoff.0, maximumBackoff: backoff.1),
                   sink: recorder.sink, onDeviceDeactivated: recorder.deviceDeactivated,
                   logger: log?.logger ?? Logger(label: "locationd", factory: { _ in SwiftLogNoOpLogHandler() }))
    }

    /// A gpsd that accepts, sends a report and then never writes again (hung): the silent
    /// connection is asked ?VERSION;, dropped when that goes unanswered, and made again. The
    /// second connection's gpsd answers the probe, so it stays however late the test stops it.
    @Test func aHungGPSDIsProbedDroppedAndReconnected() async throws {
        let port = Int(try GPSDHarness.freePort())
        let gpsd = try FakeGPSD(port: port, steps: [.lines([Self.tpv(1)], close: false),
                                                    .lines([Self.tpv(2)], close: false, answersVersion: true)])
        defer { gpsd.shutdown() }
        let recorder = EventRecorder()
        let source = GPSDSource(configuration: .init(host: "127.0.0.1", port: String(port), initialBackoff: 0.001,
                                                     maximumBackoff: 0.004, idleProbe: 0.5),
                                sink: recorder.sink)
        source.start()
        #expect(await recorder.first { $0 == .input(Self.fix(2)) } != nil)
        source.stop()
        #expect(recorder.events == [.input(.source(.connected)), .input(Self.fix(1)), .input(.source(.disconnected)),
                                    .input(.source(.connected)), .input(Self.fix(2)), .input(.source(.disconnected))])
        let stats = source.statistics
        #expect(stats.connectionsLost == 1 && stats.idleProbes >= 1)
        #expect(stats.lastError?.message.contains("not even an answer to ?VERSION: it hangs") == true, "\(String(describing: stats.lastError))")
        // The fake reads on its own loop: wait until it has read what the client sent.
        #expect(await waitUntil { gpsd.received.first == Self.watch + "?VERSION;\n" }, "\(gpsd.received)")
    }

    @Test func reportsOnlyChangesAndReconnects() async throws {
        let port = Int(try GPSDHarness.freePort())
        let recorder = EventRecorder()
        let source = Self.source(port: port, recorder: recorder)
        source.start()
        defer { source.stop() }  // if FakeGPSD throws, no source is left retrying every few ms
        // Nothing listens yet: attempts fail, and only the first failure is reported.
        #expect(await waitUntil { source.statistics.failedAttempts >= 3 })
        let lines = [Self.version, Self.tpv(1), Self.positionWithoutTime, Self.noFix(2), Self.tpv(3)]
        let gpsd = try FakeGPSD(port: port, steps: [
            // Cut inside a line, at a "\r\n", and one byte before the end.
            .lines(lines, splits: [7, 100, Self.version.count + 1, lines.joined(separator: "\r\n").count + 1], close: true),
            .lines([Self.tpv(4), Self.endOfLog], close: false),
        ])
        defer { gpsd.shutdown() }
        #expect(await recorder.first { $0 == .deviceDeactivated("tcp://x") } != nil)
        source.stop()
        let expected: [EventRecorder.Event] = [
            .input(.source(.disconnected)), .input(.source(.connected)),
            .input(Self.fix(1)), .input(.noFix(Self.time(2))), .input(Self.fix(3)),
            .input(.source(.disconnected)), .input(.source(.connected)),
            .input(Self.fix(4)), .deviceDeactivated("tcp://x"),
            .input(.source(.disconnected)),  // on stop
        ]
        #expect(recorder.events == expected)
        let stats = source.statistics
        #expect(stats.failedAttempts >= 3)
        #expect(stats.connections == 2)
        #expect(stats.connectionsLost == 1)
        #expect(stats.messages == 7 && stats.tpvs == 5)
        #expect(stats.fixes == 3 && stats.noFixes == 1 && stats.ignoredTPVs == 1)
        #expect(stats.devicesDeactivated == 1)
        // Each connection asked for a JSON watch, as `gps_stream(WATCH_ENABLE|WATCH_JSON)` does.
        // The fake writes its step on accept, so the client can have read it all before the fake
        // has read the WATCH: wait until it has.
        #expect(await waitUntil { gpsd.received == [Self.watch, Self.watch] }, "\(gpsd.received)")
        #expect(await waitUntil { gpsd.clientCloses == 1 })  // the second, on stop
    }

    /// With a device, the watch names it (JSON-escaped), as `gps_stream(…, device)` does: gpsd
    /// then reports that device only (docs/gpsd.md, "Several receivers").
    @Test func aConfiguredDeviceIsNamedInTheWatch() {
        #expect(String(decoding: GPSDSource.watchRequest(device: nil), as: UTF8.self) == Self.watch)
        #expect(String(decoding: GPSDSource.watchRequest(device: "/dev/ttyACM0"), as: UTF8.self)
            == #"?WATCH={"enable":true,"json":true,"device":"/dev/ttyACM0"};"# + "\n")
        #expect(String(decoding: GPSDSource.watchRequest(device: #"tcp://h:1/"a"\"#), as: UTF8.self)
            == #"?WATCH={"enable":true,"json":true,"device":"tcp://h:1/\"a\"\\"};"# + "\n")
    }

    @Test func stopIsPromptWhileBackingOff() async throws {
        let recorder = EventRecorder()
        let source = Self.source(port: Int(try GPSDHarness.freePort()), backoff: (30, 30), recorder: recorder)
        source.start()
        #expect(await recorder.first(.source(.disconnected)) == 0)
        let took = ContinuousClock().measure { source.stop() }
        #expect(took < .seconds(1))
        #expect(!source.isRunning)
        #expect(recorder.events == [.input(.source(.disconnected))])
        #expect(source.statistics.failedAttempts == 1)
        source.stop()  // idempotent
    }

    /// A gpsd that accepts and never says anything (stopped with SIGSTOP, hung before its
    /// banner) is not reported connected (subscribers would see `connected` and `disconnected`
    /// at every retry). Its connections are dropped by the idle check.
    @Test func aGPSDThatAcceptsAndSaysNothingIsNotConnected() async throws {
        let port = Int(try GPSDHarness.freePort())
        let gpsd = try FakeGPSD(port: port, steps: [])
        defer { gpsd.shutdown() }
        let recorder = EventRecorder()
        let source = GPSDSource(configuration: .init(host: "127.0.0.1", port: String(port), initialBackoff: 0.001,
                                                     maximumBackoff: 0.004, idleProbe: 0.2),
                                sink: recorder.sink)
        source.start()
        #expect(await waitUntil { source.statistics.connectionsLost >= 2 })
        source.stop()
        #expect(recorder.events == [.input(.source(.disconnected))], "\(recorder.events)")
        #expect(source.statistics.lastError?.message.contains("not even an answer to ?VERSION: it hangs") == true)
    }

    /// A receiver that stops reporting while gpsd answers (unplugged, powered off or hung):
    /// after two idle checks without a TPV, the second having read gpsd's answer to the probe,
    /// it is reported as no fix (no time) instead of leaving the state at `fix` with an old
    /// position, with a warning; its next report sets the state again, with a notice. The
    /// connection stays (gpsd answers its probes).
    @Test func aReceiverThatFallsSilentIsReportedAndItsReturnToo() async throws {
        var step = FakeGPSD.Step.lines([Self.version, Self.tpv(1), Self.tpv(2)], close: false, answersVersion: true)
        step.resume = (afterProbe: 2, lines: [Self.tpv(40)])
        let (gpsd, source, recorder, log, port) = try Self.scripted(step, idleProbe: 0.3)
        defer { gpsd.shutdown() }
        source.start()
        #expect(await recorder.first(Self.fix(40)) != nil)
        source.stop()
        #expect(recorder.events == [.input(.source(.connected)), .input(Self.fix(1)), .input(Self.fix(2)), .input(.noFix(nil)),
                                    .input(Self.fix(40)), .input(.source(.disconnected))], "\(recorder.events)")
        #expect(source.statistics.receiverSilences == 1 && source.statistics.connectionsLost == 0)
        let notable = log.entries.filter { $0.level >= .notice }.map(\.message)
        #expect(notable.contains("gpsd at 127.0.0.1:\(port) answers, but no receiver has sent a report for 0.6 s or more; taken as no fix until one reports again (a receiver unplugged, powered off or hung: gpsd's log may say which)"), "\(notable)")
        #expect(notable.contains("the receiver reports again (gpsd at 127.0.0.1:\(port))"), "\(notable)")
    }

    /// gpsd reporting the device of the last receiver that reported deactivated (unplugged):
    /// no fix at once, not after the silence rule's 20–30 s; another receiver still reporting
    /// keeps the state, and the next report sets it again.
    @Test func theLastReceiverGoneIsNoFixAtOnce() async throws {
        var step = FakeGPSD.Step.lines([Self.version, Self.tpv(1, device: "/dev/a"), Self.tpv(2, device: "/dev/b")], close: false)
        step.timed = [(0.1, [Self.gone("/dev/a")]), (0.2, [Self.gone("/dev/b")]), (0.3, [Self.tpv(3, device: "/dev/a")])]
        let (gpsd, source, recorder, log, port) = try Self.scripted(step)
        defer { gpsd.shutdown() }
        source.start()
        #expect(await recorder.first(Self.fix(3)) != nil)
        source.stop()
        #expect(recorder.events == [.input(.source(.connected)), .input(Self.fix(1)), .input(Self.fix(2)), .input(.noFix(nil)),
                                    .input(Self.fix(3)), .input(.source(.disconnected))], "\(recorder.events)")
        let notable = log.entries.filter { $0.level >= .notice }.map(\.message)
        #expect(notable.contains("gpsd at 127.0.0.1:\(port) reports its receiver /dev/b gone (unplugged, or closed by gpsd); taken as no fix until one reports again"), "\(notable)")
        #expect(notable.contains("the receiver reports again (gpsd at 127.0.0.1:\(port))"), "\(notable)")
    }

    /// A device that comes back after gpsd reported it gone is tracked again, even when it
    /// was also the last to report: left out of the set, the other device's going would make a
    /// no-fix while it reports (and its own next unplug would go unseen).
    @Test func aReceiverThatComesBackIsTrackedAgain() async throws {
        var step = FakeGPSD.Step.lines([Self.version, Self.tpv(1, device: "/dev/a"), Self.tpv(2, device: "/dev/b"),
                                        Self.tpv(3, device: "/dev/a")], close: false)
        step.timed = [(0.1, [Self.gone("/dev/a")]), (0.2, [Self.tpv(4, device: "/dev/a")]), (0.3, [Self.gone("/dev/b")]),
                      (0.4, [Self.tpv(5, device: "/dev/a")]), (0.5, [Self.gone("/dev/a")])]
        let (gpsd, source, recorder, _, _) = try Self.scripted(step)
        defer { gpsd.shutdown() }
        source.start()
        #expect(await recorder.first(.noFix(nil)) != nil)
        source.stop()
        #expect(recorder.events == [.input(.source(.connected)), .input(Self.fix(1)), .input(Self.fix(2)), .input(Self.fix(3)),
                                    .input(Self.fix(4)), .input(Self.fix(5)), .input(.noFix(nil)), .input(.source(.disconnected))],
                "\(recorder.events)")
    }

    /// After a silence, the receiver's pace is measured afresh: the silence's own gap, still
    /// counted when it reported again at its usual pace, made each later wait three times the
    /// one before (20 s, 1 min, 3 min, …).
    @Test func aSilenceDoesNotLengthenTheNextWait() async throws {
        var step = FakeGPSD.Step.lines([Self.version, Self.tpv(1), Self.tpv(2)], close: false, answersVersion: true)
        step.resume = (afterProbe: 2, lines: [Self.tpv(40), Self.tpv(41)])
        let (gpsd, source, _, log, _) = try Self.scripted(step, idleProbe: 0.3)
        defer { gpsd.shutdown() }
        source.start()
        #expect(await waitUntil { source.statistics.receiverSilences >= 2 })
        source.stop()
        let waits = log.entries.filter { $0.level == .warning }.map(\.message).filter { $0.contains("no receiver has sent a report") }
        #expect(waits.count == 2 && waits.allSatisfy { $0.contains("for 0.6 s or more") }, "\(waits)")
    }

    /// A receiver set to report less often than two idle checks is judged by its own pace once
    /// two reports showed it: reports every 3.5 checks are not a silence each time (with a
    /// warning and a no-fix between every two fixes). One report alone is not judged.
    @Test func aSlowReceiverIsJudgedByItsOwnPace() async throws {
        var step = FakeGPSD.Step.lines([Self.version, Self.tpv(1)], close: false, answersVersion: true)
        step.timed = [(0.35, [Self.tpv(2)]), (0.7, [Self.tpv(3)]), (1.05, [Self.tpv(4)]), (1.4, [Self.tpv(5)])]
        let (gpsd, source, recorder, _, _) = try Self.scripted(step, idleProbe: 0.1)
        defer { gpsd.shutdown() }
        source.start()
        #expect(await recorder.first(Self.fix(5)) != nil)
        source.stop()
        #expect(source.statistics.receiverSilences == 0, "\(recorder.events)")
        #expect(!recorder.events.contains(.input(.noFix(nil))), "\(recorder.events)")
    }

    /// gpsd that hangs after a report other than a TPV: the check that sends the probe does not
    /// call the receiver silent (gpsd has not answered yet); the next one drops gpsd as hung.
    @Test func aHungGPSDIsNotASilentReceiver() async throws {
        var step = FakeGPSD.Step.lines([Self.version, Self.tpv(1), Self.tpv(2)], close: false)
        step.timed = [(0.3, [#"{"class":"SKY","device":"/dev/ttyACM0","satellites":[]}"#])]
        let (gpsd, source, recorder, _, _) = try Self.scripted(step, idleProbe: 0.2)
        defer { gpsd.shutdown() }
        source.start()
        #expect(await waitUntil { source.statistics.connectionsLost >= 1 })
        source.stop()
        #expect(Array(recorder.events.prefix(4)) == [.input(.source(.connected)), .input(Self.fix(1)), .input(Self.fix(2)),
                                                     .input(.source(.disconnected))], "\(recorder.events)")
        #expect(source.statistics.receiverSilences == 0)
    }

    @Test func stopClosesTheConnectionAndStartReconnects() async throws {
        let port = Int(try GPSDHarness.freePort())
        let gpsd = try FakeGPSD(port: port, steps: [.lines([Self.tpv(1)], close: false),
                                                    .lines([Self.version], close: false)])
        defer { gpsd.shutdown() }
        let recorder = EventRecorder()
        let source = Self.source(port: port, recorder: recorder)
        source.start()
        #expect(await recorder.first(Self.fix(1)) != nil)
        let took = ContinuousClock().measure { source.stop() }
        #expect(took < .seconds(1))
        #expect(recorder.events.last == .input(.source(.disconnected)))
        #expect(await waitUntil { gpsd.clientCloses == 1 })
        // Restartable: a second start connects again (the script's gpsd sends its banner only).
        let mark = recorder.count
        source.start()
        #expect(await recorder.first(.source(.connected), from: mark) != nil)
        source.stop()
        #expect(await waitUntil { gpsd.clientCloses == 2 })
        #expect(gpsd.connections == 2)
    }

    @Test func releaseClosesTheWatchAndWantingAgainReopensIt() async throws {
        let port = Int(try GPSDHarness.freePort())
        let gpsd = try FakeGPSD(port: port, steps: [.lines([Self.tpv(1)], close: false),
                                                    .lines([Self.tpv(2)], close: false)])
        defer { gpsd.shutdown() }
        let recorder = EventRecorder()
        let source = Self.source(port: port, recorder: recorder)
        source.setWanted(false)
        source.start()
        source.setWanted(true)
        #expect(await recorder.first(Self.fix(1)) != nil)
        source.setWanted(false)
        #expect(await recorder.first(.source(.disconnected)) != nil)
        #expect(await waitUntil { gpsd.clientCloses == 1 })
        #expect(!source.isWanted && source.isRunning)
        source.setWanted(true)
        #expect(await recorder.first(Self.fix(2)) != nil)
        source.stop()
        #expect(source.statistics.connectionsLost == 0)  // released, not lost
    }

    /// gpsd's longest report is 10 KiB; a longer "line" is not gpsd, so the connection is made
    /// again rather than buffering without bound.
    @Test func anOverlongLineDropsTheConnection() async throws {
        let port = Int(try GPSDHarness.freePort())
        let garbage = [UInt8](repeating: UInt8(ascii: "x"), count: GPSDSource.maximumLineLength + 10)
        let gpsd = try FakeGPSD(port: port, steps: [
            FakeGPSD.Step(chunks: [Array(Self.tpv(1).utf8) + [10], garbage], close: false),
            .lines([Self.tpv(2)], close: false),
        ])
        defer { gpsd.shutdown() }
        let recorder = EventRecorder()
        let source = Self.source(port: port, recorder: recorder)
        source.start()
        #expect(await recorder.first(Self.fix(2)) != nil)
        source.stop()
        #expect(recorder.events == [
            .input(.source(.connected)), .input(Self.fix(1)), .input(.source(.disconnected)),
            .input(.source(.connected)), .input(Self.fix(2)), .input(.source(.disconnected)),
        ])
        #expect(source.statistics.connectionsLost == 1)
        #expect(source.statistics.lastError?.message.contains("longer than 65536 bytes") == true)
    }

    @Test func portIsANumberOrAServiceName() throws {
        #expect(try GPSDSource.portNumber("2947").get() == 2947)
        if getservbyname("gpsd", "tcp") != nil { #expect(try GPSDSource.portNumber("gpsd").get() == 2947) }
        guard case .failure(let error) = GPSDSource.portNumber("gspd") else {
            Issue.record("an unknown service name was accepted"); return
        }
        #expect(error.message == "gpsd port 'gspd' is neither a port number (1–65535) nor a TCP service in /etc/services")
        #expect((try? GPSDSource.portNumber("0").get()) == nil)
    }

    @Test func anUnknownPortIsReportedAsAFailedAttempt() async {
        let recorder = EventRecorder()
        let source = GPSDSource(configuration: .init(host: "127.0.0.1", port: "gspd", initialBackoff: 30, maximumBackoff: 30),
                                sink: recorder.sink)
        source.start()
        #expect(await recorder.first(.source(.disconnected)) == 0)
        source.stop()
        #expect(source.statistics.lastError?.message.hasPrefix("gpsd port 'gspd'") == true)
    }

    // MARK: - What it logs

    static func refused(_ port: Int, backoff: String = "0.001 s doubling to 0.004 s") -> String {
        "cannot connect to gpsd at 127.0.0.1:\(port): connection refused: nothing listens on that port (is gpsd running? systemctl status gpsd.socket gpsd; or correct [gpsd] host/port or --gpsd); retrying with backoff (\(backoff) between attempts), warning again only if the reason changes"
    }

    /// Nothing listens: one warning naming host:port and the reason however often the retries
    /// fail (each is a trace line); once gpsd speaks, a notice; a lost connection is a warning
    /// again, and the next connection's first line its notice.
    @Test func warnsOnceWhyItCannotConnectAndNoticesWhenGPSDIsBack() async throws {
        let port = Int(try GPSDHarness.freePort())
        let log = CapturedLog()
        let recorder = EventRecorder()
        let source = Self.source(port: port, recorder: recorder, log: log)
        source.start()
        defer { source.stop() }
        #expect(await waitUntil { log.messages(.trace).count >= 5 })
        #expect(log.messages(.warning) == [Self.refused(port)])
        #expect(log.messages(.trace).allSatisfy { $0 == "gpsd connection attempt failed" })

        let gpsd = try FakeGPSD(port: port, steps: [.lines([Self.version, Self.tpv(1)], close: true),
                                                    .lines([Self.tpv(2)], close: false)])
        defer { gpsd.shutdown() }
        #expect(await recorder.first(Self.fix(2)) != nil)
        let notable = log.notable
        #expect(notable.count == 4, "\(notable)")
        guard notable.count == 4 else { return }
        #expect(notable[0] == .init(level: .warning, message: Self.refused(port)))
        #expect(notable[1].level == .notice)
        #expect(notable[1].message.hasPrefix("connected to gpsd at 127.0.0.1:\(port) again after "), "\(notable[1])")
        #expect(notable[1].message.hasSuffix(" failed attempts"), "\(notable[1])")
        #expect(notable[2] == .init(level: .warning, message: "lost the connection to gpsd at 127.0.0.1:\(port): gpsd closed the connection; retrying with backoff (0.001 s doubling to 0.004 s between attempts), warning again only if the reason changes"))
        #expect(notable[3] == .init(level: .notice, message: "connected to gpsd at 127.0.0.1:\(port) again"))
    }

    /// A gpsd that sends its banner and then fails every connection (closes, or sends a line
    /// over the limit) is retried with a growing delay and warned about once: were the banner
    /// alone to count as gpsd being back, each attempt would be a new warning, a "connected
    /// again" notice and a retry at the shortest delay (49 of each in 6 s).
    @Test(arguments: [false, true])
    func aGPSDThatFailsAfterItsBannerIsRetriedWithBackoffAndWarnedOnce(longLine: Bool) async throws {
        let port = Int(try GPSDHarness.freePort())
        let step: FakeGPSD.Step = longLine
            ? FakeGPSD.Step(chunks: [Array((Self.version + "\r\n").utf8), Array(repeating: UInt8(ascii: "x"), count: 70_000)], close: false)
            : .lines([Self.version], close: true)
        let gpsd = try FakeGPSD(port: port, steps: Array(repeating: step, count: 10_000))
        defer { gpsd.shutdown() }
        let log = CapturedLog()
        let source = Self.source(port: port, log: log)
        source.start()
        defer { source.stop() }
        #expect(await waitUntil { source.statistics.connectionsLost >= 5 })
        #expect(source.statistics.lastRetryDelay == 0.004, "\(source.statistics)")
        #expect(log.notable.count == 1 && log.notable.first?.level == .warning, "\(log.notable)")
    }

    /// A new reason is a new warning: refused, then a gpsd that closes every connection before
    /// saying anything (its client limit), then refused again.
    @Test func aChangedReasonIsWarnedAgain() async throws {
        let port = Int(try GPSDHarness.freePort())
        let log = CapturedLog()
        let source = Self.source(port: port, log: log)
        source.start()
        defer { source.stop() }
        #expect(await waitUntil { source.statistics.failedAttempts >= 3 })
        let gpsd = try FakeGPSD(port: port, steps: Array(repeating: FakeGPSD.Step(chunks: [], close: true), count: 10_000))
        #expect(await waitUntil { source.statistics.connectionsLost >= 3 })
        gpsd.shutdown()
        let failed = source.statistics.failedAttempts
        #expect(await waitUntil { source.statistics.failedAttempts >= failed + 3 })
        let unheard = "lost the connection to gpsd at 127.0.0.1:\(port): gpsd closed the connection before sending anything (its client limit reached, or not gpsd on that port); retrying with backoff (0.001 s doubling to 0.004 s between attempts), warning again only if the reason changes"
        let warnings = log.messages(.warning)
        #expect(log.notable.allSatisfy { $0.level == .warning }, "\(log.notable)")
        #expect(Array(warnings.prefix(2)) == [Self.refused(port), unheard], "\(warnings)")
        // A connection the kernel had accepted as the fake closed may be reset in between.
        #expect(warnings.last == Self.refused(port) && warnings.count <= 4, "\(warnings)")
        #expect(zip(warnings, warnings.dropFirst()).allSatisfy { $0 != $1 }, "a reason warned twice in a row: \(warnings)")
    }

    /// A gpsd that accepts and closes every connection before saying anything (at its client
    /// limit, or not gpsd) is retried with a growing delay, not at the shortest one forever:
    /// only a gpsd that speaks resets the backoff.
    @Test func aGPSDThatClosesAtOnceIsRetriedWithBackoff() async throws {
        let port = Int(try GPSDHarness.freePort())
        let gpsd = try FakeGPSD(port: port, steps: Array(repeating: FakeGPSD.Step(chunks: [], close: true), count: 10_000))
        defer { gpsd.shutdown() }
        let source = Self.source(port: port)
        source.start()
        defer { source.stop() }
        #expect(await waitUntil { source.statistics.connectionsLost >= 4 })
        #expect(source.statistics.lastRetryDelay == 0.004, "\(source.statistics)")
    }

    /// Released and wanted again, the first failure is news again.
    @Test func aReleaseStartsTheWarningsOver() async throws {
        let port = Int(try GPSDHarness.freePort())
        let log = CapturedLog()
        let source = Self.source(port: port, log: log)
        source.start()
        defer { source.stop() }
        #expect(await waitUntil { source.statistics.failedAttempts >= 3 })
        source.setWanted(false)
        source.setWanted(true)
        let failed = source.statistics.failedAttempts
        #expect(await waitUntil { source.statistics.failedAttempts >= failed + 3 })
        #expect(log.messages(.warning) == [Self.refused(port), Self.refused(port)])
    }

    /// A host name that does not resolve is named with the resolver's reason.
    @Test func anUnresolvableHostIsNamed() async {
        let log = CapturedLog()
        let recorder = EventRecorder()
        // A connect timeout longer than any resolver's, so the lookup's own failure is what ends it.
        let source = GPSDSource(configuration: .init(host: "nosuchhost.invalid", port: "2947", initialBackoff: 30, maximumBackoff: 30,
                                                     connectTimeout: 120),
                                sink: recorder.sink, logger: log.logger)
        source.start()
        #expect(await recorder.first(.source(.disconnected), timeout: 130) == 0)
        source.stop()
        let warnings = log.messages(.warning)
        #expect(warnings.count == 1)
        #expect(warnings.first?.hasPrefix("cannot connect to gpsd at nosuchhost.invalid:2947: cannot resolve the host name 'nosuchhost.invalid' (") == true,
                "\(warnings)")
        #expect(warnings.first?.contains("): correct [gpsd] host or --gpsd HOST[:PORT], or check the resolver (/etc/hosts, DNS); retrying with backoff (30 s doubling to 30 s between attempts)") == true,
                "\(warnings)")
    }

    /// gpsd's own error reports are warnings, each distinct one once.
    @Test func gpsdsErrorReportsAreWarnedOnce() async throws {
        let port = Int(try GPSDHarness.freePort())
        let error = { (m: String) in #"{"class":"ERROR","message":"\#(m)"}"# }
        let gpsd = try FakeGPSD(port: port, steps: [
            .lines([Self.version, error("Can't open /dev/ttyX."), error("Can't open /dev/ttyX."), error("Unrecognized request '?X'"),
                    Self.tpv(1)], close: false),
        ])
        defer { gpsd.shutdown() }
        let log = CapturedLog()
        let recorder = EventRecorder()
        let source = GPSDSource(configuration: .init(host: "127.0.0.1", port: String(port)), sink: recorder.sink, logger: log.logger)
        source.start()
        #expect(await recorder.first(Self.fix(1)) != nil)
        source.stop()
        #expect(log.notable == [
            .init(level: .warning, message: "gpsd at 127.0.0.1:\(port) reports an error: Can't open /dev/ttyX."),
            .init(level: .warning, message: "gpsd at 127.0.0.1:\(port) reports an error: Unrecognized request '?X'"),
        ])
        #expect(source.statistics.messages == 5)
    }
    /// A gpsd before protocol 3.4 (gpsd 2.9x) writes times as seconds since 1970, which libgps
    /// cannot decode: its fixes were dropped without a word. Its VERSION and the first TPV libgps
    /// cannot decode are warned about, once each, naming what came and what is expected.
    @Test func anIncompatibleGPSDIsWarnedAboutOnce() async throws {
        let port = Int(try GPSDHarness.freePort())
        let old = #"{"class":"VERSION","release":"2.95","rev":"2.95","proto_major":3,"proto_minor":3}"#
        let numeric = { (s: Int) in #"{"class":"TPV","device":"/dev/ttyACM0","mode":3,"time":\#(1_795_305_600 + s).0,"lat":1.0,"lon":\#(s).0}"# }
        let gpsd = try FakeGPSD(port: port, steps: [.lines([old, numeric(1), numeric(2), old, Self.tpv(3)], close: false)])
        defer { gpsd.shutdown() }
        let log = CapturedLog()
        let recorder = EventRecorder()
        let source = GPSDSource(configuration: .init(host: "127.0.0.1", port: String(port)), sink: recorder.sink, logger: log.logger)
        source.start()
        #expect(await recorder.first(Self.fix(3)) != nil)
        source.stop()
        let warnings = log.notable.map(\.message)
        #expect(warnings.count == 2, "\(warnings)")
        #expect(warnings.first == "gpsd at 127.0.0.1:\(port) speaks protocol 3.3 (release 2.95); locationd reads protocol 3.4 or later (gpsd 3.x): before 3.4 gpsd wrote times as seconds since 1970, which libgps cannot decode, so its reports give no fixes. Upgrade gpsd")
        #expect(warnings.last?.hasPrefix("gpsd at 127.0.0.1:\(port) sent a TPV report libgps cannot decode (") == true, "\(warnings)")
        #expect(warnings.last?.contains("): \(numeric(1)); locationd expects gpsd's JSON protocol 3.4 or later") == true, "\(warnings)")
        #expect(source.statistics.undecodableTPVs == 2 && source.statistics.fixes == 1)
    }

    /// Another major protocol version is an incompatible change (gpsd's rule): warned about.
    @Test func anotherMajorProtocolVersionIsWarnedAbout() throws {
        let decoder = GPSDLineDecoder()
        var bytes = Array(#"{"class":"VERSION","release":"4.0","rev":"4.0","proto_major":4,"proto_minor":0}"#.utf8)
        guard case .version(let v) = bytes.withUnsafeMutableBytes({ decoder.decode(UnsafeRawBufferPointer($0)) }) else {
            Issue.record("no VERSION")
            return
        }
        #expect(v == GPSDVersion(release: "4.0", protocolMajor: 4, protocolMinor: 0))
        #expect(v.incompatibility?.hasPrefix("speaks protocol 4.0 (release 4.0); locationd's libgps (gpsd 3.22) reads protocol 3.4 or later 3.x") == true)
        #expect(GPSDVersion(release: "3.22", protocolMajor: 3, protocolMinor: 14).incompatibility == nil)
    }
}
