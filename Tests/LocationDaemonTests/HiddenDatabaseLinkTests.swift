import Foundation
@testable import LocationDaemon
import Testing
#if canImport(Glibc)
import Glibc
#endif

extension ReadOnlyDatabaseTests {
    /// A database whose path leads through a symbolic link into a directory the unit hides
    /// (a state directory linked to a home directory): named as hidden, saying where it leads,
    /// as a replay log is (b6fbdf5). It read "make it readable and writable by the daemon's user
    /// (chown daemon, chmod 0600)", which cannot help.
    @Test(.enabled("needs unshare, a locationd built outside /home, and user 'daemon' able to run it") {
        try DaemonProcess.canHideHome && OtherUserTests.daemonUserCanRunLocationd()
    })
    func aDatabaseLinkedIntoADirectoryTheUnitHidesSaysWhy() throws {
        let dir = try DaemonProcess.makeDirectory()
        let home = "/home/nobody-\(UUID().uuidString.prefix(8))"
        let link = dir.appendingPathComponent("state").path
        #expect(symlink(home, link) == 0)
        let database = link + "/locationd.db"
        let invocation = ["INVOCATION_ID": "0123456789abcdef0123456789abcdef"]
        let prelude = "mount -t tmpfs -o mode=000 tmpfs /home || exit 98; exec \(Self.asDaemonUser.joined(separator: " ")) \"$0\" \"$@\"; "
        let daemon = try DaemonProcess(spawning: ["--gpsd", "127.0.0.1:1", "--database", database, "--socket", dir.appendingPathComponent("s").path],
                                       environment: invocation, directory: dir, wrapper: ["/usr/bin/unshare", "-m"], prelude: prelude)
        defer { daemon.stop() }
        #expect(daemon.waitForExit() == 78, "\(daemon.stderrText())")
        #expect(daemon.stderrText().contains("it leads to \(home)/locationd.db.lock, and the unit's ProtectHome=yes hides /home from locationd"), "\(daemon.stderrText())")
        #expect(!daemon.stderrText().contains("chmod"), "\(daemon.stderrText())")
    }
}
