import GPSDProtocol
import LocationCore
import NIOEmbedded
import Testing
@testable import LocationDaemon

/// The TPV lines the gpsd-protocol listener's connections share within one hub input.
@Suite("gpsd-protocol reports shared by connections")
struct GPSDSharedReportTests {
    @Test("Precise and approximate connections of one input each get their detail's TPV, each encoded once")
    func preciseAndApproximateOnOneInput() {
        let loop = EmbeddedEventLoop()
        let connections = GPSDConnections(eventLoop: loop)
        func report(_ fix: Fix, detail: GPSDReport.Detail) -> EncodedLine {
            withUnsafePointer(to: Event.location(fix)) { connections.report(at: $0, detail: detail, device: "/dev/gps")! }
        }
        let fix = testFix(3)
        // Connections of both kinds alternate in one input's fan-out.
        let precise = report(fix, detail: .precise)
        let approximate = report(fix, detail: .approximate)
        let preciseAgain = report(fix, detail: .precise)
        let approximateAgain = report(fix, detail: .approximate)

        #expect(Array(precise.bytes) == GPSDReport.tpv(fix, device: "/dev/gps", detail: .precise))
        #expect(Array(approximate.bytes) == GPSDReport.tpv(fix, device: "/dev/gps", detail: .approximate))
        #expect(Array(precise.bytes) != Array(approximate.bytes))
        // The same line (the same bytes in memory) for every connection of a detail.
        #expect(preciseAgain.bytes.baseAddress == precise.bytes.baseAddress)
        #expect(approximateAgain.bytes.baseAddress == approximate.bytes.baseAddress)

        // An event other than a location has no TPV.
        #expect(withUnsafePointer(to: Event.status(.noFix, time: nil)) { connections.report(at: $0, detail: .precise, device: "/dev/gps") } == nil)

        // The next fix is a new line for each detail.
        let next = testFix(4)
        let nextPrecise = report(next, detail: .precise)
        #expect(Array(nextPrecise.bytes) == GPSDReport.tpv(next, device: "/dev/gps", detail: .precise))
        #expect(Array(report(next, detail: .approximate).bytes)
                == GPSDReport.tpv(next, device: "/dev/gps", detail: .approximate))
    }
}
