import Glibc
import NIOCore

/// The peer process of a Unix socket connection (`SO_PEERCRED`, taken at connect time).
public struct PeerCredentials: Hashable, Sendable, CustomStringConvertible {
    public var pid: Int32
    public var uid: UInt32
    public var gid: UInt32
    /// The supplementary groups at connect time (`SO_PEERGROUPS`); nil when the kernel did not
    /// give them (then they are read from /proc/PID/status: `PeerIdentity.resolve`).
    public var groups: [UInt32]?
    public init(pid: Int32, uid: UInt32, gid: UInt32, groups: [UInt32]? = nil) {
        self.pid = pid; self.uid = uid; self.gid = gid; self.groups = groups
    }
    public var description: String { "pid=\(pid) uid=\(uid) gid=\(gid)" }
}

// Read from the socket at connect (`Connection.channelActive`).
extension Connection {
    /// Linux `struct ucred` (glibc hides it behind _GNU_SOURCE, so it is not imported).
    struct UCred: Sendable {
        var pid: Int32 = 0
        var uid: UInt32 = 0
        var gid: UInt32 = 0
    }

    /// Linux `SO_PEERCRED`.
    static let soPeerCred: CInt = 17

    /// Linux `SO_PEERGROUPS` (4.13): the peer's supplementary groups, as `SO_PEERCRED` at connect.
    static let soPeerGroups: CInt = 59

    /// No room at all: `SO_PEERGROUPS` succeeds only for a peer without supplementary groups.
    struct NoGroups: Sendable {}

    static func peerCredentials(of channel: any Channel) -> PeerCredentials? {
        guard let provider = channel as? any SocketOptionProvider else { return nil }
        guard var credentials = option(UCred.self, soPeerCred, of: provider).map({
            PeerCredentials(pid: $0.pid, uid: $0.uid, gid: $0.gid)
        }) else { return nil }
        credentials.groups = peerGroups(of: provider)
        return credentials
    }

    /// The groups the kernel recorded at connect. Not read from /proc/PID/status after the
    /// accept: by then the process may be gone (it connected, left the socket to a child and
    /// exited), leaving no groups to match a rule that denies one, or its pid reused by a
    /// process with other groups (docs/privacy.md, "Identity"). Nil if the kernel does not say
    /// (before 4.13, or more than 1024 groups).
    static func peerGroups(of provider: any SocketOptionProvider) -> [UInt32]? {
        if option(NoGroups.self, soPeerGroups, of: provider) != nil { return [] }
        // Zero-filled past the groups, which the kernel keeps sorted: a 0 first is gid 0.
        guard let list = option(InlineArray<1024, UInt32>.self, soPeerGroups, of: provider) else { return nil }
        var groups: [UInt32] = list[0] == 0 ? [0] : []
        for i in list.indices where list[i] != 0 { groups.append(list[i]) }
        return groups
    }

    /// A socket option, read synchronously on the channel's loop; nil when the call fails.
    static func option<Value: Sendable>(_: Value.Type, _ name: CInt, of provider: any SocketOptionProvider) -> Value? {
        let future: EventLoopFuture<Value> = provider.unsafeGetSocketOption(
            level: NIOBSDSocket.OptionLevel(rawValue: SOL_SOCKET), name: NIOBSDSocket.Option(rawValue: name))
        // On the channel's loop the option is read synchronously, so the future is complete.
        var result: Value?
        future.assumeIsolated().whenSuccess { result = $0 }
        return result
    }
}
