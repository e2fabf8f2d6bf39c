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
            SCENARIO is a scenario file (JSON, docs/visits.md), or the name of a bundled one \
            (commuter, delivery, hike, parked-car, spikes, demo), looked up in ./Scenarios, then where \
            make install puts them: ../share/locationd/scenarios from locationctl's directory \
            (/usr/local/share/locationd/scenarios for /usr/local/bin/locationctl); 'demo' is \
            also built in. The output is deterministic for a scenario and seed.
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

/// A scenario by file path, by name in ./Scenarios or the installed scenarios directory
/// (`Scenario.directories`), or the built-in demo.
func loadScenario(_ name: String) throws -> Scenario {
    let text: String
    let source: String
    if let t = readTextFile(name) {
        (text, source) = (t, name)
    } else if let (t, path) = Scenario.directories.lazy.compactMap({ dir in
        readTextFile("\(dir)/\(name).json").map { ($0, "\(dir)/\(name).json") }
    }).first {
        (text, source) = (t, path)
    } else if name == "demo" {
        (text, source) = (demoScenarioJSON, "demo (built in)")
    } else if name.contains("/") || name.hasSuffix(".json") {
        // A path, not a name: say why it could not be read.
        _ = try readFileBytes(name, what: "scenario file")
        throw RuntimeError("\(name): cannot read scenario file")
    } else {
        let dirs = Scenario.directories
        let looked = dirs.count > 1 ? dirs.dropLast().joined(separator: ", ") + " or \(dirs.last!) (where make install puts the bundled ones)" : dirs[0]
        let known = Scenario.bundledNames.joined(separator: ", ")
        throw RuntimeError("no scenario '\(name)': no file '\(name)', and no \(name).json in \(looked); give a scenario file's path or one of: \(known)")
    }
    do { return try Scenario.parse(text) } catch { throw RuntimeError(error.described(file: source)) }
}

extension Scenario {
    /// Where scenarios are looked up by name: ./Scenarios (a checkout), then the installed ones.
    /// `make install` puts them in $(DATADIR)/locationd/scenarios, $(PREFIX)/share/… by
    /// default; they are found relative to this executable ($(BINDIR)/../share/locationd/
    /// scenarios), so an install under any PREFIX finds its own without a path compiled in.
    static var directories: [String] {
        var dirs = ["./Scenarios"]
        if let exe = executablePath() {
            let bin = exe[..<(exe.lastIndex(of: "/") ?? exe.startIndex)]
            let prefix = bin[..<(bin.lastIndex(of: "/") ?? bin.startIndex)]
            dirs.append("\(prefix)/share/locationd/scenarios")
        }
        return dirs
    }

    /// The names `loadScenario` finds: the directories' *.json and the built-in demo, sorted.
    static var bundledNames: [String] {
        var names: Set<String> = ["demo"]
        for dir in directories {
            guard let d = opendir(dir) else { continue }
            defer { closedir(d) }
            while let entry = readdir(d) {
                let file = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
                if file.hasSuffix(".json"), file.count > 5 { names.insert(String(file.dropLast(5))) }
            }
        }
        return names.sorted()
    }
}
