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

    @OptionGroup var listing: ListingOptions

    func run() async throws {
        let places = try await listing.fetch { try await $0.places() }
        var text = ""
        for p in places {
            text += "\(p.name)  \(DecimalText.fixed(p.centre.latitude, 6)),\(DecimalText.fixed(p.centre.longitude, 6))  \(p.visits) visit\(p.visits == 1 ? "" : "s")  \(MapTrip.duration(p.totalSeconds))  \(MapTrip.clock(p.firstVisit)) – \(MapTrip.clock(p.lastVisit))"
                + (p.locality.map { "  near \($0.name), \($0.countryCode)" } ?? "") + "\n"
        }
        try listing.write(geoJSON: Places.geoJSON(places), json: ServerMessage.places(id: nil, places: places).line, text: text)
    }

    /// Points with the place's fields (less its position) as properties, its name the id.
    static func geoJSON(_ places: [Place]) -> String {
        RegionsGeoJSON.points(places, id: \.name, encode: PlaceCodec.appendPlace)
    }
}
