import Foundation
import TestSupport

extension StandInJournal {
    /// The daemon with `arguments`, logging to this journal.
    func spawn(arguments: [String], environment: [String: String] = [:]) throws -> DaemonProcess {
        let (added, wrapper, prelude) = try launch(stderrPath: directory.appendingPathComponent("stderr.log").path)
        return try DaemonProcess(spawning: arguments, environment: environment.merging(added) { mine, _ in mine },
                                 directory: directory, wrapper: wrapper, prelude: prelude)
    }
}
