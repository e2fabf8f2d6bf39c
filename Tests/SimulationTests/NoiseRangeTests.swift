import LocationCore
import NMEA
import Simulation
import Testing

/// Noise that would trap `locationctl simulate` (SIGILL in `NMEAWriter.angle`) or write
/// nonsense latitudes is refused with the path and the value; the writer itself never traps.
@Suite struct NoiseRangeTests {
    static let head = #"{"start":"2026-03-10T07:00:00Z","origin":{"latitude":48.1,"longitude":11.5},"#

    @Test(arguments: [
        (#""outdoor":{"sigma":1e300}"#, "outdoor.sigma 1e+300 is out of range; expected 0…100000 metres"),
        (#""outdoor":{"sigma":1e7}"#, "outdoor.sigma 10000000 is out of range; expected 0…100000 metres"),
        (#""outdoor":{"sigma":-1}"#, "outdoor.sigma -1 is out of range; expected 0…100000 metres"),
        (#""indoor":{"multipathSigma":200000}"#, "indoor.multipathSigma 200000 is out of range; expected 0…100000 metres"),
        (#""outdoor":{"outlierRate":1,"outlierDistance":1e30}"#, "outdoor.outlierDistance 1e+30 is out of range; expected 0…100000 metres"),
        (#""outdoor":{"outlierRate":1.5}"#, "outdoor.outlierRate 1.5 is out of range; expected a probability 0…1"),
        (#""indoor":{"outlierRate":-0.1}"#, "indoor.outlierRate -0.1 is out of range; expected a probability 0…1"),
        (#""outdoor":{"outlierEpochs":0}"#, "outdoor.outlierEpochs 0 is out of range; expected an integer 1…60"),
        (#""outdoor":{"outlierEpochs":1.5}"#, "outdoor.outlierEpochs 1.5 is out of range; expected an integer 1…60"),
        (#""indoor":{"outlierEpochs":61}"#, "indoor.outlierEpochs 61 is out of range; expected an integer 1…60"),
    ])
    func outOfRangeNoiseIsRefused(_ noise: String, _ message: String) {
        let text = Self.head + noise + #","legs":[{"stay":60}]}"#
        do {
            _ = try Scenario.parse(text)
            Issue.record("accepted: \(text)")
        } catch {
            #expect(error.description == message)
        }
    }

    /// The largest noise allowed still writes only positions on the globe.
    @Test func largestNoiseWritesValidFixes() throws {
        let s = try Scenario.parse(Self.head + #""outdoor":{"sigma":100000,"outlierRate":1,"outlierDistance":100000},"legs":[{"stay":300}]}"#)
        var fixes = 0
        var decoder = NMEADecoder()
        func check(_ e: NMEAEpoch) {
            guard let f = e.fix else { return }
            fixes += 1
            #expect(f.coordinate.isValid, "\(f.coordinate)")
        }
        decoder.feed(Simulator(s).run().nmea, onEpoch: check)
        decoder.finish(onEpoch: check)
        #expect(fixes == 300)
    }

    /// What the writer cannot express becomes an epoch without a fix, or an empty field.
    @Test(arguments: [Double.nan, .infinity, -.infinity, 1e300, 90.5, -1e19])
    func writerNeverTrapsOnAnAngle(_ bad: Double) {
        let writer = NMEAWriter()
        let t = Timestamp(seconds: 1_773_126_000)
        for c in [Coordinate(latitude: bad, longitude: 11.5), Coordinate(latitude: 48.1, longitude: bad * 2)] {
            let text = writer.epoch(Fix(time: t, coordinate: c, mode: .threeD, speed: bad, course: bad))
            var fixes = 0, epochs = 0
            var decoder = NMEADecoder()
            decoder.feed(Array(text.utf8)) { e in epochs += 1; if e.fix != nil { fixes += 1 } }
            decoder.finish { e in epochs += 1; if e.fix != nil { fixes += 1 } }
            #expect(epochs == 1 && fixes == 0, "\(text)")
        }
        // A valid position with values too large for their fields: empty fields, a fix still.
        let text = writer.epoch(Fix(time: t, coordinate: Coordinate(latitude: 48.1, longitude: 11.5), mode: .threeD,
                                    altitudeMSL: 1e300, speed: .infinity, course: .nan))
        var fixes = 0
        var decoder = NMEADecoder()
        decoder.feed(Array(text.utf8)) { e in if e.fix != nil { fixes += 1 } }
        decoder.finish { e in if e.fix != nil { fixes += 1 } }
        #expect(fixes == 1, "\(text)")
    }
}
