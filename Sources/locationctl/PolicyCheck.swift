import ArgumentParser
import Glibc

/// `locationctl policy check [FILE]`: validates a config file's access rules with the daemon's
/// own parser (it runs `locationd --check-config [FILE]`, found next to locationctl or on PATH),
/// printing `FILE:LINE: problem` or the effective settings. Without FILE, the file the daemon
/// reads (/etc/locationd/locationd.toml), as `--check-config` does: its "no such file" advice
/// to leave out the path then holds for both commands.
struct Policy: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Access policy tools.", subcommands: [Check.self])

    struct Check: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Check a config file's [policy.NAME] rules (and the rest of it) with locationd's parser; exit 0 when valid, 78 otherwise (75: a user or group could not be looked up for now).")

        @Argument(help: "The config file (default: the one locationd reads, /etc/locationd/locationd.toml).") var file: String?

        func run() throws {
            var candidates: [String] = []
            if let me = executablePath(), let slash = me.lastIndex(of: "/") { candidates.append(String(me[..<slash]) + "/locationd") }
            if let path = getenv("PATH").map({ String(cString: $0) }) {
                candidates += path.split(separator: ":").map { "\($0)/locationd" }
            }
            guard let daemon = candidates.first(where: { access($0, X_OK) == 0 }) else {
                throw RuntimeError("locationd not found next to locationctl or on PATH; policy check runs locationd --check-config FILE, so install locationd (make install) or put it on PATH")
            }
            let args = [daemon, "--check-config"] + (file.map { [$0] } ?? [])
            var argv: [UnsafeMutablePointer<CChar>?] = args.map { strdup($0) } + [nil]
            execv(daemon, &argv)
            throw RuntimeError("cannot run \(daemon): \(String(cString: strerror(errno)))")
        }
    }
}
