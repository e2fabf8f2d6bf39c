import ArgumentParser
import LocationClient
import LocationCore
import LocationProtocol

/// `locationctl places`: the calling program's places in the daemon (docs/places.md). Places
/// belong to the program (uid + executable) whose precise visits made them, so these are the
/// places of locationctl's own visits (`locationctl watch --events visits`).
struct Places: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List this program's places (from its visits), or export them as GeoJSON.",
        discussion: "An approximate session has no places: the list is empty.")

    @OptionGroup var socket: SocketFlag
    @Option(help: "A purpose key the policy lists (for a precise session under a rule that is approximate without one).")
    var purpose: String?
    @Flag(help: "Print one places message, as the daemon's reply but with every page's places in it.") var json = false
    @Flag(help: "Print a GeoJSON FeatureCollection of Points (opens in any GeoJSON viewer).") var geojson = false
    @Option(name: .shortAndLong, help: "Write to this file instead of standard output.") var output: String?

    func validate() throws {
        if json && geojson { throw ValidationError("give --json or --geojson, not both") }
    }

    func run() async throws {
        let client = try await connect(path: socket.path, wait: 0)
        defer { client.close() }
        _ = try await startSession(client, .whenInUse, purpose: purpose, what: "a session")
        let places: [Place]
        do { places = try await client.places() } catch let e as ProtocolError {
            throw RuntimeError("locationd refused: \(e.code.rawValue): \(e.message)")
        }
        if geojson { return try writeText(Places.geoJSON(places), to: output) }
        if json { return try writeText(ServerMessage.places(id: nil, places: places).line, to: output) }
        var text = ""
        for p in places {
            text += "\(p.name)  \(DecimalText.fixed(p.centre.latitude, 6)),\(DecimalText.fixed(p.centre.longitude, 6))  \(p.visits) visit\(p.visits == 1 ? "" : "s")  \(MapTrip.duration(p.totalSeconds))  \(MapTrip.clock(p.firstVisit)) – \(MapTrip.clock(p.lastVisit))"
                + (p.locality.map { "  near \($0.name), \($0.countryCode)" } ?? "") + "\n"
        }
        try writeText(text, to: output)
    }

    /// Points with the place's fields (less its position) as properties, its name the id.
    static func geoJSON(_ places: [Place]) -> String {
        RegionsGeoJSON.points(places, id: \.name, encode: PlaceCodec.appendPlace)
    }
}
