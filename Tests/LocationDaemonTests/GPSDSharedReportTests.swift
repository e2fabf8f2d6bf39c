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
        let fix = testFix(3)
        // Connections of both kinds alternate in one input's fan-out.
        let precise = connections.report(fix, detail: .precise, device: "/dev/gps")
        let approximate = connections.report(fix, detail: .approximate, device: "/dev/gps")
        let preciseAgain = connections.report(fix, detail: .precise, device: "/dev/gps")
        let approximateAgain = connections.report(fix, detail: .approximate, device: "/dev/gps")

        #expect(Array(precise.bytes) == GPSDReport.tpv(fix, device: "/dev/gps", detail: .precise))
        #expect(Array(approximate.bytes) == GPSDReport.tpv(fix, device: "/dev/gps", detail: .approximate))
        #expect(Array(precise.bytes) != Array(approximate.bytes))
        // The same line (the same bytes in memory) for every connection of a detail.
        #expect(preciseAgain.bytes.baseAddress == precise.bytes.baseAddress)
        #expect(approximateAgain.bytes.baseAddress == approximate.bytes.baseAddress)

        // The next fix is a new line for each detail.
        let next = testFix(4)
        let nextPrecise = connections.report(next, detail: .precise, device: "/dev/gps")
        #expect(Array(nextPrecise.bytes) == GPSDReport.tpv(next, device: "/dev/gps", detail: .precise))
        #expect(Array(connections.report(next, detail: .approximate, device: "/dev/gps").bytes)
                == GPSDReport.tpv(next, device: "/dev/gps", detail: .approximate))
    }
}
