import NIOCore

/// Warnings a user's programs can repeat at will (a refused connection): at most one per user
/// per `interval`, each saying how many were held back since the one before. *Reason:* logged
/// once until the user is below the limit again, a client closing one connection and opening
/// two, over and over, would put a warning per dip into the journal.
struct PacedWarnings {
    let interval: TimeAmount
    /// When each user was last warned about, and how many were held back since.
    private var users: [UInt32: (warned: NIODeadline, held: Int)] = [:]

    init(interval: TimeAmount) { self.interval = interval }

    /// One more for `uid` at `now`: nil when it is held back (counted for the next), otherwise
    /// the warning is due and the result is how many were held back before it.
    mutating func due(_ uid: UInt32, at now: NIODeadline) -> Int? {
        if let last = users[uid], now - last.warned < interval {
            users[uid]!.held += 1
            return nil
        }
        let held = users[uid]?.held ?? 0
        // Users warned about long ago with nothing held back since are forgotten: the table
        // holds recent ones, and those whose count the next warning owes.
        users = users.filter { now - $0.value.warned < interval || $0.value.held > 0 }
        users[uid] = (now, 0)
        return held
    }
}
