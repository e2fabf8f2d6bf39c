import ArgumentParser
import LocationClient
import LocationCore
import LocationProtocol

/// `locationctl regions …`: the calling program's geofences in the daemon. Regions belong to
/// the program (uid + executable), so regions added here belong to locationctl itself.
struct Regions: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Add, remove, list, import or export geofences in locationd.",
        subcommands: [Add.self, Remove.self, List.self, Import.self, Export.self])

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Register one circular region.")
        @OptionGroup var session: RegionsSession
        @Argument(help: "Region id.") var id: String
        // Unconditional: the value may start with '-' (south, west); otherwise "--latitude -33.9"
        // is refused as a missing value, and only "--latitude=-33.9" works.
        @Option(parsing: .unconditional, help: "Centre latitude, degrees (south negative).") var latitude: Double
        @Option(parsing: .unconditional, help: "Centre longitude, degrees (west negative).") var longitude: Double
        @Option(help: "Radius, metres (10…100000).") var radius: Double
        @Option(help: "Report dwell after this many seconds inside.") var dwell: Double?
        @Flag(help: "Report the initial state (inside/outside).") var initialState = false

        var region: Region {
            Region(id: id, center: Coordinate(latitude: latitude, longitude: longitude), radius: radius,
                   notifyInitialState: initialState, dwell: dwell)
        }

        func validate() throws {
            // The daemon's own rule, checked before connecting: a bad value is a usage error, and
            // a NaN (sent as null) would be refused as "regions[0] (ID) has no latitude".
            if let reason = region.invalidReason { throw ValidationError(reason) }
        }

        func run() async throws {
            try await Regions.add([region], session: session)
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Unregister regions by id (or --all).")
        @OptionGroup var session: RegionsSession
        @Argument(help: "Region ids.") var ids: [String] = []
        @Flag(help: "Remove every region.") var all = false

        func validate() throws {
            // Here, not in run(): a ValidationError from run() is printed with the top-level usage.
            guard all || !ids.isEmpty else { throw ValidationError("give region ids or --all") }
        }

        func run() async throws {
            let reply = try await Regions.request(session) { .regionsRemove(id: $0, ids: all ? nil : ids) }
            guard case .regionsChanged(_, _, let removed, let registered) = reply else { throw RuntimeError("unexpected reply from locationd: \(reply.line)") }
            print("removed \(removed); \(registered) registered")
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List regions with their states (one JSON line with --json).")
        @OptionGroup var session: RegionsSession
        @Flag(help: "Print one regions message, as the daemon's reply but with every page's regions in it.") var json = false

        func run() async throws {
            let records = try await Regions.all(session)
            var out = StandardOutput()
            if json { out.line(ServerMessage.regions(id: nil, regions: records).line.trimmingSuffixNewline) } else {
                for r in records {
                    out.line("\(printableID(r.region.id))  \(DecimalText.fixed(r.region.center.latitude, 6)),\(DecimalText.fixed(r.region.center.longitude, 6))  r=\(DecimalText.fixed(r.region.radius, 1)) m  \(r.state.rawValue)")
                }
            }
            out.flush()
        }
    }

    struct Import: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Register the regions of a GeoJSON FeatureCollection (see docs/regions.md).")
        @OptionGroup var session: RegionsSession
        @Argument(help: "GeoJSON file, or - for standard input.") var file: String

        func run() async throws {
            try await Regions.add(try RegionsGeoJSON.read(path: file), session: session)
        }
    }

    struct Export: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print the regions as GeoJSON (opens in any GeoJSON viewer).")
        @OptionGroup var session: RegionsSession
        @Option(name: .shortAndLong, help: "Write to this file instead of standard output.") var output: String?

        func run() async throws {
            let records = try await Regions.all(session)
            try writeText(RegionsGeoJSON.export(records), to: output)
        }
    }

    /// The daemon answers region requests only in an always, precise session; a refusal says
    /// that this is the session it refused, as watch does for its own.
    static func openSession(_ client: LocationClient, _ session: RegionsSession) async throws {
        let asked = session.purpose.map { " (--purpose \($0))" } ?? ""
        _ = try await startSession(client, .always, purpose: session.purpose, what: "the always session regions need\(asked)")
    }

    /// A refused region request; an approximate session's refusal names the way to a precise one
    /// when none was asked for (a rule that is approximate but lists purpose keys grants one).
    static func refusal(_ e: ProtocolError, _ session: RegionsSession, refused what: String? = nil) -> RuntimeError {
        let hint = e.code == .fullAccuracyDenied && session.purpose == nil
            ? " (if the policy rule lists purpose keys, pass one with --purpose)" : ""
        return RuntimeError("locationd refused\(what.map { " " + $0 } ?? ""): \(e.code.rawValue): \(e.message)\(hint)")
    }

    /// Every region of locationctl's program, page by page.
    static func all(_ session: RegionsSession) async throws -> [RegionRecord] {
        let client = try await connect(path: session.socket.path, wait: 0)
        try await Regions.openSession(client, session)
        defer { client.close() }
        do { return try await client.regions() } catch let e as ProtocolError {
            throw refusal(e, session)
        }
    }

    static func request(_ session: RegionsSession, _ make: @escaping @Sendable (RequestID) -> Request) async throws -> ServerMessage {
        let client = try await connect(path: session.socket.path, wait: 0)
        try await Regions.openSession(client, session)
        defer { client.close() }
        do { return try await client.request(make) } catch let e as ProtocolError {
            throw refusal(e, session)
        }
    }

    /// Sends regions in requests that fit the line limit; each request is all-or-nothing.
    static func add(_ regions: [Region], session: RegionsSession) async throws {
        let client = try await connect(path: session.socket.path, wait: 0)
        try await Regions.openSession(client, session)
        defer { client.close() }
        // At least one request, so that an empty file reports the regions registered, not 0.
        var start = 0, registered = 0
        repeat {
            var end = min(regions.count, start + 200)
            while end > start + 1, Request.regionsAdd(id: .number(1), regions: Array(regions[start..<end])).line.utf8.count > LocationProtocol.maxLineBytes - 64 {
                end = start + (end - start) / 2
            }
            let batch = Array(regions[start..<end])
            let reply: ServerMessage
            do { reply = try await client.request { .regionsAdd(id: $0, regions: batch) } } catch let e as ProtocolError {
                throw refusal(e, session, refused: Self.refused(start..<end, of: regions))
            }
            guard case .regionsChanged(_, _, _, let r) = reply else { throw RuntimeError("unexpected reply from locationd: \(reply.line)") }
            registered = r
            start = end
        } while start < regions.count
        print("added \(regions.count); \(registered) registered")
    }
}

/// How the regions commands reach the daemon: its socket, and the purpose key of their session.
struct RegionsSession: ParsableArguments {
    @OptionGroup var socket: SocketFlag
    @Option(help: "A purpose key the policy lists: regions need a precise always session, which a rule that is approximate but lists purpose keys grants with one.")
    var purpose: String?
}

extension Regions {
    /// The regions of a refused request, and whether any were registered before it (each
    /// request is all-or-nothing; the earlier ones stay).
    static func refused(_ batch: Range<Int>, of regions: [Region]) -> String {
        if regions.isEmpty { return "a request with no regions (sent to learn how many are registered)" }
        if regions.count == 1 { return "region '\(regions[0].id)'; it was not registered" }
        let which = batch.count == 1 ? "region \(batch.lowerBound + 1) ('\(regions[batch.lowerBound].id)')"
                                     : "regions \(batch.lowerBound + 1)…\(batch.upperBound)"
        let n = batch.lowerBound
        let before = n == 0 ? "none of the \(regions.count) were registered"
            : "the \(n) before \(batch.count == 1 ? "it" : "them") \(n == 1 ? "was" : "were") registered"
        let after = regions.count - batch.upperBound
        let unsent = after == 0 ? "" : ", the \(after) after \(batch.count == 1 ? "it" : "them") not sent"
        return "\(which) of \(regions.count); \(before)\(unsent)"
    }
}

extension String {
    var trimmingSuffixNewline: String { hasSuffix("\n") ? String(dropLast()) : self }
}
