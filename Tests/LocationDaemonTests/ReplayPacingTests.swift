import Foundation
import LocationCore
import LocationProtocol
import Testing
@testable import LocationDaemon

/// How a replay is paced and looped (docs/nmea.md, "Replay").
@Suite(.timeLimit(.minutes(5))) struct ReplayPacingTests {
    static let t0 = CivilTime(year: 2026, month: 6, day: 1, hour: 8).timestamp

    /// Due times follow log time at the speed; a step back or a jump past the longest wait
    /// moves the anchor to that input, due at once.
    @Test func inputsAreDueByLogTimeAndAnAnchorMovesOnlyAtADiscontinuity() {
        var pacer = ReplayPacer(speed: 2)
        #expect(pacer.due(Self.t0, now: 100) == 100)
        #expect(pacer.due(Self.t0.adding(seconds: 10), now: 100.5) == 105)
        #expect(pacer.due(Self.t0.adding(seconds: 310), now: 106) == 255, "a 300 s fix loss is waited for")
        #expect(pacer.due(Self.t0.adding(seconds: 20), now: 300) == 300, "a step back: due at once")
        #expect(pacer.due(Self.t0.adding(seconds: 22), now: 300.2) == 301)
        let glitch = Self.t0.adding(seconds: 22 + ReplayPacer.longestWait + 1)
        #expect(pacer.due(glitch, now: 302) == 302, "a jump past the longest wait: due at once")
        #expect(pacer.due(glitch.adding(seconds: 4), now: 302) == 304)
    }

    static func log(_ text: String) throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("replay-\(UUID().uuidString.prefix(8)).nmea")
        try Data(text.utf8).write(to: url)
        return url
    }

    /// A looped log without a fix would repeat nothing as fast as it can: the replay fails
    /// after one pass instead. Without `--loop` it just ends.
    @Test(arguments: [false, true]) func aLoopedLogWithoutFixesFails(loop: Bool) async throws {
        let url = try Self.log("$GPZDA,120000.00,01,06,2026,00,00*6B\n")
        defer { try? FileManager.default.removeItem(at: url) }
        let inputs = Inputs()
        let source = ReplaySource(path: url.path, speed: 0, loop: loop) { inputs.append($0) }
        let (done, finished) = AsyncStream<String?>.makeStream()
        source.start { error in finished.yield(error.map { "\($0)" }); finished.finish() }
        var outcome: String??
        for await e in done { outcome = e }
        source.stop()
        let error = try #require(outcome)
        if loop {
            #expect(error == "\(url.path): no fixes in the log (pass 1); --loop needs a log with fixes")
        } else {
            #expect(error == nil)
        }
        #expect(inputs.count(where: { $0 == .source(.connected) }) == 1)
    }

    @Test func standardInputCannotBeLooped() {
        #expect(throws: DaemonOptions.Failure.usage("--loop cannot replay standard input ('-'): it can be read once; give the log's path")) {
            try DaemonOptions.parse(["--config", "/dev/null", "--replay", "-", "--loop"])
        }
    }

    /// The daemon itself exits 1 when its replay fails, naming why.
    @Test func aFailedReplayEndsTheDaemonWithStatus1() async throws {
        let url = try Self.log("")
        defer { try? FileManager.default.removeItem(at: url) }
        let daemon = try DaemonProcess(arguments: ["--replay", url.path, "--loop", "--speed", "0"])
        defer { daemon.stop() }
        let client = try await daemon.connect()
        defer { client.close() }
        try await client.startSession(.whenInUse)
        try client.send(.subscribe(id: .number(1), options: SubscriptionOptions()))
        let status = daemon.waitForExit(timeout: 20)
        #expect(status == 1, "exit status \(String(describing: status))")
        #expect(daemon.stderrText().contains("no fixes in the log (pass 1); --loop needs a log with fixes"))
    }
}

/// Inputs a replay handed over, from its thread.
final class Inputs: @unchecked Sendable {
    private let lock = NSLock()
    private var value: [EngineInput] = []
    func append(_ input: EngineInput) { lock.withLock { value.append(input) } }
    func count(where match: (EngineInput) -> Bool) -> Int { lock.withLock { value.filter(match).count } }
}
