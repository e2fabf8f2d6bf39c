import ArgumentParser
import LocationCore
import NMEA
import Simulation
#if canImport(Glibc)
import Glibc
#endif

/// `locationctl simulate SCENARIO`: an NMEA log and the ground truth of a scenario file
/// (docs/visits.md, "Scenario format"), made by our own code so the project's demo and test
/// data never depend on a recorded file.
struct Simulate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write an NMEA log (RMC+GGA+GSA+GST) and the true visits of a scenario.",
        discussion: """
            SCENARIO is a scenario file (JSON, docs/visits.md), the name of one in ./Scenarios \
            (commuter, delivery, hike, parked-car, demo), or 'demo' (built in). The output is \
            deterministic for a scenario and seed.
            """)

    @Argument(help: "Scenario file or name.") var scenario: String = "demo"
    @Option(name: .shortAndLong, help: "Write the NMEA log to this file instead of standard output.") var output: String?
    @Option(help: "Write the true visits (JSON lines) to this file.") var truth: String?
    @Option(help: "Seed of the noise (default: the scenario's).") var seed: UInt64?

    func run() throws {
        var s = try loadScenario(scenario)
        if let seed { s.seed = seed }
        let result = Simulator(s).run()
        try writeBytes(result.nmea, to: output)
        if let truth { try writeText(result.truth.map(\.line).joined(), to: truth) }
    }
}

/// A scenario by file path, by name in ./Scenarios, or the built-in demo.
func loadScenario(_ name: String) throws -> Scenario {
    let text: String
    if let t = readTextFile(name) {
        text = t
    } else if let t = readTextFile("Scenarios/\(name).json") {
        text = t
    } else if name == "demo" {
        text = demoScenarioJSON
    } else {
        throw RuntimeError("no scenario '\(name)': not a file, and no Scenarios/\(name).json here")
    }
    do { return try Scenario.parse(text) } catch { throw RuntimeError("\(name): \(error)") }
}
