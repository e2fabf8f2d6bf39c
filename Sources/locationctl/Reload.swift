import ArgumentParser
import LocationClient
import LocationCore
import LocationProtocol

/// `locationctl reload`: the unit's `ExecReload=`. A `reload` request on the daemon's socket,
/// answered once the reload has finished (docs/protocol.md, "Reload"): exits 0 when the new
/// configuration is in force, 1 with the daemon's reason when the file was refused. (SIGHUP alone
/// returns before the daemon has reloaded, and systemd 252 ends the reload job when
/// `ExecReload=` exits: docs/systemd.md, "Units".)
struct Reload: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Reload locationd's configuration file and wait until the reload has finished: exit 0 when it applied, 1 with the reason when the file was refused (locationd then keeps its current configuration).",
        discussion: """
            The unit's ExecReload=: systemctl reload locationd then returns once the new \
            configuration is in force, and fails when it was refused. Only root and locationd's \
            own user may ask (docs/systemd.md, "Reload").
            """)

    @OptionGroup var socket: SocketFlag
    @Option(help: "Give up after this many seconds (keep it below systemd's TimeoutStartSec=, 90 s unless the unit sets it).") var timeout: Double = 60

    func validate() throws {
        guard timeout > 0, timeout <= 86_400 else { throw ValidationError("--timeout \(numberText(timeout)) is out of range; expected more than 0 and at most 86400 seconds") }
    }

    func run() async throws {
        let client = try await connect(path: socket.path, wait: 0, requestTimeout: .milliseconds(Int64(timeout * 1000)))
        defer { client.close() }
        do {
            try await client.reload()
        } catch let error as ProtocolError where error.code == .reloadRefused {
            throw RuntimeError("locationd refused the reload and keeps its current configuration: \(error.message)")
        } catch let error as ProtocolError where error.code == .notPermitted {
            throw RuntimeError("locationd refused the reload: \(error.message); run it as root (sudo locationctl reload, or systemctl reload locationd)")
        } catch {
            throw RuntimeError("the reload did not finish: \(error); the daemon's log says more (journalctl -u locationd)")
        }
    }
}
