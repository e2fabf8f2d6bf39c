import ArgumentParser

@main
struct LocationCtl: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "locationctl",
        abstract: "Talk to locationd, or run its engine over a recorded NMEA log.",
        version: "0.1.0",
        subcommands: [Watch.self, Status.self, Replay.self, Simulate.self, Evaluate.self, Regions.self, Policy.self, Reload.self])
}
