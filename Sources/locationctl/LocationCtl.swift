import ArgumentParser

@main
struct LocationCtl: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "locationctl",
        abstract: "Talk to locationd, or run its engine over a recorded NMEA log.",
        discussion: """
            Exit status: 0 on success; 1 for a failure at run time, printed with its reason and \
            no usage (a file that cannot be opened, read or written, an unknown scenario, \
            locationd not reachable, refusing a request or closing the connection); 64 for a usage \
            error (a bad flag or value), printed with the usage; policy check: 78 when the file is \
            missing or invalid, 75 when a policy user or group could not be looked up for now (as \
            locationd --check-config).
            """,
        version: "0.1.0",
        subcommands: [Watch.self, Status.self, Replay.self, Simulate.self, Evaluate.self, Regions.self, Places.self, Visits.self, MapCommand.self, GazetteerCommand.self, Policy.self, Reload.self])
}
