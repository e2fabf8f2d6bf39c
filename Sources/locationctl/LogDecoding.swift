import ArgumentParser
import LocationCore
import NMEA

/// How an NMEA log is decoded, shared by every command that reads one (`replay`, `map`,
/// `evaluate`), so each decodes a log as `locationd --replay` with the same flags does.
struct LogDecodingFlags: ParsableArguments {
    @Option(help: ArgumentHelp("The UTC date of the log's first positions, for a log without RMC or ZDA sentences (GGA/GLL only), whose positions have no date otherwise and are skipped; it advances at midnight, and a date in the log wins.", valueName: "YYYY-MM-DD"))
    var date: String?
    @Flag(name: .customLong("as-gpsd"), help: "Decode the log as the daemon sees it through gpsd 3.20–3.22: dates before 2017 move forward 1024 weeks, and accuracy comes from the DOPs alone (HDOP × 19 m), a GST's estimate ignored.")
    var asGPSD = false

    func validate() throws { _ = try Self.parseDate(date) }

    /// The decoder's options.
    func options() throws -> NMEADecoder.Options {
        NMEADecoder.Options(assumedDate: try Self.parseDate(date), asGPSD: asGPSD)
    }

    static func parseDate(_ text: String?) throws -> CivilTime? {
        guard let text else { return nil }
        switch NMEAReplay.parseDate(text) {
        case .success(let date): return date
        case .failure(let why): throw ValidationError("--date '\(text)': \(why)")
        }
    }
}
