import LocationCore
import Logging
import NIOCore

/// Runs on the hub's event loop and keeps systemd informed:
///
/// - **Watchdog**: when systemd asked for one (`WatchdogSec=` → `WATCHDOG_USEC`), sends
///   `WATCHDOG=1` every half interval from a repeated task *on the event loop* — the loop that
///   runs the engine and every connection. A loop that is stuck (or busy for longer than the
///   interval) sends nothing, and systemd restarts the daemon.
/// - **Status**: every tick (at most 500 ms apart) it reads the hub's state on the loop and, when
///   the text changed, sends `STATUS=…` (`systemctl status` shows it), e.g.
///   `gpsd localhost:2947: fix; 2 subscribers`.
///
/// Everything else it sends (`READY=1`, `RELOADING=1`, `STOPPING=1`) is sent by the daemon at
/// those moments through `notify`. Not thread-confined: `notify` may be called from anywhere.
public final class ServiceSupervisor: Sendable {
    public let hub: Hub
    /// Microseconds between two `WATCHDOG=1`; nil when the watchdog is off.
    public let watchdogPingMicroseconds: UInt64?
    private let box: NIOLoopBoundBox<State>
    private let logger: Logger

    private final class State {
        var lastStatus = ""
        var task: RepeatedTask?
        var extra: String?
        /// Ticks so far.
        var ticks = 0
    }

    public init(hub: Hub, watchdog: Bool, logger: Logger) {
        self.hub = hub
        self.logger = logger
        watchdogPingMicroseconds = watchdog ? SystemdNotifier.watchdogMicroseconds().map { max($0 / 2, 1) } : nil
        box = NIOLoopBoundBox.makeBoxSendingValue(State(), as: State.self, eventLoop: hub.eventLoop)
    }

    /// The status line for a hub state.
    public static func statusText(_ s: HubSnapshot, note: String? = nil) -> String {
        let state = switch s.state {
        case .disconnected: "not connected"
        case .connected: "connected, no report yet"
        case .noFix: "connected, no fix"
        case .fix: "fix"
        }
        let subscribers = s.subscriberCount == 1 ? "1 subscriber" : "\(s.subscriberCount) subscribers"
        return "\(s.sourceDescription): \(state); \(subscribers)" + (note.map { "; \($0)" } ?? "")
    }

    /// The status is looked at every tick (at most 500 ms apart); a ping goes out every
    /// `ticksPerPing` ticks, i.e. every `watchdogPingMicroseconds` (rounded down to a tick):
    /// pinging on every tick woke PID 1 twice a second with WatchdogSec=10s.
    static func schedule(ping: UInt64?) -> (tickMicroseconds: UInt64, ticksPerPing: Int) {
        let tick = min(ping ?? statusTick, statusTick)
        return (tick, ping.map { max(1, Int($0 / tick)) } ?? 0)
    }
    static let statusTick: UInt64 = 500_000
    var tickMicroseconds: UInt64 { Self.schedule(ping: watchdogPingMicroseconds).tickMicroseconds }
    var ticksPerPing: Int { Self.schedule(ping: watchdogPingMicroseconds).ticksPerPing }

    /// Starts the repeated task on the hub's loop (status always, pings when asked for).
    public func start() {
        guard SystemdNotifier.isEnabled else { return }
        let tick = tickMicroseconds
        if let ping = watchdogPingMicroseconds {
            logger.info("watchdog on", metadata: ["ping_interval_ms": "\(ping / 1000)"])
        }
        hub.eventLoop.execute {
            self.box.value.task = self.hub.eventLoop.scheduleRepeatedTask(
                initialDelay: .zero, delay: .microseconds(Int64(tick))) { _ in self.tickOnLoop() }
        }
    }

    /// Cancels the repeated task.
    public func stop() async {
        try? await hub.eventLoop.submit { self.box.value.task?.cancel(); self.box.value.task = nil }.get()
    }

    /// A note appended to the status (e.g. "stopping"); sent at the next tick, or now on the loop.
    public func setNote(_ note: String?) {
        hub.eventLoop.execute {
            self.box.value.extra = note
            self.sendStatusIfChanged(prefix: nil)
        }
    }

    /// The current status text (read on the loop).
    public func currentStatus() async throws -> String {
        try await hub.eventLoop.submit { Self.statusText(self.hub.loopSnapshot, note: self.box.value.extra) }.get()
    }

    @discardableResult
    public func notify(_ state: String) -> Bool { SystemdNotifier.notify(state) }

    private func tickOnLoop() {
        let s = box.value
        // The first tick (at once) pings, then every ticksPerPing-th.
        let ping = watchdogPingMicroseconds != nil && s.ticks % ticksPerPing == 0
        s.ticks &+= 1
        sendStatusIfChanged(prefix: ping ? "WATCHDOG=1" : nil)
    }

    private func sendStatusIfChanged(prefix: String?) {
        let s = box.value
        let text = Self.statusText(hub.loopSnapshot, note: s.extra)
        var lines: [String] = prefix.map { [$0] } ?? []
        if text != s.lastStatus {
            s.lastStatus = text
            lines.append("STATUS=\(text)")
        }
        if !lines.isEmpty { SystemdNotifier.notify(lines.joined(separator: "\n")) }
    }
}
