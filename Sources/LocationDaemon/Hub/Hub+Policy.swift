import LocationCore
import LocationProtocol
import Logging
import NIOCore

/// The access policy (on the loop; docs/privacy.md).
extension Hub {
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
        var programs = Set(s.engine.regionProgramIDs).union(s.engine.backgroundProgramIDs).union(s.engine.awayProgramIDs)
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
    func needsIdentity(_ program: ProgramID, _ s: State) -> Bool {
        s.engine.hasRegions(of: program) || s.engine.backgroundAccuracy(of: program) != nil
            || s.rememberedBackground[program] != nil || queue?.hasEvents(of: program) == true
            || s.engine.awayAccuracy(of: program) != nil || s.rememberedAway[program] != nil
            || s.unwritten.events(of: program) > 0 || s.alwaysSubscriptions.values.contains { $0.program == program }
    }

    func apply(_ rule: PolicyRule, to program: ProgramID) {
        let s = box.value
        var meta: Logger.Metadata = ["program": "\(program)", "rule": "\(rule.name)",
                                     "max": "\(rule.authorization.rawValue) \(rule.accuracy.rawValue)"]
        if let accuracy = s.engine.backgroundAccuracy(of: program), !rule.keepsBackground(at: accuracy) {
            s.engine.endBackground(program)
            rememberBackground(of: program)
            logger.notice("policy: background monitoring ended", metadata: meta)
        }
        if let accuracy = s.engine.awayAccuracy(of: program), !rule.keepsBackground(at: accuracy) {
            s.engine.endAway(program)
            rememberAway(of: program, options: nil)
            logger.notice("policy: durable subscription away ended", metadata: meta)
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
}
