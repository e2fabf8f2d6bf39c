import ArgumentParser
import LocationCore
import NMEA

/// How an NMEA log is decoded, shared by every command that reads one (`replay`, `map`,
/// `evaluate`), so each decodes a log as `locationd --replay` with the same flags does.
struct LogDecodingFlags: ParsableArguments {
    @Flag(name: .customLong("as-gpsd"), help: "Decode the log as the daemon sees it through gpsd 3.20–3.22: dates before 2017 move forward 1024 weeks, and accuracy comes from the DOPs alone (HDOP × 19 m), a GST's estimate ignored.")
    var asGPSD = false

    /// The decoder's options, with `date` for the log's undated positions (`--date`).
    func options(date: CivilTime? = nil) -> NMEADecoder.Options {
        NMEADecoder.Options(assumedDate: date, asGPSD: asGPSD)
    }
}
