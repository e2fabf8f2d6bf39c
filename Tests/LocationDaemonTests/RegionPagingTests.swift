import LocationClient
import LocationCore
import LocationProtocol
import Testing
@testable import LocationDaemon

/// `regions.list` / `regions.state` replies come in pages that fit the line limit (300 small
/// regions overflow one 65,536-byte line).
@Suite(.serialized, .timeLimit(.minutes(5))) struct RegionPagingTests {
    static func regions(_ n: Int, metadataBytes: Int) -> [Region] {
        (0..<n).map { i in
            Region(id: "r\(i)", center: Coordinate(latitude: 50 + Double(i) * 1e-3, longitude: 8.5), radius: 100,
                   metadata: "\"" + String(repeating: "x", count: metadataBytes) + "\"")
        }
    }

    @Test func pagesFitTheLineLimitAndCoverEveryRecordOnce() {
        let records = Self.regions(500, metadataBytes: 1000).map { RegionRecord(region: $0, state: .inside) }
        var offset = 0, seen: [RegionRecord] = []
        var pages = 0
        while true {
            let page = RegionCodec.page(records, from: offset, id: .string(String(repeating: "i", count: 300)))
            var line: [UInt8] = []
            ServerMessage.regions(id: .string(String(repeating: "i", count: 300)), regions: Array(page.records), next: page.next).append(to: &line)
            #expect(line.count - 1 <= LocationProtocol.maxLineBytes)
            #expect(!page.records.isEmpty)
            seen += page.records
            pages += 1
            guard let next = page.next else { break }
            offset = next
        }
        #expect(seen == records)
        #expect(pages == 9)  // ≈ 1.1 KB per record, ≈ 59 per page
        #expect(RegionCodec.page(records, from: 600, id: nil).records.isEmpty)
        #expect(RegionCodec.page([], from: 0, id: nil).next == nil)
    }

    @Test func aProgramWithManyLargeRegionsReadsThemAllOverTheSocket() async throws {
        let h = try await ServerHarness.start()
        defer { h.stopIfRunning() }
        let client = try await LocationClient.connect(path: h.path)
        defer { client.close() }
        try await client.startSession(.always)
        let all = Self.regions(400, metadataBytes: 1000)
        for chunk in stride(from: 0, to: all.count, by: 40) {
            _ = try await client.request { .regionsAdd(id: $0, regions: Array(all[chunk..<min(chunk + 40, all.count)])) }
        }
        guard case .regions(_, let first, let next) = try await client.request({ .regionsList(id: $0) }) else {
            Issue.record("no regions reply"); return
        }
        #expect(next == first.count && first.count < all.count)
        #expect(try await client.regions().map(\.region) == all)
        let some = ["r399", "r0", "r200"]
        #expect(try await client.regions(some).map(\.region.id) == some)
    }
}

/// A registration the database refuses is not acknowledged and not applied.
@Suite(.serialized, .timeLimit(.minutes(5))) struct RegionStoreFailureTests {
    @Test func aWriteTheDatabaseRefusesIsAnErrorAndChangesNothing() async throws {
        let store = try RegionStore(database: Database(path: ":memory:"))
        let h = try await ServerHarness.start(store: store)
        defer { h.stopIfRunning() }
        let client = try await LocationClient.connect(path: h.path)
        defer { client.close() }
        try await client.startSession(.always)
        let home = Region(id: "home", center: Coordinate(latitude: 50, longitude: 8.5), radius: 100)
        _ = try await client.request { .regionsAdd(id: $0, regions: [home]) }
        try await h.hub.eventLoop.submit { try store.database.exec("PRAGMA query_only = 1") }.get()
        do {
            _ = try await client.request { .regionsAdd(id: $0, regions: [Region(id: "work", center: home.center, radius: 200)]) }
            Issue.record("an unstored registration was acknowledged")
        } catch let e as ProtocolError {
            #expect(e.code == .storeFailed)
            #expect(e.message == Hub.notStoredReason, "\(e.message)")
        }
        await #expect(throws: ProtocolError.self) { _ = try await client.request { .regionsRemove(id: $0, ids: ["home"]) } }
        #expect(try await client.regions().map(\.region.id) == ["home"])
    }
}
