import Glibc

/// The open-file limit (`RLIMIT_NOFILE`): every subscriber holds one descriptor, and systemd
/// (like a login shell) starts services with a soft limit of 1,024, which 1,000 subscribers
/// plus the daemon's own descriptors barely fit. The hard limit is the real ceiling (systemd's
/// default is 524,288; `LimitNOFILE=` in the unit sets both), so at start the daemon raises
/// its soft limit to the hard one (docs/systemd.md, "Open files").
///
/// Safe only because nothing in the daemon uses `select`/`FD_SET`, which break on descriptors
/// ≥ 1,024: NIO uses epoll, and the gpsd connection is a NIO channel (libgps only decodes its
/// lines; its `gps_waiting` uses FD_SET, which aborts on such a descriptor).
public struct DescriptorLimit: Hashable, Sendable, CustomStringConvertible {
    public var soft: UInt64
    public var hard: UInt64

    public init(soft: UInt64, hard: UInt64) {
        self.soft = soft
        self.hard = hard
    }

    /// Below this many descriptors the daemon logs a notice: 1,000 subscribers, the daemon's own
    /// (listening socket, gpsd, store, journal, epoll, eventfds) and room for clients that come
    /// and go — the kernel frees a descriptor only when its connection is closed.
    public static let useful: UInt64 = 2048

    /// `RLIM_INFINITY` (all bits set on Linux; the C macro does not import into Swift).
    public static let unlimited = UInt64.max

    /// What the kernel accepts as a soft limit when the hard one is "unlimited": the default
    /// `fs.nr_open` (RLIMIT_NOFILE may never exceed it).
    static let unlimitedCeiling: UInt64 = 1 << 20

    /// The soft limit to set given the current limits, or nil to leave them as they are: the
    /// hard limit, never lower than the current soft one.
    public static func raisedSoft(from current: DescriptorLimit) -> UInt64? {
        let target = current.hard == unlimited ? unlimitedCeiling : current.hard
        return target > current.soft ? target : nil
    }

    /// Whether `limit` leaves too few descriptors for 1,000 subscribers (`useful`).
    public static func isShort(_ limit: DescriptorLimit) -> Bool { limit.soft < useful }

    public var description: String {
        func text(_ v: UInt64) -> String { v == Self.unlimited ? "unlimited" : "\(v)" }
        return "\(text(soft)) soft, \(text(hard)) hard"
    }

    // MARK: The system calls (thin)

    /// The process's current limit.
    public static func current() -> DescriptorLimit? {
        var r = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &r) == 0 else { return nil }
        return DescriptorLimit(soft: UInt64(r.rlim_cur), hard: UInt64(r.rlim_max))
    }

    /// Raises the soft limit per `raisedSoft`; returns the limits before and after, and the
    /// error of a refused `setrlimit` (glibc issues `prlimit64`, which systemd's
    /// `SystemCallFilter=~@resources` leaves allowed).
    public static func raise() -> (before: DescriptorLimit, after: DescriptorLimit, error: String?)? {
        guard let before = current() else { return nil }
        guard let soft = raisedSoft(from: before) else { return (before, before, nil) }
        var r = rlimit(rlim_cur: rlim_t(soft), rlim_max: rlim_t(before.hard))
        if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &r) != 0 {
            return (before, before, String(cString: strerror(errno)))
        }
        return (before, current() ?? before, nil)
    }
}
