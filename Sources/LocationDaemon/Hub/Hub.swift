import LocationCore
import LocationProtocol
import Logging
import NIOCore

/// Something that receives a subscriber's events: a connection. Called on the hub's loop only.
public protocol HubSubscriber: AnyObject {
    /// The program the subscriber speaks for (its peer's).
    var program: ProgramID { get }
    /// `encoded` is the event's line, shared by every subscriber receiving the same event.
    func deliver(_ event: Event, encoded: ByteBuffer)
    /// The same with the event read in place, valid for the call only, and the line with where
    /// its bytes are: what the hub's fan-out calls (passing the event itself copies it, ≈ 150
    /// instructions per subscriber and fix). By default `deliver(event.pointee,
    /// encoded: line.buffer)`; a subscriber that looks at the event only on a slow path
    /// implements it.
    func deliver(at event: UnsafePointer<Event>, line: EncodedLine)
}

extension HubSubscriber {
    public func deliver(at event: UnsafePointer<Event>, line: EncodedLine) {
        deliver(event.pointee, encoded: line.buffer)
    }
}

/// What the hub knows, for status replies and tests.
public struct HubSnapshot: Hashable, Sendable {
    public var subscriberCount: Int
    public var state: SourceState
    public var lastFix: Fix?
    public var sourceDescription: String
    /// The state and last fix time as approximate programs are shown them (docs/privacy.md,
    /// "Publication epochs").
    public var approximateState: SourceState = .disconnected
    public var approximateLastFix: Timestamp?
}

/// Owns the pure `Engine`, confined to one NIO event loop: every engine input is handled on
/// that loop, so the hot path takes no lock. The gpsd source lives on the same loop (a report
/// reaches the engine with no thread hop); the replay source calls `submit` from its thread;
/// connections (on the same loop) register with `subscribe`/`unsubscribe`.
///
/// Each distinct event of one input is encoded once (one `ByteBuffer`, shared copy-on-write by
/// all subscribers receiving it), not once per subscriber, into buffers reused from one input
/// to the next (`EncodedLines`).
///
/// Its state is here; each part's code (policy, background monitoring and its bound, regions,
/// store, publication clock, receiver gating) is in a `Hub+Part.swift` of its own.
public final class Hub: Sendable {
    public let eventLoop: any EventLoop
    /// What publication ticks estimate the receiver's time by and store retries are paced by
    /// (by default the loop's, which its timers run by).
    public let clock: ShellClock
    /// What positions come from, e.g. `gpsd localhost:2947` (shown in status replies).
    public let sourceDescription: String
    /// Keeps registrations and region states across restarts (written on the loop).
    public let regionStore: RegionStore?
    /// Keeps background events of `always` programs until they acknowledge them (on the loop;
    /// shares the region store's database, so a fix's states and events commit together).
    public let queue: EventQueue?
    /// The identities of programs' latest sessions (what the policy is matched against for a
    /// program that is away).
    public let identities: ProgramIdentities?
    /// Keeps the approximate-location cell across restarts (written on the loop).
    public let privacyCells: PrivacyCellStore?
    /// Keeps each program's places across restarts (written on the loop).
    public let placeStore: PlaceStore?
    /// Keeps each program's recent visits across restarts (written on the loop).
    public let visitStore: VisitStore?
    /// The localities of events and places (docs/places.md, "Locality").
    public let gazetteer: Gazetteer?
    /// Programs of one user that may keep background monitoring (`backgroundRefusal(of:)`).
    public let maxBackgroundProgramsPerUser: Int
    public static let defaultMaxBackgroundProgramsPerUser = 32
    let logger: Logger
    let box: NIOLoopBoundBox<State>
    /// Whether the hub starts publication epochs by its clock (`EngineInput.tick`): for a live
    /// source, not a replay (whose reports are what they are, at any speed).
    let publicationTicks: Bool

    final class State {
        var engine = Engine()
        // Not checked for exclusive access at run time (≈ 130 instructions per subscriber and
        // fix): no access to either runs code that could touch the hub's state (each is one
        // call into `Subscribers` or `EncodedLines`, which call nothing but the encoder).
        @exclusivity(unchecked) var subscribers = Subscribers()
        var nextID: UInt64 = 1
        var deliveries: [Delivery] = []
        @exclusivity(unchecked) var lines: EncodedLines
        /// The direct sends of an input's deliveries, made together (`SendBatch`).
        let sends = SendBatch()
        var programEvents: [ProgramEvent] = []
        /// What earlier fixes changed that the store refused, written with the next fix's.
        var unwritten = UnwrittenChanges()
        /// The approximate-location cell last written to `privacyCells`.
        var storedCell: PrivacyGrid.Cell?
        var processedInputs: UInt64 = 0
        /// The count of fixes dropped as clock glitches at which the next notice is logged.
        var clockGlitchNoticeAt = 1
        var hadSubscription = false
        var firstSubscriptionWaiters: [@Sendable () -> Void] = []
        var policy = Policy()
        var openSessions = 0
        var demandHandler: (@Sendable (Bool) -> Void)?
        var receiverWatched: Bool?
        /// `always` subscriptions with visits or significant changes, and the options they
        /// would hand over (`rememberBackground`).
        var alwaysSubscriptions: [SubscriberID: (program: ProgramID, options: SubscriptionOptions)] = [:]
        /// `always` subscriptions with visits or significant changes that the per-user bound
        /// refused to keep (`subscriptionKept`): live only, never handed over.
        var refusedBackground: Set<SubscriberID> = []
        /// What the `background` table holds per program (written only when it changes).
        var rememberedBackground: [ProgramID: SubscriptionOptions] = [:]
        /// Regions registered by each user's programs together (`registeredRegions(ofUser:)`).
        var regionsOfUser: [UInt32: Int] = [:]
        /// Programs whose remembered regions could not be loaded at start, and why: their rows
        /// stay as they are in the store, so no change of theirs may touch them.
        var unrestored: [ProgramID: RegionError] = [:]
        /// The receiver's time at the last report that had one, and when (the loop's clock) it
        /// came: what publication ticks estimate the receiver's time from.
        var clockAnchor: (time: Timestamp, at: NIODeadline)?
        var tick: Scheduled<Void>?
        /// Durable subscriptions and their programs, both ways (`Hub+Durable`), and the events
        /// of the input being handled diverted to their queues.
        var durableSubscribers: [SubscriberID: ProgramID] = [:]
        var durablePrograms: [ProgramID: SubscriberID] = [:]
        var durableEvents: [ProgramEvent] = []
        /// What the `durable_away` table holds per program (`Hub+DurableAway`).
        var rememberedAway: [ProgramID: SubscriptionOptions] = [:]

        init(encoder: EventEncoder) { lines = EncodedLines(encoder: encoder) }
    }

    public init(eventLoop: any EventLoop, sourceDescription: String, logger: Logger = Logger(label: "locationd.hub"),
                regionLimits: RegionMonitor.Limits = RegionMonitor.Limits(),
                maxBackgroundProgramsPerUser: Int = Hub.defaultMaxBackgroundProgramsPerUser,
                regionStore: RegionStore? = nil, queue: EventQueue? = nil, identities: ProgramIdentities? = nil,
                privacyCells: PrivacyCellStore? = nil, publicationTicks: Bool = false, clock: ShellClock? = nil,
                gazetteer: Gazetteer? = nil, placeStore: PlaceStore? = nil, visitStore: VisitStore? = nil) {
        self.eventLoop = eventLoop
        self.clock = clock ?? .of(eventLoop)
        self.publicationTicks = publicationTicks
        self.sourceDescription = sourceDescription
        self.regionStore = regionStore
        self.queue = queue
        self.identities = identities
        self.privacyCells = privacyCells
        self.placeStore = placeStore
        self.visitStore = visitStore
        self.gazetteer = gazetteer
        self.maxBackgroundProgramsPerUser = maxBackgroundProgramsPerUser
        self.logger = logger
        // With a gazetteer, visit and significant lines carry their locality (docs/places.md).
        let state = State(encoder: EventEncoder(gazetteer: gazetteer))
        state.engine.regionLimits = regionLimits
        state.engine.privacy.publishesAtReports = !publicationTicks
        self.box = NIOLoopBoundBox.makeBoxSendingValue(state, as: State.self, eventLoop: eventLoop)
    }

    // MARK: Any thread

    /// Feeds one input to the engine. Thread-safe: off the loop it hops onto it (inputs from one
    /// thread are handled in submission order); on the loop it is handled at once.
    public func submit(_ input: EngineInput) {
        if eventLoop.inEventLoop {
            handle(input)
        } else {
            eventLoop.execute { self.handle(input) }
        }
    }

    /// Returns once the loop has handled everything submitted (from this task) before the call.
    public func processed() async {
        try? await eventLoop.submit {}.get()
    }

    /// The hub's state, read on its loop (after everything submitted before the call).
    public func snapshot() async throws -> HubSnapshot {
        try await eventLoop.submit { self.loopSnapshot }.get()
    }

    // MARK: On the loop

    public var loopSnapshot: HubSnapshot {
        let s = box.value
        return HubSnapshot(subscriberCount: s.engine.subscriberCount, state: s.engine.sourceState,
                           lastFix: s.engine.lastFix, sourceDescription: sourceDescription,
                           approximateState: s.engine.approximateStatus.state,
                           approximateLastFix: s.engine.approximateStatus.lastFix)
    }

    /// Runs `body` on the loop once the first subscription has opened (at once if one has): a
    /// replay starts then, so the subscriber that asked for it sees the log from its first fix.
    public func whenFirstSubscribed(_ body: @escaping @Sendable () -> Void) {
        eventLoop.execute {
            let s = self.box.value
            if s.hadSubscription { body() } else { s.firstSubscriptionWaiters.append(body) }
        }
    }

    /// A fresh subscriber id (one per connection).
    public func makeSubscriberID() -> SubscriberID {
        let s = box.value
        defer { s.nextID += 1 }
        return SubscriberID(s.nextID)
    }

    /// Opens or replaces `id`'s subscription; `subscriber` receives its events from now on,
    /// starting with the current source status. `afterStatus` runs right after that status, so
    /// what it sends (the program's background backlog) comes before anything newer, the
    /// location an approximate subscription is shown at once included.
    public func subscribe(_ id: SubscriberID, options: SubscriptionOptions, subscriber: any HubSubscriber,
                          afterStatus: () -> Void = {}) {
        box.value.subscribers[id] = subscriber
        // A new subscription is decided afresh (`subscriptionKept`, after its status): an old
        // refusal must not end it at a hand-over in between.
        box.value.refusedBackground.remove(id)
        // A durable subscribe takes the program's durable subscription back from away, its
        // filters going on (`Engine.resumeAway`).
        if let program = box.value.durableSubscribers[id] { box.value.engine.resumeAway(of: program, as: id) }
        withoutActuallyEscaping(afterStatus) { handle(.subscribe(id, options), afterFirstDelivery: $0) }
        updateDemand()
        if !box.value.hadSubscription {
            box.value.hadSubscription = true
            let waiters = box.value.firstSubscriptionWaiters
            box.value.firstSubscriptionWaiters = []
            waiters.forEach { $0() }
        }
    }

    /// Closes `id`'s subscription, if any.
    public func unsubscribe(_ id: SubscriberID) {
        guard box.value.subscribers.removeValue(forKey: id) != nil else { return }
        endDurable(id)
        forgetAlways(id)
        handle(.unsubscribe(id))
        updateDemand()
    }

    /// `afterFirstDelivery` (a subscribe's) runs right after the input's first delivery (its
    /// status), or at the end if there is none.
    func handle(_ input: EngineInput, afterFirstDelivery: (() -> Void)? = nil) {
        eventLoop.preconditionInEventLoop()
        let s = box.value
        s.deliveries.removeAll(keepingCapacity: true)
        s.engine.handle(input, into: &s.deliveries)
        s.processedInputs &+= 1
        if s.engine.clock.dropped >= s.clockGlitchNoticeAt { logClockGlitches(s) }
        // A fix, or a publication (at a report without a fix, or a tick) that made background
        // events or events of durable subscriptions, is written before its events leave.
        let diverted = divertDurable(s)
        if case .fix = input { persist(s) } else if s.engine.hasProgramEvents || diverted { persist(s) }
        if diverted { dropDiverted(s) }
        storePlaces(s)
        // After this input's live events (its status first): they are older.
        defer { if !s.durableSubscribers.isEmpty { notifyDurable(s) } }
        if publicationTicks { anchorClock(s, input) }
        s.lines.startInput()
        // Declared after the durable notice's `defer`, so it runs first: the live lines are sent
        // before anything is written from the durable queue.
        s.sends.open()
        defer { s.sends.close() }
        // Read in place, not copied out one by one (a copy of each was ≈ 180 instructions per
        // subscriber and fix; docs/benchmarks.md, "Fan-out"). `deliveries` holds them while a
        // delivery re-enters the hub (a failed write closes its connection, which unsubscribes;
        // `afterFirstDelivery` may use the hub): the engine then writes to a copy.
        let deliveries = s.deliveries
        deliveries.withUnsafeBufferPointer { all in
            for k in all.indices {
                deliver(all.baseAddress! + k, s)
                if k == 0 { afterFirstDelivery?() }
            }
        }
        if deliveries.isEmpty { afterFirstDelivery?() }
    }

    /// The direct sends of the input being fanned out (on the loop).
    var sends: SendBatch { box.value.sends }

    func deliver(_ delivery: Delivery, _ s: State) {
        withUnsafePointer(to: delivery) { deliver($0, s) }
    }

    private func deliver(_ delivery: UnsafePointer<Delivery>, _ s: State) {
        guard let subscriber = s.subscribers.lookUp(delivery.pointee.subscriber) else { return }
        let event = delivery.pointer(to: \.event)!
        let line = s.lines.line(at: event)
        subscriber.deliver(at: event, line: line)
    }
}
