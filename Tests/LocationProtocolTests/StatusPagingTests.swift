import LocationCore
import LocationProtocol
import Testing

/// The status reply's `connections` in pages of one line each (docs/protocol.md, "Status reply").
@Suite struct StatusPagingTests {
    static func entry(_ n: UInt64) -> StatusReply.ConnectionEntry {
        StatusReply.ConnectionEntry(connection: n, pid: Int32(1000 + n), uid: 1000, gid: 1000,
                                    executable: "/usr/lib/some-vendor/bin/a-tracking-program-\(n)", rule: "trackers",
                                    session: nil, subscribed: true)
    }

    static func reply(_ page: (entries: ArraySlice<StatusReply.ConnectionEntry>, next: Int?)) -> StatusReply {
        var r = StatusReply(id: .number(7), state: .fix, subscribers: 1000, source: "gpsd localhost:2947", lastFix: nil)
        r.connected = 1000
        r.connectionsShown = .all
        r.connections = Array(page.entries)
        r.next = page.next
        return r
    }

    @Test func everyPageFitsALineAndThePagesAreTheWholeList() throws {
        let all = (1...1000).map { Self.entry(UInt64($0)) }
        let header = Self.reply(([], nil))
        var offset = 0, pages = 0
        var seen: [StatusReply.ConnectionEntry] = []
        while true {
            let page = StatusConnectionsCodec.page(all, from: offset, of: header)
            let line = ServerMessage.statusReply(Self.reply(page)).line
            #expect(line.utf8.count - 1 <= maxLineBytes)
            guard case .statusReply(let decoded) = try ServerMessage.decode(String(line.dropLast())) else { Issue.record("\(line)"); return }
            #expect(decoded.next == page.next && decoded.connections == Array(page.entries))
            seen += page.entries
            pages += 1
            guard let next = page.next else { break }
            #expect(next == Int(all[seen.count].connection))
            offset = next
        }
        #expect(seen == all)
        #expect(pages >= 3)
    }

    /// Connections closing between two pages neither repeat nor hide the ones that stay: a page
    /// starts at a connection number, not a position.
    @Test func connectionsComingAndGoingBetweenPagesAreNotRepeatedOrSkipped() throws {
        let all = (1...1000).map { Self.entry(UInt64($0)) }
        let first = StatusConnectionsCodec.page(all, from: 0, of: Self.reply(([], nil)))
        let next = try #require(first.next)
        let later = all.filter { $0.connection % 7 != 0 } + [Self.entry(1001)]  // some closed, one opened
        let second = StatusConnectionsCodec.page(later, from: next, of: Self.reply(([], nil)))
        #expect(second.entries.first?.connection == UInt64(next))
        #expect(Set(first.entries.map(\.connection)).isDisjoint(with: second.entries.map(\.connection)))
    }

    @Test func theRequestCarriesItsOffset() throws {
        var out: [UInt8] = []
        Request.status(id: .number(3), offset: 812).append(to: &out)
        #expect(String(decoding: out, as: UTF8.self) == #"{"type":"status","offset":812,"id":3}"# + "\n")
        #expect(try Request.decode(#"{"type":"status","id":3,"offset":812}"#) == .status(id: .number(3), offset: 812))
        #expect(try Request.decode(#"{"type":"status"}"#) == .status(id: nil, offset: 0))
        do {
            _ = try Request.decode(#"{"type":"status","offset":-1}"#)
            Issue.record("a negative offset was accepted")
        } catch {
            #expect(error.message.contains("offset") && error.message.contains("connections"), "\(error.message)")
        }
    }
}
