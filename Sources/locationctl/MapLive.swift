import Dispatch
import LocationClient
import LocationCore
import LocationProtocol
#if canImport(Glibc)
import Glibc
#endif

/// `locationctl map --live`: what the running daemon holds for this program (uid + executable,
/// as for any client; docs/places.md, "Map"): its regions with their states (they need an
/// `always` session), its places and recent visits, and — with `--for SECONDS` — the fixes
/// and visits one subscription is sent meanwhile.
enum MapLive {
    static func run(socket: String, purpose: String?, seconds: Double) async throws -> MapTrip {
        var trip = MapTrip()
        let watcher = seconds > 0 ? try await watch(socket: socket, purpose: purpose, seconds: seconds, into: &trip) : nil
        defer { watcher?.close() }
        // After the watch, so the places and recent visits count the visits it saw.
        let client = try await connect(path: socket, wait: 0)
        defer { client.close() }
        let grant = try await startSession(client, .always, purpose: purpose, what: "a session")
        do {
            if grant.authorization == .always {
                for record in try await client.regions() {
                    trip.regions.append(record.region)
                    switch record.state {
                    case .inside: trip.regionStates[record.region.id] = true
                    case .outside: trip.regionStates[record.region.id] = false
                    case .unknown: break
                    }
                }
            } else {
                note("no regions: they need an always session, and the policy grants \(grant.authorization?.rawValue ?? "none")")
            }
            trip.places = try await client.places()
            // The watched visits are the newest of the stored ones (a precise session's), or
            // besides them (an approximate one's cells): each visit once, as the daemon keeps them.
            let stored = try await client.recentVisits()
            var visits = VisitHistory(limit: stored.count + trip.visits.count, visits: stored)
            for v in trip.visits { visits.record(v) }
            trip.visits = visits.visits
        } catch let e as ProtocolError {
            throw RuntimeError("locationd refused: \(e.code.rawValue): \(e.message)")
        }
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        trip.madeAt = Timestamp(nanoseconds: Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec))
        return trip
    }

    /// Subscribes (locations and visits, a when-in-use session: nothing goes on in the
    /// background after it) for `seconds`, or until SIGINT or SIGTERM, or the daemon closes
    /// the connection. Each visit is told on standard error as it comes. The connection stays
    /// open until the map's requests are answered (a daemon replaying a log stops when its
    /// last subscriber leaves after the end).
    static func watch(socket: String, purpose: String?, seconds: Double, into trip: inout MapTrip) async throws -> LocationClient {
        let client = try await connect(path: socket, wait: 0)
        do {
            _ = try await startSession(client, .whenInUse, purpose: purpose, what: "a session")
            try client.send(.subscribe(id: .number(1), options: SubscriptionOptions(events: [.location, .visits])))
        } catch {
            client.close()
            throw error
        }
        let collector = Task { () throws -> MapTrip in
            var part = MapTrip()
            // Ends when the task is cancelled (the time is up, or a signal) or the stream ends.
            for try await message in client.messages {
                switch message {
                case .error(let e):
                    throw RuntimeError("locationd refused: \(e.code.rawValue): \(e.message)")
                case .location(let fix, _):
                    part.take(.location(fix))
                case .visit(let v):
                    part.take(.visit(v))
                    note("visit \(v.kind.rawValue): arrived \(ISO8601.string(v.arrival))" + (v.place.map { ", place p\($0)" } ?? ""))
                default:
                    break
                }
            }
            return part
        }
        let timer = Task {
            try await Task.sleep(for: .milliseconds(Int(seconds * 1000)))
            collector.cancel()
        }
        var interrupts: [any DispatchSourceSignal] = []
        for sig in [SIGINT, SIGTERM] {
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            source.setEventHandler { collector.cancel() }
            source.resume()
            interrupts.append(source)
        }
        defer {
            timer.cancel()
            for source in interrupts { source.cancel() }
            signal(SIGINT, SIG_DFL); signal(SIGTERM, SIG_DFL)
        }
        note("watching for \(numberText(seconds)) s (Ctrl-C to stop and write the map)")
        do {
            trip = try await collector.value
        } catch {
            client.close()
            throw error
        }
        return client
    }

    static func note(_ text: String) {
        var err = StandardOutput(fd: STDERR_FILENO)
        err.line("locationctl map: " + text)
        err.flush()
    }
}
