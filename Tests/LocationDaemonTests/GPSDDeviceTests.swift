import Foundation
import LocationCore
@testable import LocationDaemon
import Logging
import TestSupport
import Testing

/// `[gpsd] device` against a real gpsd with two receivers (docs/gpsd.md, "Several receivers"):
/// the watch names the device, and gpsd reports that one only.
@Suite(.serialized, .enabled(if: GPSDHarness.isAvailable, "gpsd is not installed (apt-get install gpsd)"), .timeLimit(.minutes(2)))
struct GPSDDeviceTests {
    /// Receiver A (the harness's feed) walks at 48.14° N, receiver B (another device of the same
    /// gpsd) 100 km north. Naming A, the source reads all of A's fixes and none of B's; watching
    /// every device, B's come through too (so the set-up can tell them apart). A second client
    /// watching every device shows when gpsd has handled all of B: A's end is fed only then, so
    /// the source under test has read whatever gpsd sent it of B by the time it reads A's end.
    @Test(arguments: [true, false]) func aNamedDeviceIsTheOnlyOneRead(named: Bool) async throws {
        let gpsd = try GPSDHarness(extraFeeds: 1)
        defer { gpsd.shutdown() }
        let a = DaemonEndToEndTests.walk(count: 20, startSecond: 0)
        let b = DaemonEndToEndTests.walk(count: 20, startSecond: 0, northMetres: 100_000)
        let logger = Logger(label: "locationd", factory: { _ in SwiftLogNoOpLogHandler() })
        func source(_ device: String?, _ recorder: EventRecorder) -> GPSDSource {
            GPSDSource(configuration: .init(host: gpsd.host, port: gpsd.portString, device: device),
                       sink: recorder.sink, onDeviceDeactivated: recorder.deviceDeactivated, logger: logger)
        }
        let recorder = EventRecorder(), everything = EventRecorder()
        let tested = source(named ? gpsd.deviceName : nil, recorder), all = source(nil, everything)
        tested.start(); all.start()
        defer { tested.stop(); all.stop() }
        // Both watching before anything is fed (what gpsd reads before it has a watch reaches no
        // one): gpsd has answered a watch when it has sent DEVICES and WATCH after its VERSION.
        try #require(await waitUntil(timeout: 30) {
            tested.statistics.messages >= 3 && all.statistics.messages >= 3
        }, "the watches were not answered")
        gpsd.serve(bytes: a.bytes)
        gpsd.serve(bytes: b.bytes + Array("# EOF\n".utf8), toFeed: 0)
        #expect(await everything.first(timeout: 30) {
            if case .deviceDeactivated(let d) = $0 { d != gpsd.deviceName } else { false }
        } != nil, "B's end never came")
        gpsd.serve(bytes: Array("# EOF\n".utf8))
        let deviceA = gpsd.deviceName
        #expect(await recorder.first(timeout: 30) { $0 == .deviceDeactivated(deviceA) } != nil, "A's end never came")
        let fixes = recorder.events.compactMap { if case .input(.fix(let f)) = $0 { f } else { nil } }
        // gpsd reports a receiver's first epochs more than once while it learns its cycle.
        #expect(Set(fixes.filter { $0.coordinate.latitude < 48.5 }.map(\.time)) == Set(a.fixes.map(\.time)))
        let fromB = fixes.filter { $0.coordinate.latitude > 48.5 }.count
        #expect(named ? fromB == 0 : fromB > 0, "\(fromB) of B's fixes")
    }
}
