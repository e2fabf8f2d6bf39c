import Foundation
import Glibc
@testable import LocationDaemon
import Testing
import TestSupport

/// The shell commands locationd's and locationctl's messages tell their reader to run name each
/// path and user as one shell word, and none as an option: run as printed, each command gets
/// exactly them (locationctl's usermod: PermissionDeniedTests).
@Suite struct FixCommandTests {
    static let marker = FileManager.default.temporaryDirectory.appendingPathComponent("quote-\(UUID().uuidString.prefix(8))").path

    /// `--` before the operands when one of them starts with '-'.
    static func operands(_ words: String...) -> [String] {
        words.contains { $0.hasPrefix("-") } ? ["--"] + words : words
    }

    /// The text of `message` between `start` and the last `end`.
    static func command(in message: String, from start: String, to end: String) throws -> String {
        let from = try #require(message.range(of: start)?.lowerBound, "\(message)")
        let to = try #require(message.range(of: end, options: .backwards)?.lowerBound, "\(message)")
        return String(message[from..<to])
    }

    /// The store's and the privacy secret's fixes: chown and chmod of the file or directory.
    @Test func theOwnershipCommandsGetThePathAndUserAsWritten() throws {
        for word in awkwardShellWords(marker: Self.marker) {
            let path = word + "/x.db"
            let calls = try shellCalls(Database.giving(path, to: word, mode: "0600"), programs: ["chown", "chmod"])
            #expect(calls == [["chown"] + Self.operands(word, path), ["chmod"] + Self.operands("0600", path)], "\(word)")
        }
        #expect(Database.giving("/var/lib/locationd/x.db", to: "locationd", mode: "0600")
                == "chown locationd /var/lib/locationd/x.db && chmod 0600 /var/lib/locationd/x.db", "plain words are left as they are")
        #expect(!FileManager.default.fileExists(atPath: Self.marker), "the shell ran part of a word")
    }

    /// The socket's directory that cannot be made: mkdir, chown and chmod of the socket's
    /// directory (the store's directory gets the same commands, Database.creating).
    @Test func theSocketDirectorysCommandsGetThePathAndUserAsWritten() throws {
        for word in awkwardShellWords(marker: Self.marker) {
            let target = word + "/run"
            let message = SocketServerError.cannotCreateDirectory(word, target: target, errno: EACCES, user: word, uid: 1).description
            let command = try Self.command(in: message, from: "mkdir -p ", to: "; under systemd")
            let calls = try shellCalls(command, programs: ["mkdir", "chown", "chmod"])
            #expect(calls == [["mkdir", "-p"] + Self.operands(target), ["chown"] + Self.operands(word, target), ["chmod"] + Self.operands("0755", target)],
                    "\(message)")
        }
        #expect(!FileManager.default.fileExists(atPath: Self.marker), "the shell ran part of a word")
    }

    /// A damaged database: sqlite3 takes no `--`, so a path starting with '-' is given from ".".
    @Test func theRecoverCommandGetsThePathAsWritten() throws {
        for word in awkwardShellWords(marker: Self.marker) {
            let message = Database.damagedFix(word)
            let command = try Self.command(in: message, from: "sqlite3 ", to: " may save some")
            let calls = try shellCalls(command, programs: ["sqlite3"])
            #expect(calls == [["sqlite3", word.hasPrefix("-") ? "./" + word : word, ".recover"]], "\(message)")
        }
        #expect(!FileManager.default.fileExists(atPath: Self.marker), "the shell ran part of a word")
    }

    /// A dump at a path a shell would split and expand, an index of it that is no index, and
    /// an empty NMEA log beside them, in a new directory under `top`.
    static func dumpWithAnIndexPassedOver(in top: URL) throws -> (dump: String, log: String) {
        let dir = top.appendingPathComponent("o'brien $HOME a\\b")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: false)
        let dump = dir.appendingPathComponent("cities.txt").path
        let log = dir.appendingPathComponent("empty.nmea").path
        for file in [dump, log] { #expect(FileManager.default.createFile(atPath: file, contents: Data())) }
        #expect(FileManager.default.createFile(atPath: dump + ".idx", contents: Data("no index".utf8)))
        return (dump, log)
    }

    /// A gazetteer index the daemon passes over, and locationctl replay likewise: the rebuild
    /// command names the dump as it is.
    @Test func theIndexRebuildCommandGetsTheDumpAsWritten() throws {
        let top = try LocalityTests.directory()
        defer { try? FileManager.default.removeItem(at: top) }
        let (dump, log) = try Self.dumpWithAnIndexPassedOver(in: top)
        let daemon = try #require(try GazetteerFile.load(dump).indexNotUsed)
        let replay = try LocationCtlReplayTests.run(["replay", log, "--gazetteer", dump]).err
        for message in [daemon, replay] {
            let command = try Self.command(in: message, from: "locationctl gazetteer", to: ")")
            #expect(try shellCalls(command, programs: ["locationctl"]) == [["locationctl", "gazetteer", "build", dump]], "\(message)")
        }
    }
}
