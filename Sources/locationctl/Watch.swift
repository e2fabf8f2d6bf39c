import ArgumentParser
import LocationClient
import LocationCore
import LocationProtocol
import ShellWords
#if canImport(Glibc)
import Glibc
import Synchronization
#endif

/// `locationctl watch`: subscribe and print events as they arrive.
struct Watch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Subscribe to locationd and print its events as they arrive: status, location (or the --events asked for) and this program's region events.")

    @OptionGroup var socket: SocketFlag
    @OptionGroup var subscription: SubscriptionFlags
    @Flag(help: "Print the daemon's JSON lines (NDJSON) instead of human-readable lines.") var json = false
    @Option(help: "Exit after this many location events.") var count: Int?
    @Option(help: "The session to open first: when-in-use (delivery while connected) or always.") var session: String = "when-in-use"
    @Option(help: "A purpose key the policy lists, for precise fixes during this session.") var purpose: String?
    @Option(help: "Keep trying to connect for this many seconds (while the daemon starts).") var wait: Double = 0
    @Option(help: "Event types to subscribe to, comma-separated: location, visits, significant (status events always come).",
            transform: Watch.parseKinds)
    var events: Set<Replay.EventKind> = [.location]
    @Flag(help: "Acknowledge the queued background events once printed (one ack per 100, and at the backlog's end), so the daemon forgets them (--session always; docs/protocol.md, \"Background delivery\").")
    var ack = false

    /// replay's event names; an unknown one is named with the three watch subscribes to
    /// (status and region are refused by validate(), which says why).
    static func parseKinds(_ text: String) throws -> Set<Replay.EventKind> {
        try Replay.parseKinds(text, expected: "location, visits or significant")
    }

    var authorization: Authorization? {
        Authorization(rawValue: session).flatMap { $0 == .denied ? nil : $0 }
    }

    func validate() throws {
        // Before connecting, so a typo is named even when the daemon is not running.
        guard authorization != nil else {
            throw ValidationError("--session must be when-in-use or always, not '\(session)'")
        }
        // 0 or less would exit 0 after the subscribed reply, with no location printed.
        if let count, count < 1 {
            throw ValidationError("--count \(count) is out of range; expected at least 1 location event (leave it out to watch until interrupted)")
        }
        // A NaN or huge --wait would crash the deadline's conversion to milliseconds.
        guard (0...86_400).contains(wait) else {
            throw ValidationError("--wait \(numberText(wait)) is out of range; expected 0…86400 seconds")
        }
        // replay prints status and region events on request; a subscription always gets status
        // events, and region events come for the program's regions without asking.
        let extra = events.subtracting([.location, .visits, .significant])
        guard extra.isEmpty else {
            throw ValidationError("--events \(extra.map(\.rawValue).sorted().joined(separator: ",")): watch subscribes to location, visits or significant (status events always come; region events come for this program's regions)")
        }
    }

    func run() async throws {
        let client = try await connect(path: socket.path, wait: wait)
        defer { client.close() }
        var out = StandardOutput()
        var options = subscription.options
        options.events = Replay.subscribedKinds(events)
        // Nothing is delivered without a session (docs/protocol.md, "Sessions").
        let asked = "--session \(session)" + (purpose.map { " --purpose \($0)" } ?? "")
        let grant = try await startSession(client, authorization ?? .whenInUse, purpose: purpose, what: "the session (\(asked))")
        if json { out.line(ServerMessage.session(grant).line.dropLast().description) } else {
            out.line("session: \(grant.authorization?.rawValue ?? "?"), \(grant.accuracy?.rawValue ?? "?") (\(grant.reason ?? ""))")
        }
        try client.send(.subscribe(id: .number(1), options: options))
        let acknowledger = Acknowledger(client: client)
        defer { acknowledger.stop() }
        var locations = 0
        for try await message in client.messages {
            switch message {
            case .error(let e):
                throw RuntimeError("locationd refused: \(e.code.rawValue): \(e.message)")
            case .location:
                locations += 1
            default:
                break
            }
            if json {
                out.line(String(message.line.dropLast()))  // the protocol line, without its own newline
            } else if let text = Self.human(message) {
                out.line(text)
            }
            out.flush()
            // A reload that revokes the session ends the stream: nothing more will come.
            if case .session(let info) = message, info.state == .ended {
                throw RuntimeError("locationd ended the session" + (info.reason.map { ": \($0)" } ?? ""))
            }
            // Acknowledged only once written out: a crash before loses nothing.
            if ack { try acknowledger.printed(message) }
            if let count, locations >= count { return }
        }
        // The stream ended with no --count reached and no session ended: the daemon stopped or
        // dropped this client. A failure (exit 1), so that a script reading `watch --json` can
        // tell it from a watch that did what it was asked.
        out.flush()
        throw RuntimeError("locationd closed the connection")
    }

    static func human(_ message: ServerMessage) -> String? {
        switch message {
        case .location(let fix, let skipped):
            var s = ISO8601.string(fix.time)
            s += "  " + degrees(fix.coordinate.latitude, "N", "S") + " " + degrees(fix.coordinate.longitude, "E", "W")
            s += "  ±" + (fix.horizontalAccuracy.map { "\(Int($0.rounded())) m" } ?? "? m")
            if let alt = fix.altitudeMSL { s += "  alt \(Int(alt.rounded())) m" }
            if let v = fix.speed { s += "  \(DecimalText.fixed(v, 1)) m/s" }
            if let c = fix.course { s += "  \(Int(c.rounded()))°" }
            s += fix.mode == .threeD ? "  3d" : "  2d"
            if skipped > 0 { s += "  (\(skipped) skipped: slow reader)" }
            return s
        case .status(let state, _):
            return "status: \(state.rawValue)"
        case .visit(let v):
            var s = "visit \(v.kind.rawValue): arrived " + ISO8601.string(v.arrival)
            if let d = v.departure { s += ", departed " + ISO8601.string(d) }
            s += "  " + degrees(v.coordinate.latitude, "N", "S") + " " + degrees(v.coordinate.longitude, "E", "W")
            s += "  ±\(Int(v.horizontalAccuracy.rounded())) m"
            return s
        case .significant(let fix):
            return ISO8601.string(fix.time) + "  significant change  " + degrees(fix.coordinate.latitude, "N", "S")
                + " " + degrees(fix.coordinate.longitude, "E", "W")
        case .paused(let time):
            return ISO8601.string(time) + "  paused: the device is still"
        case .resumed(let time):
            return ISO8601.string(time) + "  resumed: the device moves"
        case .region(let e):
            return ISO8601.string(e.time) + "  region \(printableID(e.region)) \(e.kind.rawValue)" + (e.inferred ? " (inferred)" : "")
                + "  " + degrees(e.coordinate.latitude, "N", "S") + " " + degrees(e.coordinate.longitude, "E", "W")
        case .queued(let seq, let event):
            return human(event).map { "#\(seq)  " + $0 }
        case .overflow(let lost, let seq):
            return "#\(seq)  overflow: \(lost) queued event(s) up to here were dropped (queue_limit)"
        case .acked, .reloaded:
            return nil
        case .session(let info) where info.state == .changed:
            return "session changed: \(info.authorization?.rawValue ?? "?"), \(info.accuracy?.rawValue ?? "?")"
                + (info.reason.map { " (\($0))" } ?? "")
        case .subscribed(_, let o):
            var parts: [String] = []
            if o.distanceFilter > 0 { parts.append("distance filter \(DecimalText.fixed(o.distanceFilter, 1)) m") }
            if let a = o.desiredAccuracy { parts.append("accuracy ≤ \(DecimalText.fixed(a, 1)) m") }
            if o.minimumInterval > 0 { parts.append("every ≥ \(DecimalText.fixed(o.minimumInterval, 1)) s") }
            if o.raw { parts.append("raw") }
            if o.pausesWhenStationary { parts.append("pauses when stationary (\(o.activityType.rawValue))") }
            return "subscribed" + (parts.isEmpty ? "" : " (" + parts.joined(separator: ", ") + ")")
        default:
            return nil
        }
    }

    static func degrees(_ v: Double, _ pos: String, _ neg: String) -> String {
        DecimalText.fixed(abs(v), 6) + "°" + (v < 0 ? neg : pos)
    }
}

/// `locationctl status`: the daemon's state.
struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show locationd's source, fix state, subscribers, sessions, whether the receiver is watched, this program's identity and grant, and the connections (every one for root and the daemon's user; otherwise only this one).")

    @OptionGroup var socket: SocketFlag
    @Flag(help: "Print the daemon's JSON reply.") var json = false

    func run() async throws {
        let client = try await connect(path: socket.path, wait: 0)
        defer { client.close() }
        let reply = try await client.status()
        var out = StandardOutput()
        if json {
            out.line(String(ServerMessage.statusReply(reply).line.dropLast()))
        } else {
            out.line("locationd \(client.hello.version) (protocol \(client.hello.protocolVersion))")
            out.line("source:       \(reply.source)")
            out.line("state:        \(reply.state.rawValue)")
            out.line("last fix:     \(reply.lastFix.map(ISO8601.string) ?? "none")")
            out.line("subscribers:  \(reply.subscribers)")
            if let n = reply.sessions { out.line("sessions:     \(n)") }
            if let n = reply.backgroundMonitors { out.line("background:   \(n) program(s) monitored while away") }
            if let n = reply.queued { out.line("queued:       \(n) event(s) waiting for this program's ack") }
            if let n = reply.regions {
                out.line("regions:      \(n) registered by this program"
                    + (reply.regionsSuspended == true ? "; suspended by the policy (kept, not monitored)" : ""))
            }
            if let r = reply.receiver { out.line("receiver:     \(r)") }
            if let i = reply.identity { out.line("identity:     \(i)") }
            if let g = reply.grant { out.line("grant:        \(g)") }
            if let n = reply.connected {
                // Say why the table is short, so a missing program is not taken for a disconnected one.
                out.line("connections:  \(n)" + (reply.connectionsShown == .own
                    ? " (only this one listed: other programs are shown to root and the daemon's user)" : ""))
            }
            if let entries = reply.connections, !entries.isEmpty {
                out.line("")
                for row in Self.table(entries) { out.line(row) }
                if entries.contains(where: \.isSelf) { out.line("* this connection") }
            }
        }
        out.flush()
    }

    /// The connections as aligned columns: conn, pid, uid, program, rule, grant, subscribed.
    static func table(_ entries: [StatusReply.ConnectionEntry]) -> [String] {
        let header = ["conn", "pid", "uid", "program", "rule", "grant", "subscribed"]
        let rows = entries.map { e in
            ["\(e.connection)" + (e.isSelf ? "*" : ""), e.pid.map { "\($0)" } ?? "?", e.uid.map { "\($0)" } ?? "?",
             e.executable ?? "?", e.rule, grant(e.session), e.subscribed ? "yes" : "no"]
        }
        let widths = header.indices.map { i in ([header] + rows).map { $0[i].count }.max() ?? 0 }
        return ([header] + rows).map { row in
            row.indices.map { i in
                i == row.count - 1 ? row[i] : row[i] + String(repeating: " ", count: widths[i] - row[i].count + 2)
            }.joined()
        }
    }

    static func grant(_ g: StatusReply.SessionGrant?) -> String {
        guard let g else { return "no session" }
        let text = "\(g.authorization.rawValue) \(g.accuracy.rawValue)"
        switch (g.purpose, g.temporaryPrecise) {
        case (let p?, true): return text + " (temporary, purpose \(p))"
        case (let p?, false): return text + " (purpose \(p))"
        case (nil, _): return text
        }
    }
}

/// Starts a session; a refusal says which session was refused (`what`), then the daemon's
/// code and reason, alike for watch and the regions commands.
func startSession(_ client: LocationClient, _ authorization: Authorization, purpose: String? = nil, what: String) async throws -> SessionInfo {
    do {
        return try await client.startSession(authorization, purpose: purpose)
    } catch let e as ProtocolError {
        throw RuntimeError("locationd refused \(what): \(e.code.rawValue): \(e.message)")
    }
}

/// Connects, retrying for up to `wait` seconds; errors name the socket and what to do.
func connect(path: String, wait: Double, requestTimeout: Duration = .seconds(10)) async throws -> LocationClient {
    let deadline = ContinuousClock.now + .milliseconds(Int(wait * 1000))
    while true {
        do {
            return try await LocationClient.connect(path: path, requestTimeout: requestTimeout)
        } catch LocationClientError.system(_, errno: EACCES) {
            throw RuntimeError(permissionDenied(path))  // waiting does not change who may connect
        } catch {
            if ContinuousClock.now >= deadline {
                throw RuntimeError("cannot connect to locationd at \(path): \(error) (is locationd running? --socket or $LOCATIOND_SOCKET select another socket)")
            }
            try await Task.sleep(for: .milliseconds(100))  // polling for the daemon to come up, not synchronisation
        }
    }
}

/// EACCES on connect: the socket is mode 0660 (docs/systemd.md, "The location group"), so
/// `user` (this process's; nil when the user database has no entry for it) is not in its
/// group, or joined it after logging in.
func permissionDenied(_ path: String, user: String? = currentUserName()) -> String {
    // Without an entry the command names the login's $USER, for the shell to expand.
    let (name, word) = user.map { ($0, shellOperands($0)) } ?? ("$USER", "\"$USER\"")
    let denied = "cannot connect to locationd at \(path): permission denied"
    let see = "docs/systemd.md, \"The location group\""
    var st = stat()
    guard stat(path, &st) == 0 else {
        return "\(denied) (user \(name) cannot reach the socket: \(String(cString: strerror(errno)))); its directory must be searchable, "
            + "and the socket's group (location) must include the user: sudo usermod -aG location \(word), then log in again (\(see))"
    }
    guard st.st_gid != 0 else {
        // Not worth a membership of root: a daemon started by hand as root made the socket.
        return "\(denied): the socket's group is root, so only root may connect (locationd started by hand as root makes "
            + "its socket with its own group); run it from the units, whose socket is for group location (\(see))"
    }
    let group = getgrgid(st.st_gid).map { String(cString: $0.pointee.gr_name) } ?? "\(st.st_gid)"
    return "\(denied): only root and members of the socket's group '\(group)' may connect, and user \(name) is not one "
        + "in this login; add it with sudo usermod -aG \(shellWord(group)) \(word), then log in again (a login started before "
        + "keeps its old groups; \(see))"
}

/// The name of this process's user; nil when the user database has none.
func currentUserName() -> String? {
    getpwuid(getuid()).map { String(cString: $0.pointee.pw_name) }
}

/// Fixed-point text for human output.
enum DecimalText {
    static func fixed(_ v: Double, _ decimals: Int) -> String {
        var buf: [UInt8] = []
        DecimalFormat.appendFixed(v, decimals: decimals, to: &buf)
        return String(decoding: buf, as: UTF8.self)
    }
}

/// `watch --ack`: acknowledges what was printed without flooding the daemon (an `ack` per event of
/// a 600-event backlog would exceed the flood limit and get watch disconnected). One `ack` covers
/// every lower `seq`, so it sends one per 100 events, one when a message that is not a queued event
/// follows them (the backlog is over), and one 0.2 s after the last queued event otherwise.
/// Acknowledging again changes nothing, so an overlap is harmless.
final class Acknowledger: Sendable {
    private struct State {
        var printed: UInt64 = 0
        var sent: UInt64 = 0
        var timer: Task<Void, Never>?
    }
    private let client: LocationClient
    private let state = Mutex(State())

    init(client: LocationClient) { self.client = client }

    func printed(_ message: ServerMessage) throws {
        guard let seq = message.queueSequence else {
            try flush()
            return
        }
        let due = state.withLock { s -> Bool in
            s.printed = max(s.printed, seq)
            s.timer?.cancel()
            s.timer = nil
            return s.printed >= s.sent + 100
        }
        if due { try flush(); return }
        let task = Task { [self] in
            do { try await Task.sleep(for: .milliseconds(200)) } catch { return }
            try? flush()
        }
        state.withLock { $0.timer = task }
    }

    private func flush() throws {
        let seq: UInt64? = state.withLock { s in
            guard s.printed > s.sent else { return nil }
            s.sent = s.printed
            return s.printed
        }
        if let seq { try client.send(.ack(id: nil, seq: seq)) }
    }

    func stop() { state.withLock { $0.timer?.cancel() } }
}
