import ArgumentParser
import LocationClient
import LocationCore
import LocationProtocol

/// `locationctl visits`: the calling program's recent visits in the daemon (docs/places.md,
/// "Recent visits"): like its places, those of locationctl's own precise visits.
struct Visits: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List this program's recent visits, oldest first, or export them as GeoJSON.",
        discussion: "An approximate session has no recent visits: the list is empty.")

    @OptionGroup var socket: SocketFlag
    @Option(help: "A purpose key the policy lists (for a precise session under a rule that is approximate without one).")
    var purpose: String?
    @Flag(help: "Print one visits message, as the daemon's reply but with every page's visits in it.") var json = false
    @Flag(help: "Print a GeoJSON FeatureCollection of Points (opens in any GeoJSON viewer).") var geojson = false
    @Option(name: .shortAndLong, help: "Write to this file instead of standard output.") var output: String?

    func validate() throws {
        if json && geojson { throw ValidationError("give --json or --geojson, not both") }
    }

    func run() async throws {
        let client = try await connect(path: socket.path, wait: 0)
        defer { client.close() }
        _ = try await startSession(client, .whenInUse, purpose: purpose, what: "a session")
        let visits: [Visit]
        do { visits = try await client.recentVisits() } catch let e as ProtocolError {
            throw RuntimeError("locationd refused: \(e.code.rawValue): \(e.message)")
        }
        if geojson { return try writeText(Visits.geoJSON(visits), to: output) }
        if json { return try writeText(ServerMessage.visits(id: nil, visits: visits).line, to: output) }
        var text = ""
        for v in visits {
            let stay = v.departure.map { " – \(MapTrip.clock($0))  \(MapTrip.duration($0 - v.arrival))" } ?? " – (here now)"
            text += "\(MapTrip.clock(v.arrival))\(stay)  \(DecimalText.fixed(v.coordinate.latitude, 6)),\(DecimalText.fixed(v.coordinate.longitude, 6))"
                + "  ±\(Int(v.horizontalAccuracy.rounded())) m" + (v.place.map { "  p\($0)" } ?? "") + "\n"
        }
        try writeText(text, to: output)
    }

    /// Points with the visit event's fields (less its position) as properties.
    static func geoJSON(_ visits: [Visit]) -> String {
        RegionsGeoJSON.points(visits, id: { _ in nil }, encode: RecentVisitCodec.appendVisit)
    }
}
