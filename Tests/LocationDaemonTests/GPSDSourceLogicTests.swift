import Foundation
import LocationCore
import Testing
@testable import LocationDaemon

/// Scripted stand-in for gpsd: one step per connection attempt.
final class ScriptedGPSD: @unchecked Sendable {
    enum Step {
        case refuse
        /// Accept, deliver the messages, then lose the connection (`lose`) or stay idle.
        case serve([GPSDMessage], lose: Bool)
    }
    private let lock = NSLock()
    private var steps: [Step]
    private(set) var attempts = 0
    private(set) var closes = 0
    init(_ steps: [Step]) { self.steps = steps }

    func nextStep() -> Step {
        lock.withLock {
            attempts += 1
            return steps.isEmpty ? .refuse : steps.removeFirst()
        }
    }
    func closed() { lock.withLock { closes += 1 } }

    func connection() -> any GPSDConnection { Connection(self) }

    final class Connection: GPSDConnection {
        let script: ScriptedGPSD
        var messages: [GPSDMessage] = []
        var lose = false
        var open = false
        init(_ s: ScriptedGPSD) { script = s }
        func open(host: String, port: String) -> GPSDError? {
            switch script.nextStep() {
            case .refuse: return GPSDError(code: -6, message: "can't connect to host/port pair")
            case .serve(let m, let l): messages = m; lose = l; open = true; return nil
            }
        }
        func wait(timeout: Double) -> GPSDWaitResult {
            if !messages.isEmpty || lose { return .ready }
            usleep(UInt32(timeout * 1e6))  // idle gpsd: gps_waiting times out
            return .timeout
        }
        func read() -> GPSDReadResult {
            if !messages.isEmpty { return .message(messages.removeFirst()) }
            return .failed(GPSDError(code: 0, message: "gpsd closed the connection"))
        }
        func close() { if open { open = false; script.closed() } }
    }
}

@Suite("GPSDSource thread and reconnect logic (scripted gpsd)")
struct GPSDSourceLogicTests {
    static func tpv(_ s: Int64) -> GPSDMessage {
        .tpv(GPSDTPV(mode: 3, time: Timestamp(seconds: s), latitude: 1, longitude: Double(s)))
    }
    static func fix(_ s: Int64) -> EngineInput {
        .fix(Fix(time: Timestamp(seconds: s), coordinate: Coordinate(latitude: 1, longitude: Double(s)), mode: .threeD))
    }

    @Test func reportsOnlyChangesAndReconnects() async {
        let script = ScriptedGPSD([
            .refuse, .refuse, .refuse,
            .serve([.other, Self.tpv(1), .tpv(GPSDTPV(mode: 2, time: nil, latitude: 1, longitude: 1)),
                    .tpv(GPSDTPV(mode: 1, time: Timestamp(seconds: 2))), Self.tpv(3)], lose: true),
            .refuse,
            .serve([Self.tpv(4), .deviceDeactivated(path: "tcp://x")], lose: false),
        ])
        let recorder = EventRecorder()
        let source = GPSDSource(
            configuration: .init(initialBackoff: 0.001, maximumBackoff: 0.004, pollInterval: 0.01),
            connection: { script.connection() }, sink: recorder.sink,
            onDeviceDeactivated: recorder.deviceDeactivated)
        source.start()
        let end = await recorder.firstDeviceDeactivated()
        #expect(end != nil)
        source.stop()
        let expected: [EventRecorder.Event] = [
            .input(.source(.disconnected)), .input(.source(.connected)),
            .input(Self.fix(1)), .input(.noFix(Timestamp(seconds: 2))), .input(Self.fix(3)),
            .input(.source(.disconnected)), .input(.source(.connected)),
            .input(Self.fix(4)), .deviceDeactivated("tcp://x"),
            .input(.source(.disconnected)),  // on stop
        ]
        #expect(recorder.events == expected)
        let stats = source.statistics
        #expect(stats.failedAttempts == 4)
        #expect(stats.connections == 2)
        #expect(stats.connectionsLost == 1)
        #expect(stats.fixes == 3 && stats.noFixes == 1 && stats.ignoredTPVs == 1)
        #expect(stats.devicesDeactivated == 1)
        #expect(script.closes == 2)
    }

    @Test func stopIsPromptWhileBackingOff() async {
        let script = ScriptedGPSD([])
        let recorder = EventRecorder()
        let source = GPSDSource(
            configuration: .init(initialBackoff: 30, maximumBackoff: 30),
            connection: { script.connection() }, sink: recorder.sink)
        source.start()
        #expect(await recorder.first(.source(.disconnected)) == 0)
        let clock = ContinuousClock()
        let took = clock.measure { source.stop() }
        #expect(took < .seconds(1))
        #expect(!source.isRunning)
        #expect(recorder.events == [.input(.source(.disconnected))])
        source.stop()  // idempotent
    }

    @Test func stopIsPromptWhileConnectedAndIdle() async {
        let script = ScriptedGPSD([.serve([Self.tpv(1)], lose: false)])
        let recorder = EventRecorder()
        let source = GPSDSource(
            configuration: .init(pollInterval: 0.1),
            connection: { script.connection() }, sink: recorder.sink)
        source.start()
        #expect(await recorder.first(Self.fix(1)) != nil)
        let took = ContinuousClock().measure { source.stop() }
        #expect(took < .seconds(1))
        #expect(recorder.events.last == .input(.source(.disconnected)))
        #expect(script.closes == 1)
        // Restartable.
        let mark = recorder.count
        source.start()
        #expect(await recorder.first(.source(.disconnected), from: mark) != nil)
        source.stop()
    }
}
