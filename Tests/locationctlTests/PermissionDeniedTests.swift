import Foundation
import Glibc
@testable import locationctl
import Testing
import TestSupport

/// The usermod command of a refused connection names the user and the socket's group as one
/// shell word each, and the user never as an option: run as printed, usermod gets exactly them
/// (a user the user database has no entry for: "$USER", which the shell expands).
@Suite(.enabled(if: getuid() == 0, "needs root: gives a file another group")) struct PermissionDeniedTests {
    @Test func theUsermodCommandGetsTheUserAndGroupAsWritten() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("denied-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        // A file in the group of gid 1 (its name, whatever it is, is the command's group), and
        // a path that does not exist (the group is then location's).
        let socket = dir.appendingPathComponent("socket").path
        #expect(FileManager.default.createFile(atPath: socket, contents: nil))
        #expect(chown(socket, 0, 1) == 0)
        let group = try #require(getgrgid(1).map { String(cString: $0.pointee.gr_name) })
        let marker = dir.appendingPathComponent("marker").path
        let login = ProcessInfo.processInfo.environment["USER"] ?? ""
        for user in awkwardShellWords(marker: marker) + [nil] {
            for (path, expectedGroup) in [(socket, group), (dir.appendingPathComponent("none").path, "location")] {
                let message = permissionDenied(path, user: user)
                let from = try #require(message.range(of: "sudo usermod")?.lowerBound, "\(message)")
                let to = try #require(message.range(of: ", then log in again")?.lowerBound, "\(message)")
                let calls = try shellCalls(String(message[from..<to]), programs: ["sudo"])
                let named = user.map { $0.hasPrefix("-") ? ["--", $0] : [$0] } ?? [login]
                #expect(calls == [["sudo", "usermod", "-aG", expectedGroup] + named], "\(message)")
            }
        }
        #expect(!FileManager.default.fileExists(atPath: marker), "the shell ran part of a name")
    }
}
