import Synchronization
import Foundation
import LocationClient
import LocationCore
import LocationProtocol
import NIOCore
import TOMLConfig
import TestSupport
import Testing
@testable import LocationDaemon

/// Policy rules in the config: parsing, every kind of bad rule with its message, matching.
@Suite struct PolicyTests {
    /// The kernel's `Groups:` line has a tab after the colon: the first (lowest) group counts too
    /// (a system group like `location`, added with usermod -aG, is usually that one).
    /// Who may make the daemon's administrative requests (`reload`): root and the daemon's own
    /// user, whatever the rules grant for location (the built-in owner rule off included).
    @Test func administratorsAreRootAndTheDaemonsUser() {
        var policy = Policy()
        policy.ownerUID = 998
        policy.ownerRule = false
        #expect(policy.isAdministrator(uid: 0) && policy.isAdministrator(uid: 998))
        #expect(!policy.isAdministrator(uid: 1000) && !policy.isAdministrator(uid: 65534))
        #expect(!policy.isOwner(uid: 998), "the owner rule is what is off, not the administrator")
    }

    @Test func everySupplementaryGroupIsRead() throws {
        #expect(PeerIdentity.supplementaryGroups(status: "Name:\tx\nGroups:\t5 998 1000 \nNSpid:\t1\n") == [5, 998, 1000])
        #expect(PeerIdentity.supplementaryGroups(status: "Groups:\t\n").isEmpty)
        #expect(PeerIdentity.supplementaryGroups(status: "Name:\tx\n").isEmpty)
        // This process's own line, as the kernel writes it.
        let own = try #require(try DaemonOptions.readFile("/proc/self/status"))
        let line = try #require(own.split(separator: "\n").first { $0.hasPrefix("Groups:") })
        let count = line.dropFirst(7).split(whereSeparator: { $0 == " " || $0 == "\t" }).count
        #expect(PeerIdentity.supplementaryGroups(status: own).count == count)
    }

    /// A user database that does not answer (LDAP or sssd down at boot) is no unknown user: the
    /// start exits 75, which the unit restarts, where an unknown name is 78, which it does not.
    /// (`getpwnam` says nil for both, which would keep the service down for good.)
    @Test func aUserDatabaseThatDoesNotAnswerIsATemporaryFailure() throws {
        let document = try TOMLDocument.parse("[policy.fleet]\nuser = \"fleet\"\nauthorization = \"always\"\n", file: "locationd.toml")
        let down: (String) throws(Policy.LookupFailure) -> UInt32? = { _ throws(Policy.LookupFailure) in throw Policy.LookupFailure(reason: "Connection refused") }
        do {
            _ = try Policy.parse(document, file: "locationd.toml", users: down)
            Issue.record("accepted with the user database down")
        } catch {
            #expect(error.temporary)
            #expect(error.description == "locationd.toml:2: cannot look up user 'fleet': the user database did not answer (Connection refused); check its service (LDAP, sssd), or give the user as a number")
            #expect(DaemonOptions.Failure.config(error).exitCode == 75)
        }
        do {
            _ = try Policy.parse(document, file: "locationd.toml", users: { _ in nil })
            Issue.record("accepted an unknown user")
        } catch {
            #expect(!error.temporary && DaemonOptions.Failure.config(error).exitCode == 78, "\(error)")
        }
        // A mistake elsewhere in the file is for good whatever the lookup: 78 naming it, at once,
        // not 75 until the database answers and only then 78 (in the policy, or in another table).
        for (text, line, problem) in [
            ("[policy.fleet]\nuser = \"fleet\"\nauthorization = \"always\"\n[policy.other]\nuser = 5\nauthorization = \"alway\"\n",
             6, "unknown authorization 'alway'"),
            ("[policy.fleet]\nuser = \"fleet\"\nauthorization = \"always\"\n[gpsd]\nport = 0\n", 5, "'gpsd.port'"),
        ] {
            let typo = try TOMLDocument.parse(text, file: "locationd.toml")
            var options = DaemonOptions()
            do {
                try ConfigSchema.apply(typo, file: "locationd.toml", to: &options, users: down)
                Issue.record("accepted \(text)")
            } catch {
                #expect(!error.temporary && error.line == line && error.message.contains(problem), "\(error)")
            }
        }
        var options = DaemonOptions()
        #expect(throws: ConfigError.self) { try ConfigSchema.apply(document, file: "locationd.toml", to: &options, users: down) }
        // Once one lookup went unanswered the others are not made (each could wait out the
        // directory's timeout).
        let asked = Mutex(0)
        let counting: (String) throws(Policy.LookupFailure) -> UInt32? = { _ throws(Policy.LookupFailure) in
            asked.withLock { $0 += 1 }
            throw Policy.LookupFailure(reason: "Connection refused")
        }
        let two = try TOMLDocument.parse("[policy.a]\nuser = \"a\"\nauthorization = \"always\"\n[policy.b]\nuser = \"b\"\nauthorization = \"always\"\n", file: "locationd.toml")
        #expect(throws: ConfigError.self) { try Policy.parse(two, file: "locationd.toml", users: counting) }
        #expect(asked.withLock { $0 } == 1)
        // The same for what is checked after the file: an unreadable replay log (78), flags that
        // do not go together (64).
        let policyOnly = "[policy.fleet]\nuser = \"fleet\"\nauthorization = \"always\"\n"
        let file = policyOnly + "[replay]\nfile = \"/var/log/none.nmea\"\n"
        for (arguments, status, problem) in [([String](), Int32(78), "'replay.file'"), (["--replay", "-", "--loop"], 64, "--loop cannot replay standard input")] {
            do {
                _ = try DaemonOptions.parse(["--config", "locationd.toml"] + arguments, readFile: { _ in file },
                                            replayProblem: { $0 == "-" ? nil : "No such file or directory" }, users: down)
                Issue.record("accepted \(arguments)")
            } catch {
                #expect(error.exitCode == status && error.description.contains(problem), "\(error)")
            }
        }
        do {
            _ = try DaemonOptions.parse(["--config", "locationd.toml"], readFile: { _ in policyOnly },
                                        replayProblem: { _ in nil }, users: down)
            Issue.record("accepted with the user database down")
        } catch {
            #expect(error.exitCode == 75, "\(error)")
        }
        // The real lookups: a name the database does not know is nil, not a failure.
        #expect(try Policy.lookUpUser("root") == 0 && Policy.lookUpGroup("root") == 0)
        #expect(try Policy.lookUpUser("no-such-user-xyz") == nil && Policy.lookUpGroup("no-such-group-xyz") == nil)
        // The unit restarts a start that exited 75.
        let unit = try String(contentsOf: ConfigTests.repo.appendingPathComponent("systemd/locationd.service"), encoding: .utf8)
        #expect(!unit.split(separator: "\n").contains { $0.hasPrefix("RestartPreventExitStatus=") && $0.contains("75") })
    }

    /// glibc's getpwnam_r/getgrnam_r say "not found" with 0 and no entry, and return an error
    /// code only when a service did not answer: ENOENT is nss-pam-ldapd's when nslcd is not
    /// running, so it is a failed lookup (75), not an unknown user (78, for good). A buffer too
    /// small (ERANGE) grows past 1 MiB: a large group's members need it.
    @Test func getpwnamRCodesAndBufferGrowth() throws {
        for code in [ENOENT, ESRCH, EBADF, EPERM, EIO] {
            #expect(throws: Policy.LookupFailure(reason: String(cString: strerror(code)))) {
                try Policy.lookUp { _, _, _ in code }
            }
        }
        #expect(try Policy.lookUp { _, _, _ in 0 } == nil)
        var sizes: [Int] = []
        let found = try Policy.lookUp { _, size, result in
            sizes.append(size)
            guard size >= 4 << 20 else { return ERANGE }
            result = 7
            return 0
        }
        #expect(found == 7 && sizes.last == 4 << 20, "\(sizes)")
        // Bounded: a module that keeps saying ERANGE is a failed lookup at 32 MiB, no larger.
        sizes = []
        #expect(throws: Policy.LookupFailure(reason: String(cString: strerror(ERANGE)))) {
            try Policy.lookUp { _, size, _ in sizes.append(size); return ERANGE }
        }
        #expect(sizes.last == 32 << 20 && sizes.max() == 32 << 20, "\(sizes)")
    }

    /// A program upgraded while it runs keeps its identity; the capability check reads CapEff.
    @Test func executableLinksAndTheCapabilityCheck() {
        #expect(ProgramIdentity.path(ofLink: "/usr/bin/tracker (deleted)") == "/usr/bin/tracker")
        #expect(ProgramIdentity.path(ofLink: "/usr/bin/tracker") == "/usr/bin/tracker")
        let status = { (eff: String) in "Name:\tlocationd\nCapInh:\t0000000000080000\nCapEff:\t\(eff)\nCapBnd:\t000001ffffffffff\n" }
        #expect(ProgramIdentity.canIdentifyOtherUsers(status: status("0000000000080000")))
        #expect(ProgramIdentity.canIdentifyOtherUsers(status: status("000001ffffffffff")))
        #expect(!ProgramIdentity.canIdentifyOtherUsers(status: status("0000000000000000")))
        #expect(!ProgramIdentity.canIdentifyOtherUsers(status: status("0000000000040000")))
        #expect(!ProgramIdentity.canIdentifyOtherUsers(status: "Name:\tx\n"))
        #expect(!ProgramIdentity.canIdentifyOtherUsers(status: nil))
    }

    static func error(_ text: String) -> String? { ConfigTests.error(text) }

    /// A rule naming an executable matches the file at that path, not a process that shows the
    /// path: one whose executable was replaced since it started, or one in a mount namespace of
    /// its own, where any user can put a file of theirs at the path a rule names.
    @Test func anExecutableIsTheFileNotItsPath() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("exe-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let tracker = dir.appendingPathComponent("tracker").path
        try FileManager.default.copyItem(atPath: "/bin/sleep", toPath: tracker)

        func identity(of process: Process) throws -> PeerIdentity {
            // Until the process has become the program (exec), its link names the one before.
            let deadline = ContinuousClock.now + .seconds(10)
            var id: PeerIdentity
            repeat {
                id = PeerIdentity.resolve(PeerCredentials(pid: process.processIdentifier, uid: getuid(), gid: getgid()))
            } while id.executable != tracker && ContinuousClock.now < deadline
            return id
        }
        func started(_ path: String, _ arguments: [String]) throws -> Process {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: path)
            p.arguments = arguments
            try p.run()
            return p
        }

        let running = try started(tracker, ["30"])
        // SIGKILL: the test runner's children inherit SIGTERM ignored.
        defer { kill(running.processIdentifier, SIGKILL); running.waitUntilExit() }
        let same = try identity(of: running)
        #expect(same.executable == tracker && same.executableVerified)

        // A package upgrade: the file at the path is a new one; the running process is the old.
        try FileManager.default.removeItem(atPath: tracker)
        try FileManager.default.copyItem(atPath: "/bin/sleep", toPath: tracker)
        let replaced = try identity(of: running)
        #expect(replaced.executable == tracker && !replaced.executableVerified)
        #expect(replaced.program == same.program, "its regions and queue stay its own")
        #expect(ProgramIdentity.whyNotFile(tracker, runBy: running.processIdentifier).hasPrefix("it is not the file at \(tracker) (replaced since it started"))
        #expect(ProgramIdentity.whyNotFile(tracker + "-gone", runBy: running.processIdentifier) == "\(tracker)-gone cannot be looked up (No such file or directory)")

        // Another mount namespace with a file of its own at a path the daemon sees another file at.
        let shadowed = dir.appendingPathComponent("shadowed")
        try FileManager.default.createDirectory(at: shadowed, withIntermediateDirectories: true)
        let impostor = shadowed.appendingPathComponent("tracker").path
        try FileManager.default.copyItem(atPath: "/bin/true", toPath: impostor)
        let unshare = try started("/usr/bin/unshare", ["-m", "--propagation", "private", "sh", "-c",
            "mount -t tmpfs none '\(shadowed.path)' && cp /bin/sleep '\(impostor)' && exec '\(impostor)' 30"])
        defer { kill(unshare.processIdentifier, SIGKILL); unshare.waitUntilExit() }
        let deadline = ContinuousClock.now + .seconds(10)
        var other = PeerIdentity.resolve(PeerCredentials(pid: unshare.processIdentifier, uid: getuid(), gid: getgid()))
        while other.executable != impostor && unshare.isRunning && ContinuousClock.now < deadline {
            other = PeerIdentity.resolve(PeerCredentials(pid: unshare.processIdentifier, uid: getuid(), gid: getgid()))
        }
        guard other.executable == impostor else {
            // No mount namespace here (a container without CAP_SYS_ADMIN): the check above stands.
            print("skipped the mount-namespace case: unshare -m could not run \(impostor) (\(other.executable ?? "?"))")
            return
        }
        #expect(!other.executableVerified)
        var policy = Policy()
        policy.ownerRule = false  // this test runs as root
        policy.rules = [PolicyRule(name: "tracker", executable: impostor, authorization: .always, accuracy: .precise)]
        #expect(policy.rule(for: other).authorization == .denied)
        guard case .failure(.notAuthorized(let why)) = Grant.decide(requested: .whenInUse, purpose: nil, rule: policy.rule(for: other)) else {
            Issue.record("granted"); return
        }
        #expect(why == "policy rule 'tracker+default' (tracker: executable \(impostor); default: everyone) denies location access")
    }

    /// A rule's executable that does not exist is taken (the program may be installed later),
    /// with a warning naming the line, the rule and the path: a typo matched no one, silently.
    @Test func aMissingExecutableIsTakenWithAWarning() throws {
        let missing = "/usr/bin/navti-\(UUID().uuidString.prefix(8))"
        let o = try ConfigTests.load("[policy.nav]\nuser = 0\nexecutable = \"\(missing)\"\nauthorization = \"always\"\n")
        #expect(o.policy.rules.map(\.executable) == [missing])
        #expect(o.warnings.map(\.description) == [
            "locationd.toml:3: 'policy.nav.executable' is \"\(missing)\", which does not exist: rule 'nav' matches no program until one is installed at that path; check the spelling (taken as written, for a program installed later)"])
        // In a directory that does not exist either (ENOTDIR for a file on the way: the same).
        #expect(try ConfigTests.load("[policy.nav]\nexecutable = \"/etc/hostname/navit\"\nauthorization = \"always\"\n").warnings.count == 1)
        #expect(try ConfigTests.load("[policy.nav]\nexecutable = \"/usr/bin/env\"\nauthorization = \"always\"\n").warnings.isEmpty)
    }

    @Test func everyBadPolicyHasItsMessage() {
        let cases: [(String, String)] = [
            ("[policy.nav]\nuser = 0\nauthorization = \"alway\"\n",
             "locationd.toml:3: unknown authorization 'alway'; expected denied, when-in-use or always"),
            ("[policy.nav]\nuser = 0\nauthorization = \"always\"\naccuracy = \"exact\"\n",
             "locationd.toml:4: unknown accuracy 'exact'; expected precise or approximate"),
            ("[policy.nav]\nuser = \"no-such-user-xyz\"\nauthorization = \"always\"\n",
             "locationd.toml:2: unknown user 'no-such-user-xyz' (the user database has none: getent passwd no-such-user-xyz); check the spelling, create the user first, or give the user as a number"),
            ("[policy.nav]\ngroup = \"no-such-group-xyz\"\nauthorization = \"always\"\n",
             "locationd.toml:2: unknown group 'no-such-group-xyz' (the user database has none: getent group no-such-group-xyz); check the spelling, create the group first, or give the group as a number"),
            ("[policy.nav]\nexecutable = \"navit\"\nauthorization = \"always\"\n",
             "locationd.toml:2: 'policy.nav.executable' is \"navit\"; expected an absolute path"),
            ("[policy.nav]\nexecutable = \"/usr/bin/../bin/navit\"\nauthorization = \"always\"\n",
             "locationd.toml:2: 'policy.nav.executable' is \"/usr/bin/../bin/navit\"; write the path without '.', '..', '//' or a trailing '/', as /proc/PID/exe shows it"),
            // A link (python3 → python3.11): /proc/PID/exe shows its target, so the link never matches.
            ("[policy.nav]\nexecutable = \"/usr/bin/python3\"\nauthorization = \"always\"\n",
             "locationd.toml:2: 'policy.nav.executable' is \"/usr/bin/python3\", which is \"\(URL(fileURLWithPath: "/usr/bin/python3").resolvingSymlinksInPath().path)\" once its links are resolved; /proc/PID/exe shows that path: write \"\(URL(fileURLWithPath: "/usr/bin/python3").resolvingSymlinksInPath().path)\""),
            // A directory is never /proc/PID/exe: the rule would match no one, silently.
            ("[policy.nav]\nexecutable = \"/usr\"\nauthorization = \"always\"\n",
             "locationd.toml:2: 'policy.nav.executable' is \"/usr\", a directory; name the program's file in it, as /proc/PID/exe shows it (e.g. \"/usr/bin/navit\")"),
            ("[policy.nav]\nexecutable = \"/\"\nauthorization = \"always\"\n",
             "locationd.toml:2: 'policy.nav.executable' is \"/\", a directory; name the program's file in it, as /proc/PID/exe shows it (e.g. \"/usr/bin/navit\")"),
            // A link to a directory (Debian's /bin → usr/bin) is a directory too, not a link to
            // write out (which the next run refused as a directory).
            ("[policy.nav]\nexecutable = \"/bin\"\nauthorization = \"always\"\n",
             "locationd.toml:2: 'policy.nav.executable' is \"/bin\", a directory; name the program's file in it, as /proc/PID/exe shows it (e.g. \"/usr/bin/navit\")"),
            ("[policy.nav]\nuser = 0\n",
             "locationd.toml:1: [policy.nav] has no authorization; expected denied, when-in-use or always"),
            ("\n[policy.nav]\nauthorization = \"always\"\n",
             "locationd.toml:2: [policy.nav] matches no one; give user, group and/or executable (or name it [policy.default])"),
            ("[policy.default]\nuser = 0\nauthorization = \"always\"\n",
             "locationd.toml:1: [policy.default] applies to everyone; it takes no user, group or executable"),
            ("[policy.nav]\nuser = 0\nauthorization = \"always\"\ncolour = 1\n",
             "locationd.toml:4: unknown key 'policy.nav.colour'; expected one of user, group, executable, authorization, accuracy, purposes, max_regions"),
            ("[policy.nav]\nuser = 0\nauthorization = \"always\"\npurposes = \"nav\"\n",
             "locationd.toml:4: 'policy.nav.purposes' must be an array of strings, not a string"),
            ("[policy.nav]\nuser = 0\nauthorization = \"always\"\nmax_regions = 2000000\n",
             "locationd.toml:4: 'policy.nav.max_regions' is 2000000; expected 0…1000000"),
            ("[policy.nav]\nuser = -1\nauthorization = \"always\"\n",
             "locationd.toml:2: 'policy.nav.user' is -1; expected a user id 0…4294967295"),
            ("[policy.nav]\nuser = 0\nauthorization = 2\n",
             "locationd.toml:3: 'policy.nav.authorization' must be a string, not an integer"),
            // A rule's key below the next header: named at its own line (6), with the rule it
            // belongs to, not as a rule without authorization at line 1.
            ("[policy.navit]\nuser = \"root\"\n\n[gpsd]\nport = 2947\nauthorization = \"always\"\n",
             "locationd.toml:6: unknown key 'gpsd.authorization'; expected one of host, port, device ('authorization' is a key of [policy.NAME] rules: move it into the [policy.NAME] rule it belongs to: a rule's keys come before the next table's header)"),
            ("[policy.a.b]\n", "locationd.toml:1: nested tables ([policy.a.…]) are not supported"),
            ("[policy.nav]\nuser = 0\nauthorization = \"always\"\n[policy.nav]\n",
             "locationd.toml:4: duplicate table [policy.nav] (first defined on line 1)"),
        ]
        for (text, message) in cases {
            #expect(Self.error(text) == message, "\(text)")
        }
    }

    /// The getent command an unknown name's message gives runs as written in a shell: the
    /// name is one word (quoted when a shell would split or expand it), never an option.
    @Test func theGetentCommandOfAnUnknownNameRunsAsWritten() throws {
        let marker = FileManager.default.temporaryDirectory.appendingPathComponent("quote-\(UUID().uuidString.prefix(8))").path
        let names = ["no such user", "o'brien-xyz", "x;touch \(marker)", "$(touch \(marker))", "`touch \(marker)`",
                     "a\\b*", "-x", "", "plain-xyz_1.2"]
        for name in names {
            let message = try #require(Self.error("[policy.nav]\nuser = \(TOMLValue.string(name))\nauthorization = \"always\"\n"))
            let start = try #require(message.range(of: "none: getent passwd ")?.upperBound, "\(message)")
            let end = try #require(message.range(of: "); check the spelling", options: .backwards)?.lowerBound, "\(message)")
            let words = String(message[start..<end])
            if name == "plain-xyz_1.2" { #expect(words == name, "a plain name is left as it is") }
            let shell = Process()
            shell.executableURL = URL(fileURLWithPath: "/bin/sh")
            shell.arguments = ["-c", "set -- \(words); printf '%s|' \"$@\""]
            let out = Pipe()
            shell.standardOutput = out
            try shell.run()
            let printed = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            shell.waitUntilExit()
            #expect(printed == (name.hasPrefix("-") ? "--|" : "") + name + "|", "\(message)")
        }
        #expect(!FileManager.default.fileExists(atPath: marker), "the shell ran part of a name")
    }

    @Test func rulesMatchInOrderThenOwnerThenDefault() throws {
        let o = try ConfigTests.load("""
            [policy.nav]
            user = "nobody"
            executable = "/usr/bin/navit"
            authorization = "always"
            accuracy = "precise"
            [policy.weather]
            group = 65534
            authorization = "when-in-use"
            accuracy = "approximate"
            purposes = ["radar"]
            max_regions = 0
            [policy.default]
            authorization = "denied"

            """)
        let nobody = UInt32(65534)
        var p = o.policy
        p.ownerUID = 0
        #expect(p.rule(for: PeerIdentity(pid: 1, uid: nobody, gid: nobody, executable: "/usr/bin/navit")).name == "nav")
        #expect(p.rule(for: PeerIdentity(pid: 1, uid: nobody, gid: nobody, executable: "/usr/bin/x")).name == "weather")
        // The path alone is not the program: one that may not be the file there gets the
        // narrower of the rule naming the path and the one it matches otherwise.
        let unverified = p.rule(for: PeerIdentity(pid: 1, uid: nobody, gid: nobody, executable: "/usr/bin/navit", executableVerified: false))
        #expect(unverified.name == "nav+weather" && unverified.authorization == .whenInUse && unverified.accuracy == .approximate
                && unverified.purposes == ["radar"] && unverified.maxRegions == 0)
        #expect(p.rule(for: PeerIdentity(pid: 1, uid: 1000, gid: 1000, executable: "/usr/bin/navit", executableVerified: false)).name == "default")
        var blocking = Policy()
        blocking.ownerUID = 0
        blocking.rules = [PolicyRule(name: "block-spy", executable: "/usr/bin/spy", authorization: .denied, accuracy: .approximate),
                          PolicyRule(name: "location", group: 900, authorization: .always, accuracy: .precise)]
        for verified in [true, false] {  // a rule denying an executable denies an upgraded, not yet restarted copy too
            #expect(blocking.rule(for: PeerIdentity(pid: 1, uid: 1000, gid: 900, executable: "/usr/bin/spy", executableVerified: verified)).authorization == .denied)
        }
        #expect(blocking.rule(for: PeerIdentity(pid: 1, uid: 1000, gid: 900, executable: "/usr/bin/other")).name == "location")
        // Rules are not ordered as a whole: each part is the narrower one (otherwise the purpose
        // key of an approximate when-in-use rule would give an unverified copy precise location,
        // where the rule after it allows always approximate).
        var partial = Policy()
        partial.ownerRule = false
        partial.rules = [PolicyRule(name: "nav", executable: "/usr/bin/navit", authorization: .whenInUse, accuracy: .approximate, purposes: ["navigation"]),
                         PolicyRule(name: "staff", group: 900, authorization: .always, accuracy: .approximate)]
        let copy = partial.rule(for: PeerIdentity(pid: 1, uid: 1000, gid: 900, executable: "/usr/bin/navit", executableVerified: false))
        #expect(copy.name == "nav+staff" && copy.authorization == .whenInUse && copy.accuracy == .approximate && copy.purposes.isEmpty)
        guard case .failure(.fullAccuracyDenied) = Grant.decide(requested: .whenInUse, purpose: "navigation", rule: copy) else {
            Issue.record("an unverified copy got precise location by the purpose key"); return
        }
        partial.rules = [PolicyRule(name: "coarse-app", executable: "/usr/bin/navit", authorization: .always, accuracy: .approximate, purposes: ["a", "b"]),
                         PolicyRule(name: "staff", group: 900, authorization: .whenInUse, accuracy: .precise, maxRegions: 5)]
        let other = partial.rule(for: PeerIdentity(pid: 1, uid: 1000, gid: 900, executable: "/usr/bin/navit", executableVerified: false))
        #expect(other.authorization == .whenInUse && other.accuracy == .approximate && other.purposes == ["a", "b"] && other.maxRegions == 5)
        #expect(p.rule(for: PeerIdentity(pid: 1, uid: 1000, gid: 1000, groups: [1000, nobody], executable: nil)).name == "weather")
        #expect(p.rule(for: PeerIdentity(pid: 1, uid: 1000, gid: 1000, executable: nil)).name == "default")
        #expect(p.rule(for: PeerIdentity(pid: 1, uid: 0, gid: 0, executable: nil)).authorization == .always)
        // Grants: capped by the rule; purpose keys; denial.
        let weather = p.rules[1]
        guard case .success(let g) = Grant.decide(requested: .always, purpose: nil, rule: weather) else { Issue.record(); return }
        #expect(g.authorization == .whenInUse && g.accuracy == .approximate)
        #expect(g.reason.contains("requested always, rule 'weather' allows at most when-in-use"))
        guard case .success(let r) = Grant.decide(requested: .whenInUse, purpose: "radar", rule: weather) else { Issue.record(); return }
        #expect(r.accuracy == .precise && r.temporaryPrecise)
        guard case .failure(.fullAccuracyDenied) = Grant.decide(requested: .whenInUse, purpose: "spy", rule: weather) else { Issue.record(); return }
        guard case .failure(.notAuthorized) = Grant.decide(requested: .whenInUse, purpose: nil, rule: p.defaultRule) else { Issue.record(); return }
        // --check-config prints the rules.
        #expect(ConfigSchema.render(o).contains("[policy.weather]\ngroup = 65534\nauthorization = \"when-in-use\"\naccuracy = \"approximate\"\npurposes = [\"radar\"]\nmax_regions = 0\n"))
    }
}

/// Sessions through the socket (in process; the test runs as root, so the built-in owner rule
/// applies unless the hub's policy says otherwise).
@Suite(.timeLimit(.minutes(5))) struct SessionServerTests {
    @Test func nothingWithoutASessionAndWhenInUseStopsAtSessionEnd() async throws {
        let h = try await ServerHarness.start()
        defer { h.stopIfRunning() }
        let client = try await LocationClient.connect(path: h.path)
        var messages = client.messages.makeAsyncIterator()
        await #expect(throws: ProtocolError.self) { try await client.subscribe() }
        do { try await client.subscribe() } catch let e as ProtocolError {
            #expect(e.code == .notAuthorized)
            #expect(e.message == "no active session; send session.start first")
        }
        do { _ = try await client.request { .regionsList(id: $0) } } catch let e as ProtocolError { #expect(e.code == .notAuthorized) }
        let grant = try await client.startSession()
        #expect(grant.state == .active && grant.authorization == .whenInUse && grant.accuracy == .precise)
        // when-in-use may not monitor regions.
        do { _ = try await client.request { .regionsAdd(id: $0, regions: []) } } catch let e as ProtocolError {
            #expect(e.code == .insufficientAuthorization)
        }
        try await client.subscribe()
        #expect(try await messages.expectNext() == .status(.disconnected, nil))
        h.hub.submit(.fix(testFix(0)))
        #expect(try await messages.expectNext() == .status(.fix, testFix(0).time))
        guard case .location = try await messages.expectNext() else { Issue.record("expected a location"); return }
        try await client.endSession()
        h.hub.submit(.fix(testFix(1)))
        await h.hub.processed()
        // Replies and events share one ordered stream: nothing arrived before this reply.
        let status = try await client.status()
        #expect(status.subscribers == 0)
        client.close()
        while let m = try await messages.next() { Issue.record("delivered after session end: \(m)") }
        await h.stop()
    }

    /// A slow reader holding a precise location when a reload makes its session approximate
    /// never receives it: after the `changed` event only approximate locations come.
    @Test func aDowngradeDropsTheHeldPreciseLocation() async throws {
        var policy = Policy()
        policy.ownerRule = false
        policy.rules = [PolicyRule(name: "me", user: getuid(), authorization: .always, accuracy: .precise)]
        let h = try await ServerHarness.start(onlyRule: policy.rules[0])
        defer { h.stopIfRunning() }
        let slow = RawSocket(path: h.path)
        slow.send("{\"type\":\"session.start\"}\n{\"type\":\"subscribe\",\"id\":\"slow\"}\n")  // and never read (for now)
        let deadline = ContinuousClock.now + .seconds(20)
        while try await h.hub.snapshot().subscriberCount < 1 && ContinuousClock.now < deadline {}
        var i = 0
        while try await !(h.server.connectionStats().first?.hasPendingLocation ?? false) && ContinuousClock.now < deadline {
            for _ in 0..<500 { h.hub.submit(.fix(testFix(i))); i += 1 }
            await h.hub.processed()
        }
        try #require(try await h.server.connectionStats().first?.hasPendingLocation == true, "no location was ever held")
        policy.rules[0].accuracy = .approximate
        try await h.server.applyPolicy(policy)
        slow.send("{\"type\":\"status\",\"id\":\"end\"}\n")
        var changed = false, preciseAfter = 0
        while let line = slow.readLine() {
            if line.contains(#""state":"changed""#) { changed = true }
            if changed, case .location(let f, _) = try ServerMessage.decode(line), f.horizontalAccuracy == 5 { preciseAfter += 1 }
            if line.contains(#""id":"end""#) { break }
        }
        #expect(changed, "the session change never came")
        #expect(preciseAfter == 0, "\(preciseAfter) precise location(s) after the downgrade")
        await h.stop()
    }

    /// The news of a new accuracy comes before anything produced under it: a reload's `changed`
    /// event before the re-subscription's status and approximate location, a `session.start`
    /// reply before the precise status. Both came after them, so a client read approximate
    /// locations while it still believed its session precise.
    @Test func theNewsOfANewAccuracyComesBeforeItsEvents() async throws {
        var policy = Policy()
        policy.ownerRule = false
        policy.rules = [PolicyRule(name: "me", user: getuid(), authorization: .always, accuracy: .precise, purposes: ["nav"])]
        let h = try await ServerHarness.start(onlyRule: policy.rules[0])
        defer { h.stopIfRunning() }
        let raw = RawSocket(path: h.path)
        /// The lines up to the reply with id `end`, which `raw` asks for after `request`.
        func linesAfter(_ request: String) -> [String] {
            raw.send(request + "{\"type\":\"status\",\"id\":\"end\"}\n")
            var lines: [String] = []
            while let line = raw.readLine(), !line.contains(#""id":"end""#) { lines.append(line) }
            return lines
        }
        _ = linesAfter("{\"type\":\"session.start\",\"authorization\":\"always\"}\n{\"type\":\"subscribe\"}\n")
        h.hub.submit(.fix(testFix(0)))
        await h.hub.processed()
        #expect(linesAfter("").contains { $0.contains(#""type":"location""#) })

        // A reload to approximate: `changed` first, then the subscription under it.
        policy.rules[0].accuracy = .approximate
        try await h.server.applyPolicy(policy)
        let downgrade = linesAfter("")
        #expect(downgrade.first?.contains(#""state":"changed""#) == true, "\(downgrade)")
        #expect(downgrade.contains { $0.contains(#""type":"status""#) }, "\(downgrade)")

        // A purpose upgrades it again: the reply first.
        let upgrade = linesAfter("{\"type\":\"session.start\",\"id\":\"up\",\"authorization\":\"always\",\"purpose\":\"nav\"}\n")
        #expect(upgrade.first?.contains(#""id":"up""#) == true && upgrade.first?.contains(#""accuracy":"precise""#) == true, "\(upgrade)")
        #expect(upgrade.contains { $0.contains(#""type":"status""#) }, "\(upgrade)")
        await h.stop()
    }

    /// `[regions] max_registered` above 10,000 is usable: by root and the daemon's user (the
    /// built-in owner rule adds no limit of its own) and by a program whose rule raises
    /// `max_regions`. Both were held at 10,000 by the rules' old ceiling, and root was told to
    /// raise `max_regions` in a rule it does not have.
    @Test func aRaisedMaxRegisteredIsUsable() async throws {
        let h = try await ServerHarness.start(regionLimits: RegionMonitor.Limits(maxRegistered: 10_500))
        defer { h.stopIfRunning() }
        var policy = Policy()
        policy.ownerUID = getuid()
        try await h.server.applyPolicy(policy)
        let client = try await LocationClient.connect(path: h.path)
        #expect(try await client.startSession(.always).rule?.hasPrefix("owner") == true)
        let home = Coordinate(latitude: 50, longitude: 8.5)
        for batch in 0..<21 {
            let regions = (0..<500).map { Region(id: "r\(batch * 500 + $0)", center: home, radius: 100) }
            _ = try await client.request { .regionsAdd(id: $0, regions: regions) }
        }
        do { _ = try await client.request { .regionsAdd(id: $0, regions: [Region(id: "over", center: home, radius: 100)]) }; Issue.record("max_registered ignored") } catch let e as ProtocolError {
            #expect(e.code == .tooManyRegions)
        }
        client.close()
        // A rule's max_regions goes up to max_registered's ceiling.
        let o = try ConfigTests.load("[policy.big]\nuser = 0\nauthorization = \"always\"\naccuracy = \"precise\"\nmax_regions = 1000000\n")
        #expect(o.policy.rules.first?.maxRegions == ConfigSchema.maxRegisteredLimit)
        await h.stop()
    }

    /// A status held for a slow reader when the accuracy changes is made under the old one: it
    /// must not follow the news. The loop can run a reload after the reader drained its socket
    /// but before the flush that scheduled (a race; here the held status is set in the same
    /// loop task as the reload, which is that window): the re-subscription's status flushed the
    /// held precise `noFix` after "approximate now".
    @Test func aHeldStatusDoesNotFollowTheNewsOfANewAccuracy() async throws {
        var policy = Policy()
        policy.ownerRule = false
        policy.rules = [PolicyRule(name: "me", user: getuid(), authorization: .always, accuracy: .precise)]
        let h = try await ServerHarness.start(onlyRule: policy.rules[0])
        defer { h.stopIfRunning() }
        let raw = RawSocket(path: h.path)
        raw.send("{\"type\":\"session.start\",\"authorization\":\"always\"}\n{\"type\":\"subscribe\"}\n{\"type\":\"status\",\"id\":\"ready\"}\n")
        while let line = raw.readLine(), !line.contains(#""id":"ready""#) {}
        h.hub.submit(.fix(testFix(0)))
        await h.hub.processed()
        policy.rules[0].accuracy = .approximate
        let approximate = policy
        let held = Timestamp(seconds: 1_552_384_820, nanoseconds: 750_000_000)
        try await h.hub.eventLoop.submit {
            for c in h.server.registry.all {
                c.pendingStatus = (.noFix, held)
                c.applyPolicy(approximate)
            }
        }.get()
        raw.send("{\"type\":\"status\",\"id\":\"end\"}\n")
        var changed = false, heldAfter = false
        while let line = raw.readLine(), !line.contains(#""id":"end""#) {
            if line.contains(#""state":"changed""#) { changed = true }
            if changed, line.contains("10:00:20.75Z") { heldAfter = true }
        }
        #expect(changed)
        #expect(!heldAfter, "the held precise status followed the news that the session is approximate")
        await h.stop()
    }

    /// Locations dropped for a slow reader are told by the next location's `"skipped":N`, also
    /// when only a held status went out first (as after an accuracy change dropped the held
    /// location) and when that next location is written at once: the count must not be zeroed by
    /// the status, nor the hub's line, which has none, go out as it is.
    @Test func theSkippedCountReachesTheNextLocation() async throws {
        let h = try await ServerHarness.start(onlyRule: PolicyRule(name: "me", user: getuid(), authorization: .always, accuracy: .precise))
        defer { h.stopIfRunning() }
        let raw = RawSocket(path: h.path)
        raw.send("{\"type\":\"session.start\",\"authorization\":\"always\"}\n{\"type\":\"subscribe\"}\n{\"type\":\"status\",\"id\":\"ready\"}\n")
        while let line = raw.readLine(), !line.contains(#""id":"ready""#) {}
        let encoder = EventEncoder()
        func line(_ event: Event) -> ByteBuffer {
            var bytes: [UInt8] = []
            encoder.append(event, to: &bytes)
            return ByteBuffer(bytes: bytes)
        }
        let status = Event.status(.fix, time: testFix(0).time), location = Event.location(testFix(1))
        let (statusLine, locationLine) = (line(status), line(location))
        try await h.hub.eventLoop.submit {
            for c in h.server.registry.all {
                c.skippedSincePending = 3
                c.pendingStatus = (.noFix, testFix(0).time)
                c.deliver(status, encoded: statusLine)
                c.deliver(location, encoded: locationLine)
            }
        }.get()
        raw.send("{\"type\":\"status\",\"id\":\"end\"}\n")
        var locations: [String] = []
        while let line = raw.readLine(), !line.contains(#""id":"end""#) {
            if line.contains(#""type":"location""#) { locations.append(line) }
        }
        #expect(locations.count == 1 && locations[0].contains(#""skipped":3"#), "\(locations)")
        await h.stop()
    }

    /// A server whose policy is `rule` alone (no owner rule), and a client connected to it.
    static func serving(_ rule: PolicyRule) async throws -> (ServerHarness, Policy, LocationClient) {
        let h = try await ServerHarness.start()
        var policy = Policy()
        policy.ownerRule = false
        policy.rules = [rule]
        do {
            try await h.server.applyPolicy(policy)
            return (h, policy, try await LocationClient.connect(path: h.path))
        } catch {
            h.stopIfRunning()
            throw error
        }
    }

    /// A program over a limit lowered since its regions were added: an empty add (how regions
    /// import learns the count) is answered, not refused as "3 registered + 0 would exceed";
    /// a real add is refused saying how many to remove.
    @Test func anEmptyAddIsAnsweredOverALoweredLimit() async throws {
        let (h, served, client) = try await Self.serving(PolicyRule(name: "me", user: getuid(), authorization: .always, accuracy: .precise, maxRegions: 4))
        defer { h.stopIfRunning() }
        var policy = served
        _ = try await client.startSession(.always)
        let home = Coordinate(latitude: 50, longitude: 8.5)
        let three = (0..<3).map { Region(id: "r\($0)", center: home, radius: 100) }
        _ = try await client.request { .regionsAdd(id: $0, regions: three) }
        do { _ = try await client.request { .regionsAdd(id: $0, regions: [Region(id: "a", center: home, radius: 100), Region(id: "b", center: home, radius: 100)]) }; Issue.record("limit ignored") } catch let e as ProtocolError {
            #expect(e.message == "3 registered + 2 would exceed this program's limit of 4 (policy rule 'me'): add at most 1, remove some first (regions.remove), or raise max_regions in the rule")
        }
        policy.rules[0].maxRegions = 2
        try await h.server.applyPolicy(policy)
        let empty = try await client.request { .regionsAdd(id: $0, regions: []) }
        guard case .regionsChanged(_, added: 0, removed: 0, registered: 3) = empty else { Issue.record("\(empty)"); return }
        do { _ = try await client.request { .regionsAdd(id: $0, regions: [Region(id: "a", center: home, radius: 100)]) }; Issue.record("limit ignored") } catch let e as ProtocolError {
            #expect(e.code == .tooManyRegions)
            #expect(e.message == "3 registered, at or over this program's limit of 2 (policy rule 'me'): remove 2 first (regions.remove), or raise max_regions in the rule")
        }
        client.close()
        await h.stop()
    }

    /// A reload whose rule no longer lists the session's purpose takes back the precise access
    /// the purpose gave, not the approximate access the rule still gives: `changed`, not
    /// `ended` (which would close the session and its subscription).
    @Test func aReloadWithdrawingAPurposeLeavesTheSessionApproximate() async throws {
        let (h, served, client) = try await Self.serving(PolicyRule(name: "nav", user: getuid(), authorization: .always, accuracy: .approximate, purposes: ["nav"]))
        defer { h.stopIfRunning() }
        var policy = served
        let granted = try await client.startSession(.always, purpose: "nav")
        #expect(granted.accuracy == .precise && granted.temporaryPrecise)
        _ = try await client.subscribe()
        var messages = client.messages.makeAsyncIterator()
        policy.rules[0].purposes = []
        try await h.server.applyPolicy(policy)
        var changed: SessionInfo?
        while changed == nil, let m = try await messages.next() {
            if case .session(let info) = m { changed = info }
        }
        #expect(changed?.state == .changed && changed?.accuracy == .approximate && changed?.temporaryPrecise == false
                && changed?.purpose == nil && changed?.authorization == .always, "\(String(describing: changed))")
        #expect(changed?.reason?.hasSuffix("purpose 'nav' is not allowed by rule 'nav' (it allows none), so precise access by it ended") == true,
                "\(String(describing: changed?.reason))")
        #expect(try await client.status().subscribers == 1)  // not closed with the session
        client.close()
        await h.stop()
    }

    @Test func deniedByPolicyAndApproximateRefusedRegions() async throws {
        let (h, served, client) = try await Self.serving(PolicyRule(name: "me-approx", user: getuid(), authorization: .always, accuracy: .approximate, purposes: ["nav"]))
        defer { h.stopIfRunning() }
        var policy = served
        let g = try await client.startSession(.always)
        #expect(g.accuracy == .approximate && g.rule == "me-approx")
        do { _ = try await client.request { .regionsAdd(id: $0, regions: []) } } catch let e as ProtocolError {
            #expect(e.code == .fullAccuracyDenied)
        }
        // The rule's region limit (precise for this session by purpose key, 1 region at most).
        policy.rules[0].maxRegions = 1
        try await h.server.applyPolicy(policy)
        try await client.startSession(.always, purpose: "nav")
        let home = Coordinate(latitude: 50, longitude: 8.5)
        _ = try await client.request { .regionsAdd(id: $0, regions: [Region(id: "a", center: home, radius: 100)]) }
        do { _ = try await client.request { .regionsAdd(id: $0, regions: [Region(id: "b", center: home, radius: 100)]) }; Issue.record("limit ignored") } catch let e as ProtocolError {
            #expect(e.code == .tooManyRegions)
            #expect(e.message == "1 registered, at or over this program's limit of 1 (policy rule 'me-approx'): remove 1 first (regions.remove), or raise max_regions in the rule")
        }
        _ = try await client.request { .regionsRemove(id: $0, ids: nil) }
        do { try await client.startSession(.always, purpose: "spy") } catch let e as ProtocolError { #expect(e.code == .fullAccuracyDenied) }
        let t = try await client.startSession(.always, purpose: "nav")
        #expect(t.accuracy == .precise && t.temporaryPrecise)
        // A reload that denies this program ends the open session, with the reason.
        var messages = client.messages.makeAsyncIterator()
        policy.rules = []
        try await h.server.applyPolicy(policy)
        // (The earlier limit change was announced first, as a `changed` event.)
        guard case .session(let limited) = try await messages.expectNext() else { Issue.record("no changed event"); return }
        #expect(limited.state == .changed)
        #expect(try await messages.expectNext() == .session(SessionInfo(state: .ended, reason: "policy rule 'default' (everyone) denies location access")))
        do { try await client.startSession() } catch let e as ProtocolError { #expect(e.code == .notAuthorized) }
        client.close()
        await h.stop()
    }
}

/// A bad policy stops the daemon from starting; `locationctl policy check` says why (and
/// prints the rules of a good file).
@Suite(.timeLimit(.minutes(5))) struct PolicyFileTests {
    @Test func daemonRefusesABadPolicyAndPolicyCheckExplains() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("policy-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let bad = dir.appendingPathComponent("policy.toml")
        try "[log]\nlevel = \"info\"\n\n[policy.nav]\nuser = 0\nauthorization = \"alway\"\n".write(to: bad, atomically: true, encoding: .utf8)
        let message = "\(bad.path):6: unknown authorization 'alway'; expected denied, when-in-use or always"

        let start = try ConfigTests.run(["--config", bad.path, "--socket", dir.appendingPathComponent("s.sock").path, "--database", "none"])
        #expect(start.status == 78)
        #expect(start.err.contains(message), "\(start.err)")

        let check = try LocationCtlReplayTests.run(["policy", "check", bad.path])
        #expect(check.status == 78)
        #expect(check.err.contains(message), "\(check.err)")

        let good = dir.appendingPathComponent("good.toml")
        try "[policy.nav]\nuser = 0\nauthorization = \"always\"\naccuracy = \"precise\"\n".write(to: good, atomically: true, encoding: .utf8)
        let ok = try LocationCtlReplayTests.run(["policy", "check", good.path])
        #expect(ok.status == 0, "\(ok.err)")
        #expect(ok.out.contains("[policy.nav]\nuser = 0\nauthorization = \"always\"\naccuracy = \"precise\""))
    }

    /// Without a file, `policy check` checks the one the daemon reads, as `--check-config` does:
    /// the advice to a path that does not exist, "leave out the path", holds for both.
    @Test func policyCheckWithoutAFileChecksTheDaemonsOwn() throws {
        let missing = FileManager.default.temporaryDirectory.appendingPathComponent("no-\(UUID().uuidString.prefix(8)).toml").path
        let named = try LocationCtlReplayTests.run(["policy", "check", missing])
        #expect(named.status == 78 && named.err.contains("leave out the path to check /etc/locationd/locationd.toml"), "\(named.err)")
        let check = try LocationCtlReplayTests.run(["policy", "check"])
        let daemon = try ConfigTests.run(["--check-config"])
        #expect(check.status != 64, "\(check.err)")
        #expect(check.status == daemon.status && check.out == daemon.out && check.err == daemon.err, "\(check) vs \(daemon)")
    }

    /// A rule naming an executable that does not exist is valid (exit 0), and the check warns on
    /// standard error, naming the file, line, rule and path; standard output is the rules.
    @Test func policyCheckWarnsOfAMissingExecutable() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("policy-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("locationd.toml")
        let missing = dir.appendingPathComponent("navti").path
        try "[policy.nav]\nexecutable = \"\(missing)\"\nauthorization = \"always\"\n".write(to: file, atomically: true, encoding: .utf8)
        let check = try LocationCtlReplayTests.run(["policy", "check", file.path])
        #expect(check.status == 0, "\(check.err)")
        #expect(check.err == "locationd: warning: \(file.path):2: 'policy.nav.executable' is \"\(missing)\", which does not exist: rule 'nav' matches no program until one is installed at that path; check the spelling (taken as written, for a program installed later)\n")
        #expect(check.out.contains("[policy.nav]\nexecutable = \"\(missing)\"\nauthorization = \"always\""), "\(check.out)")
    }
}
