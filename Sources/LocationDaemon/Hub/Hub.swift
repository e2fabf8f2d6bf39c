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
public final class Hub: Sendable {
    public let eventLoop: any EventLoop
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
    /// Programs of one user that may keep background monitoring (`backgroundRefusal(of:)`).
    public let maxBackgroundProgramsPerUser: Int
    public static let defaultMaxBackgroundProgramsPerUser = 32
    private let logger: Logger
    private let box: NIOLoopBoundBox<State>
    /// Whether the hub starts publication epochs by its clock (`EngineInput.tick`): for a live
    /// source, not a replay (whose reports are what they are, at any speed).
    let publicationTicks: Bool

    private final class State {
        var engine = Engine()
        var subscribers: [SubscriberID: any HubSubscriber] = [:]
        var nextID: UInt64 = 1
        var deliveries: [Delivery] = []
        var lines = EncodedLines()
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
    }

    public init(eventLoop: any EventLoop, sourceDescription: String, logger: Logger = Logger(label: "locationd.hub"),
                regionLimits: RegionMonitor.Limits = RegionMonitor.Limits(),
                maxBackgroundProgramsPerUser: Int = Hub.defaultMaxBackgroundProgramsPerUser,
                regionStore: RegionStore? = nil, queue: EventQueue? = nil, identities: ProgramIdentities? = nil,
                privacyCells: PrivacyCellStore? = nil, publicationTicks: Bool = false) {
        self.eventLoop = eventLoop
        self.publicationTicks = publicationTicks
        self.sourceDescription = sourceDescription
        self.regionStore = regionStore
        self.queue = queue
        self.identities = identities
        self.privacyCells = privacyCells
        self.maxBackgroundProgramsPerUser = maxBackgroundProgramsPerUser
        self.logger = logger
        let state = State()
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
        forgetAlways(id)
        handle(.unsubscribe(id))
        updateDemand()
    }

    /// `id` no longer holds an `always` subscription: its program's remembered background
    /// monitor follows.
    private func forgetAlways(_ id: SubscriberID) {
        box.value.refusedBackground.remove(id)
        guard let (program, _) = box.value.alwaysSubscriptions.removeValue(forKey: id) else { return }
        rememberBackground(of: program)
    }

    /// `id`'s subscription (new, or its session's grant changed) is `always` with these options
    /// as granted, or (nil) it is not: what its program would keep in the background follows.
    /// False when it would be kept but may not be (`backgroundRefusal(of:)`): it stays live only.
    @discardableResult
    public func subscriptionKept(_ id: SubscriberID, of program: ProgramID, always options: SubscriptionOptions?) -> Bool {
        // Only for a subscription that is open: kept for a closed one, it outlived every close.
        guard box.value.subscribers[id] != nil else { return true }
        if let options, Self.keptInBackground(options) {
            guard backgroundRefusal(of: program) == nil else {
                box.value.refusedBackground.insert(id)
                return false
            }
            box.value.refusedBackground.remove(id)
            box.value.alwaysSubscriptions[id] = (program, options)
            rememberBackground(of: program)
        } else {
            forgetAlways(id)
        }
        return true
    }

    /// Whether a subscription with `options` under an `always` session is kept in the
    /// background once its connection goes away (its visits and significant changes).
    public static func keptInBackground(_ options: SubscriptionOptions) -> Bool {
        options.events.contains(.visits) || options.events.contains(.significant)
    }

    // MARK: Background bound (on the loop; docs/configuration.md, store.max_background_programs_per_user)

    /// Why `program` may not start keeping background monitoring, or nil if it may: one that
    /// keeps it already may (monitored, remembered, or under an open `always` subscription), as
    /// may root's and the daemon's user's; another only while its user's programs keep fewer
    /// than `maxBackgroundProgramsPerUser`. *Reason:* a program is a uid and an executable, and
    /// a user can make as many executables as it likes (copies, hard links): each copy kept a
    /// monitor in memory and a queue of up to `queue_limit` rows, without end.
    public func backgroundRefusal(of program: ProgramID) -> String? {
        guard let uid = PeerIdentity.uid(of: program), !box.value.policy.isOwner(uid: uid) else { return nil }
        let keeping = programsKeepingBackground()
        guard !keeping.contains(program) else { return nil }
        let kept = keeping.count { PeerIdentity.uid(of: $0) == uid }
        guard kept >= maxBackgroundProgramsPerUser else { return nil }
        return "uid \(uid)'s programs keep \(kept) background monitors, the most one user may ([store] max_background_programs_per_user = \(maxBackgroundProgramsPerUser)); end one (a program's monitoring ends when it ends its always session with session.end rather than disconnecting), subscribe without visits and significant, or raise max_background_programs_per_user"
    }

    /// The subscriptions the bound refused to keep, in subscription order (a reload offers them
    /// a slot again once it has ended what it ends: `SocketServer.applyPolicy`).
    public var backgroundRefusedSubscribers: [SubscriberID] { box.value.refusedBackground.sorted() }

    /// The programs that keep background monitoring: monitored, remembered, or under an open
    /// `always` subscription that would hand it over. Gathered when a program not keeping it
    /// asks to (rare): a tally kept at every change would have to follow each place one starts
    /// or ends.
    private func programsKeepingBackground() -> Set<ProgramID> {
        let s = box.value
        var programs = Set(s.engine.backgroundProgramIDs).union(s.rememberedBackground.keys)
        for kept in s.alwaysSubscriptions.values { programs.insert(kept.program) }
        return programs
    }

    /// How many programs of user `uid` keep background monitoring.
    public func backgroundPrograms(ofUser uid: UInt32) -> Int {
        programsKeepingBackground().count { PeerIdentity.uid(of: $0) == uid }
    }

    // MARK: Policy (on the loop; docs/privacy.md)

    /// The access policy in force; connections resolve their peer against it at connect and
    /// on every reload.
    public var policy: Policy {
        get { box.value.policy }
        set { box.value.policy = newValue }
    }

    /// What a program that outlives its connections keeps, decided again whenever the policy
    /// may have changed (daemon start, reload; docs/privacy.md, "Programs that are away"): every
    /// program with regions, background monitors or queued events is matched, by the identity
    /// of its latest session, against the policy in force. A program no longer `always`
    /// loses its background monitors and its queued events, and its regions are suspended; one
    /// no longer offered precise location has its regions and precise background monitors
    /// stopped the same way. Suspended regions resume when the rule allows them again.
    public func enforcePolicy() {
        let s = box.value
        var programs = Set(s.engine.regionProgramIDs).union(s.engine.backgroundProgramIDs)
        if let queue { programs.formUnion(queue.programsWithEvents) }
        programs.formUnion(s.unwritten.programsWithEvents)
        identities?.forget { !needsIdentity($0, s) }
        for program in programs.sorted() {
            var who = identities?.recorded(program)
            if who == nil, program != ProgramID("unknown") {
                who = PeerIdentity.presumed(for: program)
                logger.warning("policy: no session of this program recorded its identity; matching its uid's groups from the user database, its executable as unverified (a rule naming it decides only as far as the rule matching without it allows)",
                               metadata: ["program": "\(program)", "groups": "\(who?.groups ?? [])"])
            }
            let rule = who.map { s.policy.rule(for: $0) } ?? s.policy.defaultRule
            apply(rule, to: program)
        }
        updateDemand()
    }

    /// A peer of the program asked for a session (or, holding one, used its regions): its
    /// identity is the program's from now on, and `rule` — the one that matches it — decides at
    /// once what the program keeps, as a reload would. A program whose groups changed, or that
    /// lost its rule, is caught the next time it asks, not only at the next reload.
    public func programSeen(_ identity: PeerIdentity, rule: PolicyRule) {
        guard speaksForItsProgram(identity) else { return }
        // Only a program that can keep something while away needs its identity remembered:
        // one its rule lets be `always`, or one remembered before (its change must be seen).
        // Any other program asking leaves no row behind.
        if rule.authorization == .always || identities?.recorded(identity.program) != nil {
            identities?.record(identity)
        }
        apply(rule, to: identity.program)
        updateDemand()
    }

    /// Whether `identity` may decide for its program. A process that may not be the program's
    /// file (an old binary after an upgrade, one from a mount namespace of its own) may not
    /// when a verified process of the program was recorded: its narrower rule would discard the
    /// queue and suspend the regions the real program keeps, and its identity would replace the
    /// one reloads match the program by. A program never verified (in a directory the daemon's
    /// user may not search) is recorded as it is, and reloads match it as such.
    func speaksForItsProgram(_ identity: PeerIdentity) -> Bool {
        !identity.claimsUnverifiedExecutable || identities?.recorded(identity.program)?.claimsUnverifiedExecutable != false
    }

    /// A connection of `program` closed: a program left keeping nothing (no regions, background
    /// monitor or queued event) needs no recorded identity, which only decides what a program
    /// that is away keeps. *Reason:* every program an `always` rule (the owner's too) ever let
    /// open a session kept a row and an entry for good; executables' paths change over a
    /// device's life (versioned directories, snaps, AppImages), so that grew without end.
    public func programClosed(_ program: ProgramID) {
        guard let identities, identities.recorded(program) != nil else { return }
        guard needsIdentity(program, box.value) else { return identities.forget(program) }
        // Away from now on: its identity is what a restart matches it by.
        if identities.hasUnsaved { identities.writeUnsaved() }
    }

    /// Whether `program`'s recorded identity is needed: it keeps something while away (regions,
    /// a background monitor, remembered or running, queued or unwritten events), or it has an
    /// `always` subscription open, whose hand-over the identity decides. The others are
    /// recorded again at their next session (`programClosed`, `enforcePolicy`).
    private func needsIdentity(_ program: ProgramID, _ s: State) -> Bool {
        s.engine.hasRegions(of: program) || s.engine.backgroundAccuracy(of: program) != nil
            || s.rememberedBackground[program] != nil || queue?.hasEvents(of: program) == true
            || s.unwritten.events(of: program) > 0 || s.alwaysSubscriptions.values.contains { $0.program == program }
    }

    private func apply(_ rule: PolicyRule, to program: ProgramID) {
        let s = box.value
        var meta: Logger.Metadata = ["program": "\(program)", "rule": "\(rule.name)",
                                     "max": "\(rule.authorization.rawValue) \(rule.accuracy.rawValue)"]
        if let accuracy = s.engine.backgroundAccuracy(of: program), !rule.keepsBackground(at: accuracy) {
            s.engine.endBackground(program)
            rememberBackground(of: program)
            logger.notice("policy: background monitoring ended", metadata: meta)
        }
        if !rule.keepsQueue, let queue, queue.count(of: program) + s.unwritten.events(of: program) > 0 {
            do {
                let unwritten = s.unwritten.discardEvents(of: program)
                meta["events"] = "\(try queue.discard(program) + unwritten)"
                logger.notice("policy: queued background events discarded", metadata: meta)
            } catch {
                meta["error"] = "\(error)"
                logger.error("policy: cannot discard queued background events", metadata: meta)
            }
        }
        if rule.monitorsRegions {
            if s.engine.resumeRegions(of: program) { logger.notice("policy: regions resumed", metadata: meta) }
        } else if s.engine.suspendRegions(of: program) {
            meta["regions"] = "\(s.engine.regionRecords(of: program).count)"
            logger.notice("policy: regions suspended (kept, not monitored)", metadata: meta)
        }
    }

    // MARK: Receiver gating (on the loop; docs/privacy.md, "Receiver")

    /// Whether anyone needs fixes: an open session, a subscription, or a program's regions,
    /// visits or significant changes (background monitoring).
    public var needsFixes: Bool {
        let s = box.value
        return s.openSessions > 0 || s.engine.subscriberCount > 0 || s.engine.monitorsRegions
            || !s.engine.backgroundProgramIDs.isEmpty
    }

    /// Whether the receiver is watched now (nil: the source is not gated, e.g. a replay).
    public var receiverWatched: Bool? { box.value.receiverWatched }

    /// `handler(needed)` is called now and whenever the need for fixes changes.
    public func onDemandChange(_ handler: @escaping @Sendable (Bool) -> Void) {
        box.value.demandHandler = handler
        box.value.receiverWatched = nil
        updateDemand()
    }

    public var openSessions: Int { box.value.openSessions }

    public func sessionOpened() { box.value.openSessions += 1; updateDemand() }
    public func sessionClosed() { box.value.openSessions -= 1; updateDemand() }

    func updateDemand() {
        let s = box.value
        guard let handler = s.demandHandler else { return }
        let need = needsFixes
        guard s.receiverWatched != need else { return }
        s.receiverWatched = need
        logger.info(need ? "receiver: watching (fixes needed)" : "receiver: released (no session or monitor needs fixes)")
        handler(need)
    }

    /// The device's approximate-location cell now (on the loop; for tests).
    public var loopPrivacyCell: PrivacyGrid.Cell? { box.value.engine.privacy.cell }

    /// The location approximate programs are shown now (on the loop; for tests).
    public var loopPublishedFix: Fix? { box.value.engine.privacy.publishedFix }

    /// The approximate-location cell remembered from before a restart (before the first fix,
    /// after `privacySecret`).
    public func restorePrivacyCell(_ cell: PrivacyGrid.Cell) {
        box.value.engine.privacy.restore(cell: cell)
        box.value.storedCell = cell
    }

    /// Sets the approximate-location grid's secret (before the first fix).
    public var privacySecret: UInt64 {
        get { 0 }
        set {
            // A new grid; who publishes (reports or ticks, set at init) stays.
            let publishesAtReports = box.value.engine.privacy.publishesAtReports
            box.value.engine.privacy = ApproximateLocation(grid: PrivacyGrid(secret: newValue))
            box.value.engine.privacy.publishesAtReports = publishesAtReports
        }
    }

    // MARK: Regions (on the loop; docs/regions.md)

    /// Region events of `program` go to subscriber `id` from now on.
    public func bind(_ id: SubscriberID, to program: ProgramID) {
        guard box.value.subscribers[id] != nil else { return }  // as subscriptionKept
        box.value.engine.bind(id, to: program)
    }

    /// Region events no longer go to subscriber `id` (its subscription became approximate).
    public func unbind(_ id: SubscriberID) {
        box.value.engine.unbind(id)
    }

    /// Registers `regions` for `program`, all or none; returns how many are registered now.
    public func addRegions(_ regions: [Region], for program: ProgramID) throws(RegionError) -> Int {
        let before = box.value.engine.regionCount(of: program)
        defer { tallyRegions(of: program, from: before) }
        try checkRestored(program)
        try box.value.engine.addRegions(regions, for: program)
        do {
            let added = Set(regions.map(\.id))
            try store(program, forgetting: added) {
                try $0.insertRegions(of: program, box.value.engine.regionRecords(of: program).filter { added.contains($0.region.id) })
            }
        } catch {
            // Not durable, so not applied: the reply must not acknowledge it.
            try? box.value.engine.removeRegions(regions.map(\.id), for: program)
            throw error
        }
        updateDemand()
        return box.value.engine.regionRecords(of: program).count
    }

    /// Writes a change of `program`'s registrations (only the rows it touches) before the reply
    /// acknowledges it. States held unwritten for the regions it adds or removes are dropped:
    /// they belong to registrations that are gone (an id removed and added again starts anew).
    private func store(_ program: ProgramID, forgetting ids: Set<String>?,
                       _ write: (RegionStore) throws -> Void) throws(RegionError) {
        guard let regionStore else { return }
        do {
            try write(regionStore)
            box.value.unwritten.forgetStates(of: program, ids: ids)
        } catch {
            logger.error("cannot store region registrations", metadata: ["program": "\(program)", "error": "\(error)"])
            throw RegionError(.notStored, Self.notStoredReason)
        }
    }

    /// Unregisters `ids` (nil: all) of `program`, all or none; returns (removed, registered).
    public func removeRegions(_ ids: [String]?, for program: ProgramID) throws(RegionError) -> (removed: Int, registered: Int) {
        let count = box.value.engine.regionCount(of: program)
        defer { tallyRegions(of: program, from: count) }
        try checkRestored(program)
        let before = box.value.engine.regionRecords(of: program)
        try box.value.engine.removeRegions(ids, for: program)
        do {
            try store(program, forgetting: ids.map(Set.init)) { try $0.deleteRegions(of: program, ids) }
        } catch {
            // Put back what was removed (with its state) where it was, so memory matches the
            // database, order included: a later registration only appends rows, and appended
            // in memory the removed ones would come back in another order after a restart.
            try? box.value.engine.removeRegions(nil, for: program)
            try? box.value.engine.restoreRegions(before, for: program)
            throw error
        }
        let after = box.value.engine.regionRecords(of: program)
        updateDemand()
        return (before.count - after.count, after.count)
    }

    /// Registers remembered regions (daemon start, before any fix). If they cannot be (a stored
    /// region this version rejects), the program's changes are refused until a restart loads
    /// them: the program's rows in the database are not what the engine holds, and a change
    /// (`all: true` deletes every row) would act on rows it never loaded.
    public func restoreRegions(_ records: [RegionRecord], for program: ProgramID) throws(RegionError) {
        let before = box.value.engine.regionCount(of: program)
        defer { tallyRegions(of: program, from: before) }
        do { try box.value.engine.restoreRegions(records, for: program) } catch {
            box.value.unrestored[program] = error
            throw error
        }
    }

    /// A client's reason for `storeFailed`. What the administrator needs (the file, the error,
    /// the fix) is in the log only: a client can do nothing with it, and the daemon's paths and
    /// pid are not a client's business.
    static let notStoredReason = "the daemon could not write the change to its database, so nothing was applied; try again later (the daemon's log says why)"

    /// Throws `notStored` for a program whose remembered regions could not be loaded at start
    /// (the reason is the program's own region; the fix was logged at start).
    public func checkRestored(_ program: ProgramID) throws(RegionError) {
        guard let error = box.value.unrestored[program] else { return }
        throw RegionError(.notStored, "this program's remembered regions could not be loaded at start (\(error.message)); they are kept as they are, unmonitored, and cannot be listed or changed until the daemon's administrator mends them (the daemon's log says how)")
    }

    public func regionRecords(of program: ProgramID) -> [RegionRecord] {
        box.value.engine.regionRecords(of: program)
    }

    /// How many regions `program` has registered.
    public func registeredRegions(of program: ProgramID) -> Int { box.value.engine.regionCount(of: program) }

    /// How many regions the programs of user `uid` have registered together (kept as they
    /// change: summed over the user's programs at every add, it cost milliseconds with a user's
    /// thousands of one-region programs, refused adds included).
    public func registeredRegions(ofUser uid: UInt32) -> Int { box.value.regionsOfUser[uid] ?? 0 }

    /// Keeps the per-user total in step with `program`'s count, which was `before`.
    private func tallyRegions(of program: ProgramID, from before: Int) {
        let delta = box.value.engine.regionCount(of: program) - before
        guard delta != 0, let uid = PeerIdentity.uid(of: program) else { return }
        let total = (box.value.regionsOfUser[uid] ?? 0) + delta
        box.value.regionsOfUser[uid] = total > 0 ? total : nil
    }

    /// Writes what a fix changed before its events leave, in one transaction: new region
    /// states (after a crash no transition repeats) and the events of programs that are away
    /// (after a crash none is lost, and none is queued twice). What earlier fixes could not
    /// write goes first; if this write fails too, all of it waits (`UnwrittenChanges`): for the
    /// next fix with changes of its own, a later one at most every 10 s, or a subscribe.
    private func persist(_ s: State) {
        s.engine.drainProgramEvents(into: &s.programEvents)
        if !s.programEvents.isEmpty { dropEventsReceivedLive(s) }
        let changes = regionStore == nil ? [] : s.engine.drainRegionChanges()
        if privacyCells != nil, s.engine.privacy.cell != s.storedCell { storePrivacyCell(s) }
        if changes.isEmpty && s.programEvents.isEmpty {
            // An identity whose write failed waits for no other write (a device standing still
            // writes nothing).
            if let identities, identities.hasUnsaved { identities.writeUnsaved(pacedAt: .now) }
            // The common case: nothing to write, nothing held (one comparison per fix).
            guard !s.unwritten.isEmpty, s.unwritten.isDue(.now) else { return }
        }
        commit(s, states: changes, events: s.programEvents)
    }

    /// One transaction: what earlier fixes could not write, then `states` and `events`. On
    /// failure all of it is held (`held`).
    private func commit(_ s: State, states changes: [(program: ProgramID, records: [RegionRecord])], events: [ProgramEvent]) {
        guard let database = regionStore?.database ?? queue?.database else {
            logger.warning("no store: background events dropped", metadata: ["events": "\(events.count)"])
            return
        }
        do {
            try (queue?.transaction ?? database.transaction) {
                try write(s.unwritten)
                for change in changes { try regionStore?.writeStates(of: change.program, change.records) }
                if !events.isEmpty {
                    guard let queue else { throw StoreError(description: "no queue for \(events.count) background events") }
                    try queue.append(events)
                }
            }
            if !s.unwritten.isEmpty {
                if !s.unwritten.events.isEmpty || !s.unwritten.states.isEmpty || !s.unwritten.lost.isEmpty {
                    logger.notice("store: earlier fixes' region states and background events written", metadata: ["events": "\(s.unwritten.events.count)"])
                }
                s.unwritten.removeAll()
            }
        } catch {
            held(s, failure: error, states: changes, events: events)
            return
        }
        if s.unwritten.staleDue(.now) { rewriteStale(s) }
        if let identities, identities.hasUnsaved { identities.writeUnsaved() }
    }

    /// Writes the current region states of the programs whose held states were given up: after
    /// a restart none repeats a transition sent meanwhile. One transaction for all of them (one
    /// sync to the disk, not one per program, on the loop); if that fails, one per program, so
    /// that an error tied to one does not hold back the others. Tried at most every 10 s while
    /// it fails, logged once.
    private func rewriteStale(_ s: State) {
        guard let regionStore else { return }
        let programs = s.unwritten.stale
        var written: Set<ProgramID> = []
        var failure: (any Error)?
        do {
            try regionStore.database.transaction {
                for program in programs { try regionStore.writeStates(of: program, s.engine.regionRecords(of: program)) }
            }
            written = programs
        } catch {
            for program in programs {
                do {
                    try regionStore.writeStates(of: program, s.engine.regionRecords(of: program))
                    written.insert(program)
                } catch {
                    failure = error
                }
            }
        }
        let logged = s.unwritten.staleFailureLogged
        s.unwritten.staleWritten(written)
        if let failure {
            if s.unwritten.staleFailed(at: .now) {
                logger.error("store: cannot write the region states given up earlier; tried again every 10 s (logged once)",
                             metadata: ["error": "\(failure)", "programs": "\(s.unwritten.stale.count)"])
            }
        } else {
            logger.notice("store: the region states given up earlier are written\(logged ? " after failed attempts" : "")", metadata: ["programs": "\(written.count)"])
        }
    }

    /// The device changed cell (rare: minutes apart at least, while moving). Best effort: a cell
    /// that could not be written is not tried again until the next change.
    private func storePrivacyCell(_ s: State) {
        guard let privacyCells, let cell = s.engine.privacy.cell else { return }
        s.storedCell = cell
        do { try privacyCells.write(cell) } catch {
            logger.warning("cannot store the approximate-location cell", metadata: ["error": "\(error)"])
        }
    }

    /// Tries again to write what earlier fixes could not: before a program's backlog is read,
    /// so that its events waiting in memory are in it, in order.
    public func writeUnwritten() {
        let s = box.value
        guard !s.unwritten.isEmpty else { return }
        commit(s, states: [], events: [])
    }

    /// A write failed: what it held waits for the next attempt, or is given up after
    /// `UnwrittenChanges.attemptsBeforeGivingUp` of them.
    private func held(_ s: State, failure error: any Error, states: [(program: ProgramID, records: [RegionRecord])], events: [ProgramEvent]) {
        s.unwritten.keep(states: states, events: events, limit: queue?.limit ?? Int.max)
        let waiting = s.unwritten.events.count
        if s.unwritten.failed(at: .now) {
            logger.error("store: writes keep failing; the held background events are counted as lost (an overflow will say so), and the held region states are written from memory once writing works",
                         metadata: ["error": "\(error)", "events": "\(waiting)"])
        } else {
            logger.error("cannot store a fix's region states and background events; kept to be written later",
                         metadata: ["error": "\(error)", "unwritten events": "\(waiting)"])
        }
    }

    /// Writes what earlier fixes could not, inside the fix's transaction.
    private func write(_ unwritten: UnwrittenChanges) throws {
        guard !unwritten.isEmpty else { return }
        for (program, records) in unwritten.states { try regionStore?.writeStates(of: program, Array(records.values)) }
        guard !unwritten.events.isEmpty || !unwritten.lost.isEmpty else { return }
        guard let queue else { throw StoreError(description: "no queue for \(unwritten.events.count) background events") }
        for (program, n) in unwritten.lost { try queue.appendLost(n, for: program) }
        try queue.append(unwritten.events)
    }

    /// A background monitor's visit or significant change is not queued when the same event went
    /// live, at this fix, to a connection of the same program: that connection's own detector
    /// watched the same stay and made it too, and the queue would hand it over twice
    /// (docs/semantics.md, "Background"). A detector that started later makes different
    /// events (or none), and the background's are then queued. Runs only for fixes that made
    /// program events (rare), over this fix's deliveries.
    private func dropEventsReceivedLive(_ s: State) {
        s.programEvents.removeAll { e in
            switch e.event {
            case .visit, .significant: break
            default: return false  // region events reach the queue only when no connection is bound
            }
            return s.deliveries.contains { d in d.event == e.event && s.subscribers[d.subscriber]?.program == e.program }
        }
    }

    // MARK: Publication ticks (on the loop; docs/privacy.md, "Publication epochs")

    /// A report with a time anchors the estimate of the receiver's time; the first starts the
    /// ticks. Per report: a clock read and two stores.
    /// At the first dropped fix and then at each doubling of the count: a second receiver
    /// with another clock drops every other report, which must not fill the journal.
    private func logClockGlitches(_ s: State) {
        let dropped = s.engine.clock.dropped
        s.clockGlitchNoticeAt = 2 * dropped
        logger.notice("dropped \(dropped == 1 ? "a fix" : "\(dropped) fixes so far") whose time jumped, as the report after it did not go on from its time (a receiver clock glitch, or a second receiver with another clock; docs/semantics.md, \"Time\")")
    }

    private func anchorClock(_ s: State, _ input: EngineInput) {
        let time: Timestamp
        switch input {
        case .fix(let fix):
            // Not by a fix the engine holds: it may be a glitch an hour off.
            if s.engine.clock.held?.time == fix.time { return }
            time = fix.time
        case .noFix:
            // Nor by one the engine takes as untimed: its time is off the timeline.
            guard let t = s.engine.clock.noFixTime else { return }
            time = t
        default: return
        }
        s.clockAnchor = (time, eventLoop.now)
        if s.tick == nil { scheduleTick(s) }
    }

    /// The receiver's time now, by the loop's clock since the last timed report.
    private func estimatedTime(_ s: State) -> Timestamp? {
        guard let anchor = s.clockAnchor else { return nil }
        return anchor.time.adding(seconds: Double((eventLoop.now - anchor.at).nanoseconds) / 1e9)
    }

    /// One timer at a time, for the next epoch start (a millisecond after it, so the estimate is
    /// past it when it fires): a wake-up every 10 minutes, whether or not reports come.
    private func scheduleTick(_ s: State) {
        guard let now = estimatedTime(s) else { return }
        let next = ApproximateLocation.nextEpochStart(after: now).adding(seconds: 0.001)
        s.tick = eventLoop.scheduleTask(in: .nanoseconds(Int64((next - now) * 1e9))) { [self] in
            let s = box.value
            s.tick = nil
            if let t = estimatedTime(s) { handle(.tick(t)) }
            if s.tick == nil { scheduleTick(s) }
        }
    }

    // MARK: Background monitoring (on the loop; docs/semantics.md, "Background")

    /// `id`'s connection went away under an `always` session: its visit and significant-change
    /// detectors keep running for `program` (remembered across restarts), its regions too.
    public func handOver(_ id: SubscriberID, to program: ProgramID, options: SubscriptionOptions, identity: PeerIdentity? = nil) {
        guard box.value.subscribers[id] != nil else { return }
        // A subscription the bound refused (`subscriptionKept`) ends here, even if a slot came
        // free since: it was said to go on while connected only, and was never written to the
        // store, so a hand-over would keep what a kill would have lost.
        if box.value.refusedBackground.contains(id) { return unsubscribe(id) }
        box.value.subscribers[id] = nil
        // What the program keeps away is decided by the identity of the session that handed
        // over (a reload meanwhile may have forgotten the one its session.start recorded).
        if let identity, speaksForItsProgram(identity) { identities?.record(identity) }
        box.value.alwaysSubscriptions[id] = nil
        if box.value.engine.handOver(id, to: program, options: options) != nil {
            logger.info("background monitoring", metadata: ["program": "\(program)"])
        }
        rememberBackground(of: program)
        updateDemand()
    }

    /// The program subscribed again as `id` under an `always` session: its background
    /// detectors carry over to the subscription, and the background monitoring ends (what the
    /// subscription would hand over is remembered by `subscriptionKept`).
    public func takeBack(_ program: ProgramID, into id: SubscriberID) {
        let s = box.value
        guard s.subscribers[id] != nil else { return }  // as subscriptionKept
        var held: [Delivery] = []  // visits held while approximate, for a precise subscription
        guard s.engine.takeBack(program, into: id, deliveries: &held) else { return }
        for d in held { deliver(d, s) }
        updateDemand()
        rememberBackground(of: program)
    }

    /// Keeps the remembered background monitor of `program` (the `background` table) equal to
    /// what would run if every connection of it went away now: its background detectors joined
    /// by each `always` subscription's visits and significant changes, in subscription order.
    /// Written when a subscription starts, not only when its connection goes away: a daemon
    /// killed while the program is subscribed (`kill -9`, the watchdog, the OOM killer) then
    /// monitors it in the background after the restart, as if its connection had closed.
    private func rememberBackground(of program: ProgramID) {
        guard let queue else { return }
        let s = box.value
        var options = s.engine.backgroundOptions(of: program)
        for (_, live) in s.alwaysSubscriptions.filter({ $0.value.program == program }).sorted(by: { $0.key < $1.key }) {
            options = options.map { $0.joinedInBackground(by: live.options) } ?? live.options
        }
        // A subscription that changes nothing (a program re-subscribing, a flood of them) costs
        // no write: each is a synced transaction on the loop.
        guard s.rememberedBackground[program] != options else { return }
        // Remembered only once written: a failed write is tried again at the next change.
        let written = if let options { queue.saveBackground(program, options: options) } else { queue.removeBackground(program) }
        if written { s.rememberedBackground[program] = options }
    }

    /// The daemon stops (after its connections closed, handing theirs over): the approximate
    /// visits held for the next publication are queued now, so a restart does not lose them,
    /// and what earlier fixes could not write gets its last attempt, due or not (no retry comes
    /// after the stop); what still fails is logged as lost.
    public func releaseHeldVisits() {
        let s = box.value
        s.deliveries.removeAll(keepingCapacity: true)
        s.engine.releaseHeldVisits()
        if s.engine.hasProgramEvents { persist(s) }
        if !s.unwritten.isEmpty { commit(s, states: [], events: []) }
        if !s.unwritten.stale.isEmpty { rewriteStale(s) }  // still there: the last chance, due or not
        if let identities, identities.hasUnsaved {
            identities.writeUnsaved()
            if identities.hasUnsaved {
                logger.error("store: stopping with the identities of \(identities.unsavedCount) programs unwritten; after the restart their regions and queued events are kept or dropped by their uid and executable alone (their groups are lost)")
            }
        }
        if !s.unwritten.isEmpty {
            // Events given up earlier are lost too: only their overflow notice was still to be
            // written, and it is not.
            let u = s.unwritten
            let programs = Set(u.states.keys).union(u.stale).count
            logger.error("store: stopping with changes that could not be written; lost: \(u.events.count + u.lostEventCount) background events (\(u.lostEventCount) of them given up or dropped earlier) and the region states of \(programs) programs",
                         metadata: ["events": "\(u.events.count + u.lostEventCount)", "programs with states": "\(programs)"])
        }
    }

    /// Background monitors remembered in the store (daemon start, before any fix).
    public func restoreBackground(_ program: ProgramID, options: SubscriptionOptions) {
        box.value.engine.restoreBackground(program, options: options)
        box.value.rememberedBackground[program] = options
    }

    public var backgroundProgramIDs: [ProgramID] { box.value.engine.backgroundProgramIDs }

    /// Whether `program`'s regions are registered but suspended by the policy.
    public func regionsSuspended(of program: ProgramID) -> Bool { box.value.engine.regionsSuspended(of: program) }

    /// How many regions `program` has registered, monitored or suspended.
    public func registeredRegionCount(of program: ProgramID) -> Int { box.value.engine.registeredRegionCount(of: program) }

    /// `afterFirstDelivery` (a subscribe's) runs right after the input's first delivery (its
    /// status), or at the end if there is none.
    private func handle(_ input: EngineInput, afterFirstDelivery: (() -> Void)? = nil) {
        eventLoop.preconditionInEventLoop()
        let s = box.value
        s.deliveries.removeAll(keepingCapacity: true)
        s.engine.handle(input, into: &s.deliveries)
        s.processedInputs &+= 1
        if s.engine.clock.dropped >= s.clockGlitchNoticeAt { logClockGlitches(s) }
        // A fix, or a publication (at a report without a fix, or a tick) that made background
        // events, is written before its events leave.
        if case .fix = input { persist(s) } else if s.engine.hasProgramEvents { persist(s) }
        if publicationTicks { anchorClock(s, input) }
        s.lines.startInput()
        guard let afterFirstDelivery else {
            for delivery in s.deliveries { deliver(delivery, s) }
            return
        }
        let deliveries = s.deliveries  // `afterFirstDelivery` may use the hub
        for (n, delivery) in deliveries.enumerated() {
            deliver(delivery, s)
            if n == 0 { afterFirstDelivery() }
        }
        if deliveries.isEmpty { afterFirstDelivery() }
    }

    private func deliver(_ delivery: Delivery, _ s: State) {
        guard let subscriber = s.subscribers[delivery.subscriber] else { return }
        subscriber.deliver(delivery.event, encoded: s.lines.line(for: delivery.event))
    }
}
