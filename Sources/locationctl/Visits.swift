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

    @OptionGroup var listing: ListingOptions

    func run() async throws {
        let visits = try await listing.fetch { try await $0.recentVisits() }
        var text = ""
        for v in visits {
            let stay = v.departure.map { " – \(MapTrip.clock($0))  \(MapTrip.duration($0 - v.arrival))" } ?? " – (here now)"
            text += "\(MapTrip.clock(v.arrival))\(stay)  \(DecimalText.fixed(v.coordinate.latitude, 6)),\(DecimalText.fixed(v.coordinate.longitude, 6))"
                + "  ±\(Int(v.horizontalAccuracy.rounded())) m" + (v.place.map { "  p\($0)" } ?? "") + "\n"
        }
        try listing.write(geoJSON: Visits.geoJSON(visits), json: ServerMessage.visits(id: nil, visits: visits).line, text: text)
    }

    /// Points with the visit event's fields (less its position) as properties.
    static func geoJSON(_ visits: [Visit]) -> String {
        RegionsGeoJSON.points(visits, id: { _ in nil }, encode: RecentVisitCodec.appendVisit)
    }
}
