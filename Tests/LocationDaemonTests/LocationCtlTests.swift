import Foundation
import LocationCore
import LocationProtocol
import NMEA
import Testing

/// `locationctl replay` as a user runs it: the real executable, its NDJSON output parsed back.
@Suite struct LocationCtlReplayTests {
    static var locationctl: URL { DaemonProcess.executable.deletingLastPathComponent().appendingPathComponent("locationctl") }

    static func run(_ arguments: [String]) throws -> (status: Int32, out: String, err: String) {
        let p = Process()
        p.executableURL = locationctl
        p.arguments = arguments
        let out = Pipe(), err = Pipe()
        p.standardOutput = out
        p.standardError = err
        try p.run()
        let o = out.fileHandleForReading.readDataToEndOfFile(), e = err.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return (p.terminationStatus, String(decoding: o, as: UTF8.self), String(decoding: e, as: UTF8.self))
    }

    @Test func replayPrintsWhatTheEngineDelivers() throws {
        let log = DaemonEndToEndTests.walk(count: 200, startSecond: 0)
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ctl-\(UUID().uuidString.prefix(8)).nmea")
        try Data(log.bytes).write(to: path)
        defer { try? FileManager.default.removeItem(at: path) }

        let result = try Self.run(["replay", path.path, "--distance-filter", "40"])
        #expect(result.status == 0, "\(result.err)")
        let messages = try result.out.split(separator: "\n").map { try ServerMessage.decode(String($0)) }
        // 1.3 m per epoch under a 40 m filter: every 31st fix (40.3 m) from the first.
        let expected = stride(from: 0, to: log.fixes.count, by: 31).map { log.fixes[$0].time }
        #expect(messages.fixes.map(\.time) == expected)
        #expect(messages.states == [.disconnected, .connected, .fix, .disconnected])

        let onlyLocations = try Self.run(["replay", path.path, "--distance-filter", "40", "--events", "location"])
        #expect(onlyLocations.out.split(separator: "\n").count == expected.count)
    }

    @Test func badOptionsAndMissingFilesAreClearErrors() throws {
        let bad = try Self.run(["replay", "/nonexistent.nmea", "--distance-filter=-5"])
        #expect(bad.status != 0)
        #expect(bad.err.contains("--distance-filter -5.0 is out of range"))
        let missing = try Self.run(["replay", "/nonexistent.nmea"])
        #expect(missing.status != 0)
        #expect(missing.err.contains("/nonexistent.nmea: cannot open NMEA log"))
    }
}
