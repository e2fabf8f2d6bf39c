import Foundation
@testable import LocationDaemon
import Testing

/// The `ReadWritePaths=` word a message prints for a drop-in, read back by systemd's own parser
/// (`systemd-analyze verify` warns of a word that is not an absolute path and of an unknown
/// specifier, so a path split at its space or with a bare `%` shows).
@Suite struct UnitFileWordTests {
    static let analyze = URL(fileURLWithPath: "/usr/bin/systemd-analyze")
    static let paths = ["/srv/locationd", "/srv/my data", #"/srv/a"b\c"#, "/srv/50%Zs", "/srv/it's"]

    /// What `systemd-analyze verify` says of a service whose ReadWritePaths= is `value`.
    static func verify(_ value: String) throws -> String {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("unitword-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let unit = dir.appendingPathComponent("t.service")
        try "[Service]\nExecStart=/bin/true\nReadWritePaths=\(value)\n".write(to: unit, atomically: true, encoding: .utf8)
        let run = try runToExit(analyze, ["verify", "--man=no", unit.path])
        return run.out + run.err
    }

    @Test(.enabled("systemd-analyze is not installed (apt-get install systemd)") {
        FileManager.default.isExecutableFile(atPath: UnitFileWordTests.analyze.path)
    })
    func systemdReadsEachPathAsOneAbsolutePath() throws {
        for path in Self.paths {
            #expect(try Self.verify(unitFileWord(path)) == "", "\(path) as \(unitFileWord(path))")
        }
        // The check sees a path written as it is: split at the space, or a bare specifier.
        #expect(try Self.verify("/srv/my data").contains("not absolute"))
        #expect(try Self.verify("/srv/50%Zs").contains("specifier"))
    }

    @Test func aPlainPathIsWrittenAsItIs() {
        #expect(unitFileWord("/srv/locationd") == "/srv/locationd")
        #expect(unitFileWord("/srv/my data") == #""/srv/my data""#)
        #expect(unitFileWord(#"/srv/a"b\c"#) == #""/srv/a\"b\\c""#)
        #expect(unitFileWord("/srv/50%Zs") == "/srv/50%%Zs")
    }
}
