import LocationCore
import Testing

/// Recent visits (docs/places.md, "Recent visits"): the last `limit` visits of a program, and
/// the newest while it is open, each once.
@Suite struct VisitHistoryTests {
    static let here = Coordinate(latitude: 48.1, longitude: 11.5)

    static func visit(_ kind: Visit.Kind, _ arrival: Int64, _ departure: Int64? = nil, place: UInt64? = nil) -> Visit {
        var v = Visit(kind: kind, arrival: Timestamp(seconds: 1_700_000_000 + arrival),
                      departure: departure.map { Timestamp(seconds: 1_700_000_000 + $0) }, coordinate: here, horizontalAccuracy: 10)
        v.place = place
        return v
    }

    static func arrivals(_ h: VisitHistory) -> [Int64] { h.visits.map { $0.arrival.nanoseconds / 1_000_000_000 - 1_700_000_000 } }

    @Test func aDepartureReplacesItsArrivalAndEachVisitIsKeptOnce() {
        var h = VisitHistory(limit: 10)
        var changed: [Bool] = []
        changed.append(h.record(Self.visit(.arrival, 0, place: 1)))
        changed.append(h.record(Self.visit(.arrival, 0, place: 1)))  // another connection of the program
        changed.append(h.record(Self.visit(.departure, 0, 600, place: 1)))
        changed.append(h.record(Self.visit(.departure, 0, 600, place: 1)))
        changed.append(h.record(Self.visit(.arrival, 0, place: 1)))  // a late arrival never undoes the departure
        #expect(changed == [true, false, true, false, false])
        #expect(h.visits == [Self.visit(.departure, 0, 600, place: 1)])
    }

    @Test func pastTheLimitTheOldestGoAndTheOpenVisitIsNotCounted() {
        var h = VisitHistory(limit: 3)
        for n in 0..<5 { h.record(Self.visit(.departure, Int64(n) * 1000, Int64(n) * 1000 + 600)) }
        #expect(Self.arrivals(h) == [2000, 3000, 4000])
        h.record(Self.visit(.arrival, 5000))
        #expect(Self.arrivals(h) == [2000, 3000, 4000, 5000])  // three completed and the open one
        h.record(Self.visit(.departure, 5000, 5600))
        #expect(Self.arrivals(h) == [3000, 4000, 5000])
        #expect(h.visits.allSatisfy { $0.kind == .departure })
    }

    @Test func visitsAreInArrivalOrderWhateverOrderTheyCome() {
        var h = VisitHistory(limit: 3)
        for a: Int64 in [3000, 1000, 4000, 2000, 0] { h.record(Self.visit(.departure, a, a + 600)) }
        #expect(Self.arrivals(h) == [2000, 3000, 4000])
    }

    /// As the store kept it, with the limit lowered since: the oldest go.
    @Test func aRestoredHistoryIsTrimmedToTheLimit() {
        let kept = (0..<6).map { Self.visit(.departure, Int64(5 - $0) * 1000, Int64(5 - $0) * 1000 + 600) } + [Self.visit(.arrival, 9000)]
        let h = VisitHistory(limit: 2, visits: kept)
        #expect(Self.arrivals(h) == [4000, 5000, 9000])
        #expect(VisitHistory(limit: 0).limit == 1)
    }
}
