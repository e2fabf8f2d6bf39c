import Glibc
import LocationCore
import ShellWords
import TOMLConfig

/// Who is at the other end of a connection: `SO_PEERCRED` (pid, uid, gid) and `SO_PEERGROUPS`
/// (supplementary groups) at connect, the executable of that pid (`/proc/PID/exe`).
/// Persistent state (regions, the background queue) is keyed by `program`: uid + executable.
public struct PeerIdentity: Hashable, Sendable, CustomStringConvertible {
    public var pid: Int32
    public var uid: UInt32
    public var gid: UInt32
    /// Primary and supplementary groups.
    public var groups: [UInt32]
    /// `/proc/PID/exe`, or nil when unreadable (process gone, or not ours to read).
    public var executable: String?
    /// Whether `executable` is the file at that path as the daemon sees it (the same device and
    /// inode): only then may a policy rule naming that path match (`PolicyRule.matches`). The
    /// path is the process's own view of the filesystem: in a mount namespace of its own
    /// (`unshare -Urm`, no privilege needed) any user could put a file of theirs at the path a
    /// rule names and be granted that rule. False too for a process whose executable was
    /// replaced since it started (a package upgrade): nothing tells it from that trick.
    public var executableVerified: Bool

    /// A path was read but is not known to be the file the process runs: it decides no rule on
    /// its own (`Policy.rule(for:)`), and it speaks for its program only while no verified
    /// process of it is recorded (`Hub.speaksForItsProgram`).
    public var claimsUnverifiedExecutable: Bool { executable != nil && !executableVerified }

    public init(pid: Int32, uid: UInt32, gid: UInt32, groups: [UInt32]? = nil, executable: String?,
                executableVerified: Bool = true) {
        self.pid = pid; self.uid = uid; self.gid = gid
        self.groups = groups ?? [gid]
        self.executable = executable
        self.executableVerified = executableVerified
    }

    /// Reads what the kernel tells about `peer` now (at connect time): its groups as the socket
    /// recorded them, or when it did not, from /proc (`PeerCredentials.groups`).
    public static func resolve(_ peer: PeerCredentials) -> PeerIdentity {
        var groups: Set<UInt32> = [peer.gid]
        if let recorded = peer.groups {
            groups.formUnion(recorded)
        } else if let status = try? DaemonOptions.readFile("/proc/\(peer.pid)/status") {
            groups.formUnion(supplementaryGroups(status: status))
        }
        let executable = ProgramIdentity.executable(pid: peer.pid)
        return PeerIdentity(pid: peer.pid, uid: peer.uid, gid: peer.gid, groups: groups.sorted(), executable: executable,
                            executableVerified: executable.map { ProgramIdentity.isFile($0, runBy: peer.pid) } ?? false)
    }

    /// The `Groups:` line of a /proc/PID/status text. The kernel writes a tab after the colon
    /// and a space after each gid ("Groups:\t5 998 1000 "): split on both, or the first group —
    /// the lowest gid, often a system group such as `location` — is lost.
    static func supplementaryGroups(status: String) -> [UInt32] {
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("Groups:") }) else { return [] }
        return line.dropFirst(7).split(whereSeparator: { $0 == " " || $0 == "\t" }).compactMap { UInt32($0) }
    }

    /// What regions and queued events belong to: the same user running the same executable.
    public var program: ProgramID { ProgramID("uid=\(uid) exe=\(executable ?? "?")") }

    /// The identity a program that is away is presumed to have when none of its sessions was
    /// recorded: the uid and executable its `ProgramID` names, and that user's
    /// groups as the user database lists them now. Nil for a `ProgramID` that names no uid
    /// (a peer whose credentials could not be read). The executable is unverified: nothing
    /// shows the state was made by the file at that path (a process in a mount namespace of its
    /// own names any path), so a rule naming it must not decide alone (`Policy.rule(for:)`).
    public static func presumed(for program: ProgramID) -> PeerIdentity? {
        let text = program.rawValue
        guard let uid = uid(of: program), let space = text.firstIndex(of: " ") else { return nil }
        let exe = String(text[text.index(space, offsetBy: 5)...])
        let executable = exe == "?" ? nil : exe
        // getpwuid_r: the reload's config parsing may use the user database on another thread.
        var entry = passwd()
        var found: UnsafeMutablePointer<passwd>?
        var storage = [CChar](repeating: 0, count: 16 * 1024)
        guard getpwuid_r(uid, &entry, &storage, storage.count, &found) == 0, found != nil, let name = entry.pw_name else {
            return PeerIdentity(pid: 0, uid: uid, gid: gid_t.max, groups: [], executable: executable,
                                executableVerified: false)  // no such user: no groups
        }
        var count: Int32 = 64
        var groups = [gid_t](repeating: 0, count: Int(count))
        if getgrouplist(name, entry.pw_gid, &groups, &count) < 0 {
            groups = [gid_t](repeating: 0, count: Int(count))
            _ = getgrouplist(name, entry.pw_gid, &groups, &count)
        }
        return PeerIdentity(pid: 0, uid: uid, gid: entry.pw_gid,
                            groups: Set(groups.prefix(Int(max(count, 0)))).union([entry.pw_gid]).sorted(), executable: executable,
                            executableVerified: false)
    }

    /// The uid a `ProgramID` names (`uid=N exe=…`); nil for one that names none (`unknown`).
    public static func uid(of program: ProgramID) -> UInt32? {
        let text = program.rawValue
        guard text.hasPrefix("uid="), let space = text.firstIndex(of: " "), text[space...].hasPrefix(" exe=") else { return nil }
        return UInt32(text[text.index(text.startIndex, offsetBy: 4)..<space])
    }

    public var description: String { "pid=\(pid) uid=\(uid) gid=\(gid) exe=\(executable ?? "?")" }
}

/// One `[policy.NAME]` table: what it matches and what it allows.
public struct PolicyRule: Hashable, Sendable {
    public var name: String
    /// The line of its `[policy.NAME]` header (0 for built-in rules).
    public var line: Int
    public var user: UInt32?
    public var group: UInt32?
    public var executable: String?
    public var authorization: Authorization
    public var accuracy: Accuracy
    /// Purpose keys that let an approximate program ask for precise fixes for one session.
    public var purposes: [String]
    /// Regions the program may register (at most the daemon's own limit, `[regions]
    /// max_registered`: the lower of the two applies).
    public var maxRegions: Int
    /// What `max_regions` may be: up to the most `max_registered` can be, so that a rule can
    /// let a program use a raised daemon limit (capped at 10,000, a max_registered above it
    /// would do nothing for anyone, and the refusal would tell root to raise a rule it does not
    /// have).
    public static let maxRegionsRange = 0...ConfigSchema.maxRegisteredLimit

    public init(name: String, line: Int = 0, user: UInt32? = nil, group: UInt32? = nil, executable: String? = nil,
                authorization: Authorization, accuracy: Accuracy, purposes: [String] = [], maxRegions: Int = 10_000) {
        self.name = name; self.line = line; self.user = user; self.group = group; self.executable = executable
        self.authorization = authorization; self.accuracy = accuracy; self.purposes = purposes; self.maxRegions = maxRegions
    }

    public func matches(_ who: PeerIdentity) -> Bool {
        if let user, user != who.uid { return false }
        if let group, !who.groups.contains(group) { return false }
        if let executable, !(who.executableVerified && executable == who.executable) { return false }
        return true
    }

    /// What both `a` and `b` allow, each part on its own (rules are not ordered as a whole: one
    /// may allow `always` approximate, the other `when-in-use` precise): the lower authorization
    /// and accuracy, the purpose keys that make both precise, the fewer regions. Named after both.
    public static func narrowest(_ a: PolicyRule, _ b: PolicyRule) -> PolicyRule {
        if a == b { return a }
        func precise(_ r: PolicyRule, _ purpose: String) -> Bool { r.accuracy == .precise || r.purposes.contains(purpose) }
        let accuracy = min(a.accuracy, b.accuracy)
        let purposes = accuracy == .precise ? [] : Array(Set(a.purposes + b.purposes)).filter { precise(a, $0) && precise(b, $0) }.sorted()
        var rule = PolicyRule(name: a.name == b.name ? a.name : "\(a.name)+\(b.name)", line: a.line,
                              authorization: min(a.authorization, b.authorization), accuracy: accuracy,
                              purposes: purposes, maxRegions: min(a.maxRegions, b.maxRegions))
        rule.combinedSummary = "\(a.name): \(a.summary); \(b.name): \(b.summary)"
        return rule
    }

    /// Whether a program under this rule can be granted precise location (by its accuracy, or
    /// by a purpose key for a session).
    public var offersPrecise: Bool { accuracy == .precise || !purposes.isEmpty }

    // What a program under this rule keeps while it is away (docs/privacy.md, "Programs that
    // are away"): what it needed to start it.

    /// Its durable queue of background events: an `always` program's.
    public var keepsQueue: Bool { authorization == .always }

    /// Its registered regions are evaluated: they need an `always` session with precise location.
    public var monitorsRegions: Bool { authorization == .always && offersPrecise }

    /// Its background visit and significant-change detectors, running at `accuracy`.
    public func keepsBackground(at accuracy: Accuracy) -> Bool {
        authorization == .always && (accuracy == .approximate || offersPrecise)
    }

    /// Whom the rules `narrowest` combined match, each named (a combined rule matches no one
    /// itself: its own user, group and executable are empty).
    var combinedSummary: String?

    var summary: String {
        if let combinedSummary { return combinedSummary }
        var parts: [String] = []
        if let user { parts.append("user \(user)") }
        if let group { parts.append("group \(group)") }
        if let executable { parts.append("executable \(executable)") }
        return parts.isEmpty ? "everyone" : parts.joined(separator: ", ")
    }
}

/// The access policy (docs/privacy.md, "Policy"): `[policy.NAME]` rules in file order, the first
/// matching one wins; then the built-in `owner` rule (root and the daemon's own user: always,
/// precise); then `[policy.default]` (built in: denied).
public struct Policy: Hashable, Sendable {
    public var rules: [PolicyRule] = []
    public var defaultRule = PolicyRule(name: "default", authorization: .denied, accuracy: .approximate)
    /// The daemon's own uid (besides root) trusted by the built-in `owner` rule.
    public var ownerUID: UInt32 = getuid()
    /// Whether the built-in owner rule applies (tests turn it off; the config cannot).
    public var ownerRule = true

    public init() {}

    public var owner: PolicyRule {
        // Only the daemon's own limit (`[regions] max_registered`) bounds the administrator.
        PolicyRule(name: "owner (built in: root and the daemon's user)", authorization: .always, accuracy: .precise,
                   maxRegions: PolicyRule.maxRegionsRange.upperBound)
    }

    /// The rule that applies to `who`. A process showing a path it may not be the file at
    /// (`PeerIdentity.executableVerified`) gets what both the rule it matches as it is and the
    /// one it would match as that file allow (`PolicyRule.narrowest`): not what the rule naming
    /// the path allows beyond the other (anyone could claim it from a mount namespace of their
    /// own), nor what a rule after it allows beyond the one naming the path (a rule denying or
    /// coarsening an executable would not hold for it once upgraded and not yet restarted).
    public func rule(for who: PeerIdentity) -> PolicyRule {
        let rule = firstMatch(who)
        guard who.claimsUnverifiedExecutable else { return rule }
        var claimed = who
        claimed.executableVerified = true
        return PolicyRule.narrowest(firstMatch(claimed), rule)
    }

    private func firstMatch(_ who: PeerIdentity) -> PolicyRule {
        if let r = rules.first(where: { $0.matches(who) }) { return r }
        if isOwner(who) { return owner }
        return defaultRule
    }

    /// Whether `who` is a user the built-in owner rule trusts (root, the daemon's own user),
    /// whichever rule matched its program. Such a peer sees every connection in a status reply:
    /// root can read any process's /proc entry and the daemon's user is the daemon, so the list
    /// tells them nothing they could not learn (docs/privacy.md, "Status").
    public func isOwner(_ who: PeerIdentity?) -> Bool {
        guard let who else { return false }
        return isOwner(uid: who.uid)
    }

    /// Whether `uid` is a user the built-in owner rule trusts.
    public func isOwner(uid: UInt32) -> Bool { ownerRule && isAdministrator(uid: uid) }

    /// Whether `uid` is root or the daemon's own user: who may make the daemon's administrative
    /// requests (`reload`), whatever the rules grant for location.
    public func isAdministrator(uid: UInt32) -> Bool { uid == 0 || uid == ownerUID }

    public static let keys = ["user", "group", "executable", "authorization", "accuracy", "purposes", "max_regions"]

    /// Builds the policy from the `[policy.NAME]` tables of a document (others are ignored).
    /// `warn` is told what is taken but likely a mistake (`DaemonOptions.warnings`).
    public static func parse(_ document: TOMLDocument, file: String,
                             users: (String) throws(LookupFailure) -> UInt32? = lookUpUser,
                             groups: (String) throws(LookupFailure) -> UInt32? = lookUpGroup,
                             warn: (ConfigError) -> Void = { _ in }) throws(ConfigError) -> Policy {
        var policy = Policy()
        var byName: [String: PolicyRule] = [:]
        var order: [String] = []
        var seenKeys: Set<String> = []
        // A lookup the user database did not answer is thrown last: a mistake elsewhere in the
        // file is the one to report (78, not restarted), not a 75 that restarts until the
        // directory answers and only then names the mistake.
        var unanswered: ConfigError?
        for header in document.tables where header.name.hasPrefix("policy.") {
            let name = String(header.name.dropFirst(7))
            order.append(name)
            byName[name] = PolicyRule(name: name, line: header.line, authorization: .denied, accuracy: .approximate)
        }
        func fail(_ line: Int, _ message: String) -> ConfigError { ConfigError(file: file, line: line, message: message) }
        for entry in document.entries where entry.table.hasPrefix("policy.") {
            let name = String(entry.table.dropFirst(7))
            var rule = byName[name]!
            let key = "'\(entry.path)'"
            func string() throws(ConfigError) -> String {
                guard case .string(let s) = entry.value else { throw fail(entry.line, "\(key) must be a string, not \(entry.value.typeName)") }
                return s
            }
            func id(_ kind: String, _ lookUp: (String) throws(LookupFailure) -> UInt32?) throws(ConfigError) -> UInt32 {
                switch entry.value {
                case .integer(let i):
                    guard let n = UInt32(exactly: i) else { throw fail(entry.line, "\(key) is \(i); expected a \(kind) id 0…4294967295") }
                    return n
                case .string(let s):
                    // After one lookup went unanswered the others are not made: each could wait
                    // out the directory's timeout, and the parse fails with that one anyway.
                    guard unanswered == nil else { return UInt32.max }
                    let found: UInt32?
                    do { found = try lookUp(s) } catch {
                        var e = fail(entry.line, "cannot look up \(kind) '\(s)': the user database did not answer (\(error.reason)); check its service (LDAP, sssd), or give the \(kind) as a number")
                        e.temporary = true
                        if unanswered == nil { unanswered = e }
                        return UInt32.max  // not used: the parse fails with `unanswered`
                    }
                    guard let n = found else {
                        let database = kind == "user" ? "passwd" : "group"
                        let command = "getent \(database) \(shellOperands(s))"
                        throw fail(entry.line, "unknown \(kind) '\(s)' (the user database has none: \(command)); check the spelling, create the \(kind) first, or give the \(kind) as a number")
                    }
                    return n
                default:
                    throw fail(entry.line, "\(key) must be a \(kind) name or number, not \(entry.value.typeName)")
                }
            }
            switch entry.key {
            case "user": rule.user = try id("user", users)
            case "group": rule.group = try id("group", groups)
            case "executable":
                let s = try string()
                guard s.hasPrefix("/") else { throw fail(entry.line, "\(key) is \(TOMLValue.string(s)); expected an absolute path") }
                // Compared with readlink /proc/PID/exe, which is always the resolved path: any
                // other spelling of it could never match.
                let parts = s.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
                if s.count > 1 && (parts.contains { $0.isEmpty || $0 == "." || $0 == ".." }) {
                    throw fail(entry.line, "\(key) is \(TOMLValue.string(s)); write the path without '.', '..', '//' or a trailing '/', as /proc/PID/exe shows it")
                }
                // /proc/PID/exe is never a directory: a rule naming one ("/usr/bin", "/") would
                // match no one, silently. Checked before the links: a link to one ("/bin") would
                // be told to write the directory it resolves to, refused next. A path that does
                // not exist yet is taken (installed later), with a warning: a typo matches no one.
                var info = stat()
                let found = stat(s, &info) == 0
                let missing = !found && (errno == ENOENT || errno == ENOTDIR)
                if found, info.st_mode & S_IFMT == S_IFDIR {
                    throw fail(entry.line, "\(key) is \(TOMLValue.string(s)), a directory; name the program's file in it, as /proc/PID/exe shows it (e.g. \"/usr/bin/navit\")")
                }
                if missing {
                    warn(fail(entry.line, "\(key) is \(TOMLValue.string(s)), which does not exist: rule '\(name)' matches no program until one is installed at that path; check the spelling (taken as written, for a program installed later)"))
                }
                if let resolved = realpath(s, nil) {
                    defer { free(resolved) }
                    let real = String(cString: resolved)
                    if real != s {
                        throw fail(entry.line, "\(key) is \(TOMLValue.string(s)), which is \(TOMLValue.string(real)) once its links are resolved; /proc/PID/exe shows that path: write \(TOMLValue.string(real))")
                    }
                }
                rule.executable = s
            case "authorization":
                let s = try string()
                guard let a = Authorization(rawValue: s) else {
                    throw fail(entry.line, "unknown authorization '\(s)'; expected \(Authorization.expected)")
                }
                rule.authorization = a
            case "accuracy":
                let s = try string()
                guard let a = Accuracy(rawValue: s) else { throw fail(entry.line, "unknown accuracy '\(s)'; expected \(Accuracy.expected)") }
                rule.accuracy = a
            case "purposes":
                guard case .array(let items) = entry.value else { throw fail(entry.line, "\(key) must be an array of strings, not \(entry.value.typeName)") }
                var keys: [String] = []
                for item in items {
                    guard case .string(let s) = item, !s.isEmpty else { throw fail(entry.line, "\(key) must be an array of non-empty strings") }
                    keys.append(s)
                }
                rule.purposes = keys
            case "max_regions":
                guard case .integer(let i) = entry.value else { throw fail(entry.line, "\(key) must be an integer, not \(entry.value.typeName)") }
                let range = PolicyRule.maxRegionsRange
                guard let n = Int(exactly: i), range.contains(n) else { throw fail(entry.line, "\(key) is \(i); expected \(range.lowerBound)…\(range.upperBound)") }
                rule.maxRegions = n
            default:
                throw fail(entry.line, "unknown key \(key); expected one of \(keys.joined(separator: ", "))")
            }
            seenKeys.insert(entry.path)
            byName[name] = rule
        }
        for name in order {
            let rule = byName[name]!
            if !seenKeys.contains("policy.\(name).authorization") {
                throw fail(rule.line, "[policy.\(name)] has no authorization; expected \(Authorization.expected)")
            }
            if name == "default" {
                if rule.user != nil || rule.group != nil || rule.executable != nil {
                    throw fail(rule.line, "[policy.default] applies to everyone; it takes no user, group or executable")
                }
                policy.defaultRule = rule
            } else {
                if rule.user == nil && rule.group == nil && rule.executable == nil {
                    throw fail(rule.line, "[policy.\(name)] matches no one; give user, group and/or executable (or name it [policy.default])")
                }
                policy.rules.append(rule)
            }
        }
        if let unanswered { throw unanswered }
        return policy
    }

    /// The user database did not answer (LDAP or sssd unreachable, a lookup that failed): not
    /// the same as a name it does not know, which is final.
    public struct LookupFailure: Error, Equatable {
        public var reason: String
        public init(reason: String) { self.reason = reason }
    }

    /// A user's uid, nil when the user database has no such user. `getpwnam_r`, not `getpwnam`:
    /// the latter says nil for a failed lookup too, which would make a directory service down at
    /// boot an unknown user, a config error systemd does not restart.
    public static func lookUpUser(_ name: String) throws(LookupFailure) -> UInt32? {
        if let n = UInt32(name) { return n }
        var entry = passwd()
        return try lookUp { buffer, size, result in
            var found: UnsafeMutablePointer<passwd>?
            let code = getpwnam_r(name, &entry, buffer, size, &found)
            result = found?.pointee.pw_uid
            return code
        }
    }

    public static func lookUpGroup(_ name: String) throws(LookupFailure) -> UInt32? {
        if let n = UInt32(name) { return n }
        var entry = group()
        return try lookUp { buffer, size, result in
            var found: UnsafeMutablePointer<group>?
            let code = getgrnam_r(name, &entry, buffer, size, &found)
            result = found?.pointee.gr_gid
            return code
        }
    }

    /// Runs a `get…nam_r` call with a buffer that grows while it is too small. "Not found" is
    /// nil: glibc's 0 result without an entry. Every other code is a failed lookup, ENOENT too:
    /// getpwnam_r(3) lists ENOENT, ESRCH, EBADF and EPERM as "not found" on other systems, but
    /// glibc returns 0 for that, and an error code only when a service did not answer — with the
    /// code the service set, ENOENT for nss-pam-ldapd whose nslcd is not running (taken for an
    /// unknown user, that would be 78 for good). The buffer grows past 1 MiB (a group of many
    /// members needs more; glibc's own getgrnam grows as far as it must): only a buffer beyond
    /// 32 MiB gives up (a group of some million members; the start then exits 75).
    static func lookUp(_ call: (UnsafeMutablePointer<CChar>, Int, inout UInt32?) -> Int32) throws(LookupFailure) -> UInt32? {
        var size = 4096
        while true {
            var result: UInt32?
            let code = withUnsafeTemporaryAllocation(of: CChar.self, capacity: size) { call($0.baseAddress!, size, &result) }
            if code == ERANGE && size < 1 << 25 { size = min(size * 4, 1 << 25); continue }
            if let result { return result }
            if code == 0 { return nil }
            throw LookupFailure(reason: String(cString: strerror(code)))
        }
    }
}

/// What a session was granted, and why (the `session` reply).
public struct Grant: Hashable, Sendable {
    public var authorization: Authorization
    public var accuracy: Accuracy
    /// The rule it came from.
    public var rule: String
    public var reason: String
    /// Precise fixes for this session only, by an allowed purpose key.
    public var temporaryPrecise: Bool
    public var maxRegions: Int

    /// Decides a `session.start`: the requested authorization capped by the rule; `nil` reason
    /// in the result's error when the rule denies everything.
    public static func decide(requested: Authorization, purpose: String?, rule: PolicyRule) -> Result<Grant, GrantError> {
        if rule.authorization == .denied || requested == .denied {
            return .failure(.notAuthorized("policy rule '\(rule.name)' (\(rule.summary)) denies location access"))
        }
        var reasons: [String] = []
        let authorization = min(requested, rule.authorization)
        if authorization < requested {
            reasons.append("requested \(requested.rawValue), rule '\(rule.name)' allows at most \(rule.authorization.rawValue)")
        } else {
            reasons.append("rule '\(rule.name)' allows \(rule.authorization.rawValue)")
        }
        var accuracy = rule.accuracy
        var temporary = false
        if let purpose {
            if rule.accuracy == .precise {
                reasons.append("precise already")
            } else if rule.purposes.contains(purpose) {
                accuracy = .precise
                temporary = true
                reasons.append("purpose '\(purpose)' allows precise for this session")
            } else {
                return .failure(.fullAccuracyDenied("purpose '\(purpose)' is not allowed by rule '\(rule.name)'" +
                    (rule.purposes.isEmpty ? " (it allows none)" : "; allowed: \(rule.purposes.joined(separator: ", "))")))
            }
        } else {
            reasons.append(rule.accuracy == .precise ? "precise" : "approximate")
        }
        return .success(Grant(authorization: authorization, accuracy: accuracy, rule: rule.name,
                              reason: reasons.joined(separator: "; "), temporaryPrecise: temporary, maxRegions: rule.maxRegions))
    }
}

public enum GrantError: Error, Hashable, Sendable {
    case notAuthorized(String)
    case fullAccuracyDenied(String)
}
