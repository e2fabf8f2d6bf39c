import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// journald played by a datagram socket the test reads. libsystemd sends to
/// /run/systemd/journal/socket, so the process under test runs in a mount namespace of its own
/// (`unshare -m`) with `directory/run` mounted over /run, and with `JOURNAL_STREAM` naming its
/// stderr, as systemd sets it (`launch`). Root only.
public struct StandInJournal {
    public static var isAvailable: Bool { getuid() == 0 && access("/usr/bin/unshare", X_OK) == 0 }

    public let socket: DatagramSocket
    public let directory: URL

    public init(directory: URL) throws {
        self.directory = directory
        let run = directory.appendingPathComponent("run/systemd/journal")
        try FileManager.default.createDirectory(at: run, withIntermediateDirectories: true)
        socket = try DatagramSocket(path: run.appendingPathComponent("socket").path)
    }

    /// How to start a process that logs to this journal, its stderr going to `stderrPath`
    /// (created here, empty; the spawner opens it without replacing it): the environment to add,
    /// the command it runs under, and a shell prelude to run in that command before `exec`.
    public func launch(stderrPath: String) throws -> (environment: [String: String], wrapper: [String], prelude: String) {
        guard FileManager.default.createFile(atPath: stderrPath, contents: nil) else {
            throw TestFailure(description: "cannot create \(stderrPath)")
        }
        var st = stat()
        guard stat(stderrPath, &st) == 0 else { throw TestFailure(description: "stat \(stderrPath): \(errno)") }
        return (["JOURNAL_STREAM": "\(st.st_dev):\(st.st_ino)"], ["/usr/bin/unshare", "-m"],
                "mount --bind '\(directory.path)/run' /run || exit 98; ")
    }

    /// The next entry's fields, or nil when none comes within `timeout` seconds.
    public func receive(timeout: Double) throws -> [String: String]? {
        try socket.receive(timeout: timeout).map(Self.parse)
    }

    /// Parses a native-protocol datagram (both field forms); fails on malformed input.
    public static func parse(_ d: [UInt8]) throws -> [String: String] {
        var fields: [String: String] = [:]
        var i = 0
        while i < d.count {
            guard let nl = d[i...].firstIndex(of: 10) else { throw TestFailure(description: "field without newline") }
            let line = d[i..<nl]
            if let eq = line.firstIndex(of: UInt8(ascii: "=")) {
                fields[String(decoding: d[i..<eq], as: UTF8.self)] = String(decoding: d[(eq + 1)..<nl], as: UTF8.self)
                i = nl + 1
            } else {
                let key = String(decoding: line, as: UTF8.self)
                var length: UInt64 = 0
                for k in 0..<8 { length |= UInt64(d[nl + 1 + k]) << (8 * UInt64(k)) }
                let start = nl + 9, end = start + Int(length)
                guard end < d.count, d[end] == 10 else { throw TestFailure(description: "bad binary field \(key)") }
                fields[key] = String(decoding: d[start..<end], as: UTF8.self)
                i = end + 1
            }
        }
        return fields
    }
}
