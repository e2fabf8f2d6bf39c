import LocationCore
import LocationProtocol
import Logging
import NIOCore

/// The per-user bound on background monitoring (on the loop; docs/configuration.md,
/// store.max_background_programs_per_user).
extension Hub {
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
    func programsKeepingBackground() -> Set<ProgramID> {
        let s = box.value
        var programs = Set(s.engine.backgroundProgramIDs).union(s.rememberedBackground.keys)
            .union(s.engine.awayProgramIDs).union(s.rememberedAway.keys)
        for kept in s.alwaysSubscriptions.values { programs.insert(kept.program) }
        return programs
    }

    /// How many programs of user `uid` keep background monitoring.
    public func backgroundPrograms(ofUser uid: UInt32) -> Int {
        programsKeepingBackground().count { PeerIdentity.uid(of: $0) == uid }
    }
}
