import ArgumentParser
import LocationClient
import LocationProtocol

/// What `places` and `visits` share: the socket, a purpose, the output form and file, and the
/// session they list from.
struct ListingOptions: ParsableArguments {
    @OptionGroup var socket: SocketFlag
    @Option(help: "A purpose key the policy lists (for a precise session under a rule that is approximate without one).")
    var purpose: String?
    @Flag(help: "Print one message, as the daemon's reply but with every page's entries in it.") var json = false
    @Flag(help: "Print a GeoJSON FeatureCollection of Points (opens in any GeoJSON viewer).") var geojson = false
    @Option(name: .shortAndLong, help: "Write to this file instead of standard output.") var output: String?

    func validate() throws {
        if json && geojson { throw ValidationError("give --json or --geojson, not both") }
    }

    /// Connects, starts a when-in-use session and returns what `list` reads from it.
    func fetch<T>(_ list: (LocationClient) async throws -> T) async throws -> T {
        let client = try await connect(path: socket.path, wait: 0)
        defer { client.close() }
        _ = try await startSession(client, .whenInUse, purpose: purpose, what: "a session")
        do { return try await list(client) } catch let e as ProtocolError {
            throw RuntimeError("locationd refused: \(e.code.rawValue): \(e.message)")
        }
    }

    /// Writes the GeoJSON, the JSON message or the text, as asked.
    func write(geoJSON: @autoclosure () -> String, json message: @autoclosure () -> String, text: @autoclosure () -> String) throws {
        try writeText(geojson ? geoJSON() : json ? message() : text(), to: output)
    }
}
