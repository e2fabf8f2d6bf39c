import Glibc
import LocationClient
import LocationCore
import LocationProtocol
import Logging
import OwnTracks

/// The bridge's one loop: events from locationd become OwnTracks messages, published at QoS 1
/// through `DeliveryLedger`'s bounded outbox; the broker's PUBACKs acknowledge locationd's
/// sequence numbers; commands on `BASE/cmd` act on the bridge's regions (docs/mqtt.md).
/// Everything runs on this one task: the MQTT thread and the locationd reader only enqueue.
@MainActor final class Bridge {
    enum Input: Sendable {
        case mqtt(MQTTEvent)
        case locationd(ServerMessage)
        case locationdConnected(LocationClient)
        case locationdClosed(String)
        /// Four times a second: the acknowledgement to locationd and the status file.
        case tick
    }

    /// The highest seq the broker has for locationd to forget, and the last one sent: sent on
    /// the tick, one `ack` for all the PUBACKs since (an `ack` per PUBACK would exceed
    /// locationd's flood limit at a few hundred messages a second).
    private var ackDue: UInt64 = 0
    private var ackSent: UInt64 = 0

    let config: BridgeConfig
    let encoder: OwnTracksEncoder
    let log: Logger
    let status: StatusFile
    private var ledger: DeliveryLedger
    private var mqtt: MQTTClient?
    private var client: LocationClient?
    private var brokerConnected = false
    private var lastFix: Fix?
    private var waypoints: [String: Waypoint] = [:]
    /// Commands that came while locationd was not connected, run when it is (at most 100).
    private var heldCommands: [OwnTracksCommand] = []
    /// How many messages the MQTT client holds unacknowledged at most: the rest wait in the
    /// ledger's bounded outbox, not in libmosquitto's unbounded queue.
    static let window = 100

    private let (inputs, input) = AsyncStream<Input>.makeStream()

    init(config: BridgeConfig, log: Logger, status: StatusFile) {
        self.config = config
        self.encoder = OwnTracksEncoder(base: config.topic, tid: config.effectiveTID)
        self.log = log
        self.status = status
        self.ledger = DeliveryLedger(limit: config.queueLimit)
    }

    func run(mqttOptions: MQTTClient.Options) async throws {
        let mqtt = try MQTTClient(mqttOptions)
        self.mqtt = mqtt
        let input = self.input
        Task {
            for await event in mqtt.events { input.yield(.mqtt(event)) }
        }
        let (config, log) = (self.config, self.log)
        let connector = Task.detached { await Self.keepLocationdConnected(config: config, log: log, input: input) }
        let ticker = Task.detached {
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(250))
                input.yield(.tick)
            }
        }
        defer { connector.cancel(); ticker.cancel() }
        writeStatus()
        for await item in inputs {
            switch item {
            case .mqtt(let event):
                if let command = handle(event) { await run(command) }
            case .locationdConnected(let c):
                client = c
                log.info("connected to locationd", metadata: ["socket": "\(config.socket)"])
                await refreshWaypoints()
                let held = heldCommands
                heldCommands.removeAll()
                for command in held { await run(command) }
            case .locationd(let message): await handle(message)
            case .tick:
                if ackDue > ackSent, let client {
                    do {
                        try client.send(.ack(id: nil, seq: ackDue))
                        ackSent = ackDue
                    } catch {
                        log.warning("cannot acknowledge to locationd", metadata: ["seq": "\(ackDue)", "error": "\(error)"])
                    }
                }
                status.write(force: true)
            case .locationdClosed(let why):
                client = nil
                resubscribing = false
                ackSent = 0
                ledger.resubscribed()
                log.warning("connection to locationd closed; reconnecting", metadata: ["reason": "\(why)"])
            }
            pump()
            writeStatus()
        }
    }

    // MARK: locationd

    /// Connects, opens an `always` session and subscribes; on any failure or close, again after
    /// a back-off (1 s doubling to 30 s; reset by a connection that lasted).
    private nonisolated static func keepLocationdConnected(config: BridgeConfig, log: Logger, input: AsyncStream<Input>.Continuation) async {
        var delay = 1.0
        while !Task.isCancelled {
            var current: LocationClient?
            do {
                let c = try await LocationClient.connect(path: config.socket)
                current = c
                let session = try await c.startSession(.always, purpose: nil)
                var options = config.subscription
                if session.authorization != .always {
                    // Only an always session has a queue: events are then sent live, and lost
                    // while the bridge is away (docs/mqtt.md, "Durability").
                    options.durable = false
                    log.warning("locationd granted \(session.authorization?.rawValue ?? "no session"), not always: nothing is kept for the bridge while it or the broker is away, and waypoints need always", metadata: ["rule": "\(session.rule ?? "")"])
                }
                input.yield(.locationdConnected(c))
                try await c.subscribe(options)
                delay = 1
                do {
                    for try await m in c.messages { input.yield(.locationd(m)) }
                    input.yield(.locationdClosed("closed by locationd"))
                } catch {
                    input.yield(.locationdClosed("\(error)"))
                }
            } catch {
                log.warning("cannot subscribe to locationd; retrying", metadata: ["socket": "\(config.socket)", "error": "\(error)", "retry": "\(delay) s"])
                if current != nil { input.yield(.locationdClosed("\(error)")) }
            }
            current?.close()
            try? await Task.sleep(for: .seconds(delay))
            delay = min(delay * 2, 30)
        }
    }

    private func handle(_ message: ServerMessage) async {
        switch message {
        case .queued(let seq, let inner):
            status.received = max(status.received, seq)
            let m = encode(inner, seq: seq)
            ledger.received(m, seq: seq)
            if m == nil, let ack = ledger.skipped(seq: seq) { acknowledge(ack) }
        case .overflow(let lost, let seq):
            status.received = max(status.received, seq)
            if ledger.received(encoder.lost(lost, seq: seq), seq: seq, first: seq - min(lost, seq) + 1) {
                log.warning("locationd's queue for the bridge overflowed: its oldest events were dropped", metadata: ["lost": "\(lost)", "seq": "\(seq)"])
            }
        case .subscribed(let id, _) where id == Self.resubscription:
            // Everything after this reply is the new subscription's backlog, from the oldest
            // event not acknowledged.
            resubscribing = false
            ledger.resubscribed()
        case .error(let e) where e.id == Self.resubscription:
            resubscribing = false
            log.warning("cannot subscribe again: \(e.code.rawValue): \(e.message)")
        case .session(let info):
            log.notice("session \(info.state.rawValue)", metadata: ["authorization": "\(info.authorization?.rawValue ?? "none")", "accuracy": "\(info.accuracy?.rawValue ?? "none")"])
        case .error(let e):
            log.warning("locationd: \(e.code.rawValue): \(e.message)")
        default:
            if let m = encode(message, seq: nil) { ledger.received(m, seq: nil) }
        }
    }

    /// The OwnTracks message for a locationd event, or nil when the configuration does not
    /// publish it. Remembers the latest fix for `reportLocation`.
    private func encode(_ message: ServerMessage, seq: UInt64?) -> OutgoingMessage? {
        switch message {
        case .location(let fix, _):
            lastFix = fix
            guard config.locations, config.mode == .move else { return nil }
            return encoder.location(fix, trigger: .timer, seq: seq)
        case .significant(let fix):
            if config.mode == .significant { lastFix = fix }
            guard config.locations, config.mode == .significant else { return nil }
            return encoder.location(fix, trigger: .ping, seq: seq)
        case .visit(let v):
            guard config.visits else { return nil }
            return encoder.visit(v, seq: seq)
        case .region(let e):
            guard config.transitions else { return nil }
            return encoder.transition(e, waypoint: waypoints[e.region], seq: seq)
        default:
            return nil
        }
    }

    /// `seq` and everything below it may be forgotten by locationd: sent at the next tick.
    private func acknowledge(_ seq: UInt64) {
        ackDue = max(ackDue, seq)
    }

    // MARK: MQTT

    /// Handles one event of the MQTT thread; returns a command to run.
    private func handle(_ event: MQTTEvent) -> OwnTracksCommand? {
        switch event {
        case .connected(let code):
            guard code == 0 else {
                log.error("the broker refused the connection: \(MQTTClient.describe(connack: code))", metadata: ["broker": "\(config.host):\(config.port)"])
                return nil
            }
            brokerConnected = true
            status.lastConnect = Self.now()
            log.info("connected to the broker", metadata: ["broker": "\(config.host):\(config.port)", "client": "\(config.effectiveClientID)"])
            do { try mqtt?.subscribe(encoder.commandTopic) } catch { log.error("\(error)") }
        case .disconnected(let code):
            if brokerConnected || status.lastConnect == nil {
                log.warning("disconnected from the broker; reconnecting with back-off", metadata: ["reason": "\(MQTTClient.describe(error: code))"])
            }
            brokerConnected = false
            ledger.brokerDisconnected()
            mqtt?.disconnectHandled()
        case .published(let mid):
            status.published += 1
            status.lastPuback = Self.now()
            if let ack = ledger.puback(mid: mid) { acknowledge(ack) }
        case .message(let topic, let payload):
            guard topic == encoder.commandTopic else { return nil }
            do {
                let command = try OwnTracksCommand.decode(payload, now: Self.now())
                log.info("command from the broker", metadata: ["command": "\(Self.name(command))"])
                return command
            } catch {
                log.warning("ignored a message on \(topic): \(error)")
            }
        }
        return nil
    }

    /// The id of a subscribe sent to get locationd's queue written again (`DeliveryLedger`);
    /// its reply comes in order with the events, so the ledger knows where the backlog starts.
    static let resubscription = RequestID.string("resubscribe")
    private var resubscribing = false

    /// Hands waiting messages to the MQTT client while connected, up to `window` in flight;
    /// subscribes again when the ledger refused numbered events and has drained.
    private func pump() {
        if ledger.shouldResubscribe, !resubscribing, let client {
            do {
                try client.send(.subscribe(id: Self.resubscription, options: config.subscription))
                resubscribing = true
                log.info("subscribing again: locationd writes its queue again from the oldest event not acknowledged")
            } catch {
                log.warning("cannot subscribe again: \(error)")
            }
        }
        let lost = ledger.takeLost()
        if lost > 0 {
            log.warning("the bridge's queue is full: oldest messages dropped", metadata: ["lost": "\(lost)", "queue_limit": "\(config.queueLimit)"])
            status.lost += lost
            ledger.received(encoder.lost(lost, seq: nil), seq: nil)
        }
        guard brokerConnected, let mqtt else { return }
        while ledger.inFlight.count < Self.window, let entry = ledger.next {
            do {
                // nil: a disconnect not handled yet; the message goes after the reconnect.
                guard let mid = try mqtt.publish(entry.message) else { return }
                ledger.handed(mid: mid)
            } catch {
                log.warning("\(error); retrying after the reconnect")
                return
            }
        }
    }

    // MARK: Commands

    private func run(_ command: OwnTracksCommand) async {
        guard let client else {
            if heldCommands.count < 100 { heldCommands.append(command) }
            log.notice("locationd is not connected: \(Self.name(command)) runs when it is")
            return
        }
        do {
            switch command {
            case .reportLocation:
                guard let fix = lastFix else {
                    log.notice("reportLocation: no position yet")
                    return
                }
                ledger.received(encoder.location(fix, trigger: .reply), seq: nil)
            case .setWaypoints(let set, let remove):
                let registered = Set(waypoints.keys)
                let replaced = set.map(\.rid).filter(registered.contains) + remove.filter(registered.contains)
                if !replaced.isEmpty {
                    _ = try await client.request { @Sendable in .regionsRemove(id: $0, ids: replaced) }
                }
                if !set.isEmpty {
                    _ = try await client.request { @Sendable in .regionsAdd(id: $0, regions: set.map(\.region)) }
                }
                await refreshWaypoints()
                log.info("waypoints set", metadata: ["set": "\(set.count)", "removed": "\(remove.count)", "registered": "\(waypoints.count)"])
                ledger.received(encoder.waypoints(sortedWaypoints), seq: nil)
            case .clearWaypoints:
                _ = try await client.request { @Sendable in .regionsRemove(id: $0, ids: nil) }
                await refreshWaypoints()
                ledger.received(encoder.waypoints(sortedWaypoints), seq: nil)
            case .waypoints:
                await refreshWaypoints()
                ledger.received(encoder.waypoints(sortedWaypoints), seq: nil)
            }
        } catch {
            log.warning("command \(Self.name(command)) failed: \(error)")
        }
        pump()
        writeStatus()
    }

    private var sortedWaypoints: [Waypoint] { waypoints.values.sorted { $0.rid < $1.rid } }

    private func refreshWaypoints() async {
        guard let client else { return }
        do {
            let records = try await client.regions()
            waypoints = Dictionary(records.map { ($0.region.id, Waypoint(region: $0.region)) }, uniquingKeysWith: { a, _ in a })
        } catch {
            log.warning("cannot list the bridge's regions: \(error)")
        }
    }

    nonisolated static func name(_ c: OwnTracksCommand) -> String {
        switch c {
        case .reportLocation: "reportLocation"
        case .setWaypoints: "setWaypoints"
        case .clearWaypoints: "clearWaypoints"
        case .waypoints: "waypoints"
        }
    }

    // MARK: Status

    private func writeStatus() {
        status.brokerConnected = brokerConnected
        status.locationdConnected = client != nil
        status.queued = ledger.waiting
        status.inFlight = ledger.inFlight.count
        status.acknowledged = ledger.acknowledged
        status.write()
    }

    nonisolated static func now() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec)
    }
}
