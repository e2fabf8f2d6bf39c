import Glibc
import LocationCore
import LocationProtocol

/// The executable half of a program's identity (`PeerIdentity.program`).
enum ProgramIdentity {
    static func executable(pid: Int32) -> String? {
        var buffer = [CChar](repeating: 0, count: 4097)
        let n = readlink("/proc/\(pid)/exe", &buffer, 4096)
        guard n > 0 else { return nil }
        return path(ofLink: String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self))
    }

    /// Whether `pid` runs the file at `path` in the system's view of the filesystem: stat of the
    /// `/proc/PID/exe` link reaches the file the process runs, wherever it was mounted.
    static func isFile(_ path: String, runBy pid: Int32) -> Bool {
        var running = stat(), named = stat()
        guard stat("/proc/\(pid)/exe", &running) == 0, stat(systemRoot + path, &named) == 0 else { return false }
        return running.st_dev == named.st_dev && running.st_ino == named.st_ino
    }

    /// Why `isFile(path, runBy: pid)` is false, for the log.
    static func whyNotFile(_ path: String, runBy pid: Int32) -> String {
        var st = stat()
        if stat(systemRoot + path, &st) != 0 {
            let e = errno
            return e == EACCES
                ? "locationd may not look up \(path) (\(String(cString: strerror(e))): a directory on the way is closed to its user; name the program by user or group instead, or open the directory to others: chmod o+x)"
                : "\(path) cannot be looked up (\(String(cString: strerror(e))))"
        }
        return "it is not the file at \(path) (replaced since it started, or run in a mount namespace of its own; restart it after an upgrade)"
    }

    /// Where a rule's path is looked up: under PID 1's root, the system's view, which the shipped
    /// unit's `ProtectHome=` and `PrivateTmp=` do not change (in the daemon's own, a program under
    /// /home could never match); the daemon's own view when /proc/1/root is closed to it (no
    /// `CAP_SYS_PTRACE`, or an init it may not trace).
    static let systemRoot: String = {
        var st = stat()
        return stat("/proc/1/root/", &st) == 0 ? "/proc/1/root" : ""
    }()

    /// The kernel marks the link of a process whose executable was replaced since it started
    /// (a package upgrade) with " (deleted)": the program is still the one of that path, and its
    /// regions and queue must not change with the upgrade (a rule naming the path only narrows
    /// what it gets until it restarts: `PeerIdentity.executableVerified`).
    static func path(ofLink link: String) -> String {
        link.hasSuffix(" (deleted)") ? String(link.dropLast(10)) : link
    }

    /// `CAP_SYS_PTRACE`: reading another user's `/proc/PID/exe` needs it (the kernel's
    /// ptrace-read check), and so does seeing that process at all under `ProtectProc=invisible`.
    static let sysPtrace = 19

    /// Whether this process may read the executables of other users' processes: its effective
    /// capabilities (`CapEff` in /proc/self/status) include `CAP_SYS_PTRACE`. Root without it
    /// (an empty bounding set) may not either.
    static func canIdentifyOtherUsers(status: String? = try? DaemonOptions.readFile("/proc/self/status")) -> Bool {
        // On the bytes: it runs once at start, and String's splitting and trimming would make
        // pages of code resident that nothing else uses (idle RSS, docs/benchmarks.md).
        guard let status else { return false }
        let bytes = Array(status.utf8), key = Array("\nCapEff:".utf8)
        guard var i = (0...max(0, bytes.count - key.count)).first(where: { bytes[$0..<min($0 + key.count, bytes.count)].elementsEqual(key) })
        else { return false }
        i += key.count
        while i < bytes.count, bytes[i] == 0x20 || bytes[i] == 0x09 { i += 1 }
        var mask: UInt64 = 0, digits = 0
        while i < bytes.count, let d = Self.hexValue(bytes[i]), digits < 16 {
            mask = mask << 4 | UInt64(d)
            digits += 1
            i += 1
        }
        return digits > 0 && mask & (1 << sysPtrace) != 0
    }

    private static func hexValue(_ b: UInt8) -> UInt8? {
        switch b {
        case 0x30...0x39: b - 0x30
        case 0x61...0x66: b - 0x61 + 10
        case 0x41...0x46: b - 0x41 + 10
        default: nil
        }
    }

    /// What the daemon logs at start when it cannot (docs/systemd.md, "Identifying programs").
    static let cannotIdentifyWarning = "cannot identify other users' programs: reading another user's /proc/PID/exe needs CAP_SYS_PTRACE, which locationd does not have; their executables read as '?', so policy rules naming an executable do not match them and each user's programs share one identity (uid=N exe=?) for regions and queued events. Grant it: AmbientCapabilities=CAP_SYS_PTRACE and CapabilityBoundingSet=CAP_SYS_PTRACE in the unit (the shipped unit does)"
}

extension Connection {
    static func protocolError(_ e: RegionError, id: RequestID?) -> ProtocolError {
        let code: ErrorCode = switch e.code {
        case .invalidRegion: .invalidRegion
        case .duplicateRegion: .duplicateRegion
        case .tooManyRegions: .tooManyRegions
        case .unknownRegion: .unknownRegion
        case .notStored: .storeFailed
        }
        return ProtocolError(code, e.message, id: id)
    }

    func handleRegions(_ request: Request) {
        do throws(RegionError) {
            switch request {
            case .regionsAdd(let rid, let regions):
                // The policy's region limit for this program (docs/privacy.md).
                let limit = session?.grant.maxRegions ?? 0
                let current = hub.registeredRegions(of: program)
                // An empty add registers nothing (regions import sends one to learn the count), so
                // a program over a limit lowered since its regions were added is not refused it.
                if !regions.isEmpty, current + regions.count > limit {
                    let ruleName = session?.grant.rule ?? rule.name
                    if current >= limit {
                        throw RegionError(.tooManyRegions, "\(current) registered, at or over this program's limit of \(limit) (policy rule '\(ruleName)'): remove \(current - limit + regions.count) first (regions.remove), or raise max_regions in the rule")
                    }
                    throw RegionError(.tooManyRegions, "\(current) registered + \(regions.count) would exceed this program's limit of \(limit) (policy rule '\(ruleName)'): add at most \(limit - current), remove some first (regions.remove), or raise max_regions in the rule")
                }
                if !regions.isEmpty, let uid = peer?.uid, !hub.policy.isOwner(uid: uid) {
                    let limit = configuration.maxRegionsPerUser
                    let mine = hub.registeredRegions(ofUser: uid)
                    if mine + regions.count > limit {
                        throw RegionError(.tooManyRegions, "uid \(uid)'s programs have \(mine) regions registered; \(regions.count) more would exceed the most one user may register ([regions] max_registered_per_user = \(limit)): remove some first (regions.remove, in any of the user's programs), or raise max_registered_per_user")
                    }
                }
                let registered: Int
                do {
                    registered = try hub.addRegions(regions, for: program)
                } catch where error.code == .tooManyRegions {
                    // The core knows the limit but not where it is set; the daemon does.
                    throw RegionError(.tooManyRegions, "\(error.message) ([regions] max_registered in locationd.toml): remove some first (regions.remove), or raise max_registered")
                }
                send(.regionsChanged(id: rid, added: regions.count, removed: 0, registered: registered), flush: false)
            case .regionsRemove(let rid, let ids):
                let r = try hub.removeRegions(ids, for: program)
                send(.regionsChanged(id: rid, added: 0, removed: r.removed, registered: r.registered), flush: false)
            case .regionsList(let rid, let offset):
                try hub.checkRestored(program)  // not an empty list: the regions are there, unloaded
                let page = RegionCodec.page(hub.regionRecords(of: program), from: offset, id: rid)
                send(.regions(id: rid, regions: Array(page.records), next: page.next), flush: false)
            case .regionsState(let rid, let ids, let offset):
                try hub.checkRestored(program)
                var records = hub.regionRecords(of: program)
                if let ids {
                    let byID = Dictionary(records.map { ($0.region.id, $0) }, uniquingKeysWith: { a, _ in a })
                    records = []
                    for id in ids {
                        guard let r = byID[id] else { throw RegionError(.unknownRegion, "region \(id) is not registered") }
                        records.append(r)
                    }
                }
                let page = RegionCodec.page(records, from: offset, id: rid)
                send(.regions(id: rid, regions: Array(page.records), next: page.next), flush: false)
            default:
                break
            }
        } catch {
            send(.error(Self.protocolError(error, id: request.id)), flush: false)
        }
    }
}
