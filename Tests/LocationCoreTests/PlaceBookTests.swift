import LocationCore
import Testing

/// Places (docs/places.md, "Places"): visits within `PlaceBook.radius` of a place's centre are
/// visits of it.
@Suite struct PlaceBookTests {
    static let depot = Coordinate(latitude: 48.1, longitude: 11.5)
    static let day = 86_400.0

    static func visit(_ kind: Visit.Kind, at coordinate: Coordinate, arrival: Double, departure: Double? = nil) -> Visit {
        Visit(kind: kind, arrival: Timestamp(seconds: 1_700_000_000 + Int64(arrival)),
              departure: departure.map { Timestamp(seconds: 1_700_000_000 + Int64($0)) }, coordinate: coordinate, horizontalAccuracy: 10)
    }

    /// Arrival and departure of one stay; returns the place ids both were given.
    static func stay(_ book: inout PlaceBook, at c: Coordinate, from a: Double, to d: Double) -> [UInt64] {
        [book.record(visit(.arrival, at: c, arrival: a)), book.record(visit(.departure, at: c, arrival: a, departure: d))]
    }

    @Test func theSameDepotOnThreeDaysIsOnePlace() {
        var book = PlaceBook()
        var ids: [UInt64] = []
        for (n, shift) in [0.0, 30, -25].enumerated() {
            let start = Double(n) * Self.day + 8 * 3600
            ids += Self.stay(&book, at: north(of: Self.depot, metres: shift), from: start, to: start + 5000)
        }
        #expect(Set(ids) == [1])
        let p = try! #require(book.places.first)
        #expect(book.places.count == 1 && p.name == "p1" && p.visits == 3 && p.totalSeconds == 15_000)
        #expect(p.firstVisit == Timestamp(seconds: 1_700_000_000 + 8 * 3600))
        #expect(p.lastVisit == Timestamp(seconds: 1_700_000_000 + 2 * 86_400 + 8 * 3600 + 5000))
        #expect(Geodesy.distance(p.centre, north(of: Self.depot, metres: 5/3.0)) < 0.5)
    }

    @Test func twoDepots200MetresApartAreTwoPlaces() {
        var book = PlaceBook()
        let a = Self.stay(&book, at: Self.depot, from: 0, to: 600)
        let b = Self.stay(&book, at: north(of: Self.depot, metres: 200), from: 1000, to: 1600)
        let c = Self.stay(&book, at: north(of: Self.depot, metres: 10), from: 2000, to: 2600)
        #expect(a == [1, 1] && b == [2, 2] && c == [1, 1])
        #expect(book.places.map(\.visits) == [2, 1])
    }

    /// A centre is the mean of its visits': it drifts with them, and a visit beyond the radius
    /// of where it has drifted to starts another place.
    @Test func aCentreDriftsWithItsVisits() {
        var book = PlaceBook()
        #expect(Self.stay(&book, at: Self.depot, from: 0, to: 100) == [1, 1])
        #expect(Self.stay(&book, at: north(of: Self.depot, metres: 100), from: 200, to: 300) == [1, 1])
        #expect(Geodesy.distance(book.places[0].centre, north(of: Self.depot, metres: 50)) < 0.5)
        // 130 m from the drifted centre (180 from the first visit): the same place.
        #expect(Self.stay(&book, at: north(of: Self.depot, metres: 180), from: 400, to: 500) == [1, 1])
        #expect(Geodesy.distance(book.places[0].centre, north(of: Self.depot, metres: 280 / 3.0)) < 0.5)
        // 167 m from it: a new place.
        #expect(Self.stay(&book, at: north(of: Self.depot, metres: 260), from: 600, to: 700) == [2, 2])
        // The departure's centre replaces the arrival's.
        var moved = PlaceBook()
        _ = moved.record(Self.visit(.arrival, at: Self.depot, arrival: 0))
        _ = moved.record(Self.visit(.departure, at: north(of: Self.depot, metres: 40), arrival: 0, departure: 900))
        #expect(Geodesy.distance(moved.places[0].centre, north(of: Self.depot, metres: 40)) < 0.5)
    }

    /// The same visit reported by two connections of the program counts once; a departure
    /// whose arrival was never seen counts as a whole visit.
    @Test func aVisitCountsOnce() {
        var book = PlaceBook()
        for _ in 0..<2 { _ = book.record(Self.visit(.arrival, at: Self.depot, arrival: 0)) }
        for _ in 0..<2 { _ = book.record(Self.visit(.departure, at: Self.depot, arrival: 0, departure: 600)) }
        #expect(book.places.map(\.visits) == [1] && book.places[0].totalSeconds == 600)
        #expect(book.record(Self.visit(.departure, at: Self.depot, arrival: 1000, departure: 1300)) == 1)
        #expect(book.places.map(\.visits) == [2] && book.places[0].totalSeconds == 900)
    }

    /// At the limit the place with the fewest visits goes, the least recently visited of them;
    /// ids are never reused.
    @Test func theBoundDropsTheOldestLeastVisited() {
        var book = PlaceBook(limit: 3)
        let spots = (0..<4).map { north(of: Self.depot, metres: Double($0) * 1000) }
        _ = Self.stay(&book, at: spots[0], from: 0, to: 10)
        _ = Self.stay(&book, at: spots[0], from: 100, to: 110)   // p1: 2 visits
        _ = Self.stay(&book, at: spots[1], from: 200, to: 210)   // p2: 1, older
        _ = Self.stay(&book, at: spots[2], from: 300, to: 310)   // p3: 1, newer
        #expect(Self.stay(&book, at: spots[3], from: 400, to: 410) == [4, 4])
        #expect(book.places.map(\.id) == [1, 3, 4])
        #expect(Self.stay(&book, at: spots[1], from: 500, to: 510) == [5, 5])  // p2 is gone: a new place
        #expect(book.places.map(\.id) == [1, 4, 5])
    }

    /// A book kept under a higher bound is cut to a lowered one by the same rule, and goes on
    /// numbering where it was.
    @Test func aLoweredBoundCutsARestoredBook() {
        var book = PlaceBook(limit: 10)
        let spots = (0..<4).map { north(of: Self.depot, metres: Double($0) * 1000) }
        _ = Self.stay(&book, at: spots[0], from: 0, to: 10)
        _ = Self.stay(&book, at: spots[0], from: 100, to: 110)   // p1: 2 visits
        _ = Self.stay(&book, at: spots[1], from: 200, to: 210)   // p2: 1, oldest
        _ = Self.stay(&book, at: spots[2], from: 300, to: 310)   // p3: 1
        _ = Self.stay(&book, at: spots[3], from: 400, to: 410)   // p4: 1, newest, counted last
        var cut = PlaceBook(limit: 2, places: book.places, nextID: book.nextID, counted: book.counted)
        #expect(cut.places.map(\.id) == [1, 4] && cut.counted == book.counted)
        #expect(Self.stay(&cut, at: spots[1], from: 500, to: 510) == [5, 5])
        #expect(cut.places.map(\.id) == [1, 5])
        // The visit counted last was at a place that is gone: it is forgotten with it.
        let cutMore = PlaceBook(limit: 1, places: book.places, nextID: book.nextID, counted: book.counted)
        #expect(cutMore.places.map(\.id) == [1] && cutMore.counted == nil)
    }

    /// Through the engine: a precise subscriber bound to its program gets its visits' places;
    /// an approximate one and an unbound one none; two programs have books of their own.
    @Test func theEngineNamesPlacesOfPreciseProgramsOnly() {
        var engine = Engine()
        var out: [Delivery] = []
        let options = SubscriptionOptions(events: [.visits])
        var approximate = options
        approximate.accuracy = .approximate
        for (n, o) in [options, options, approximate, options].enumerated() { engine.handle(.subscribe(SubscriberID(UInt64(n + 1)), o), into: &out) }
        engine.bind(SubscriberID(1), to: ProgramID("a"))
        engine.bind(SubscriberID(2), to: ProgramID("b"))
        engine.bind(SubscriberID(3), to: ProgramID("c"))  // as the shell never does an approximate one
        for f in BackgroundTests.day { engine.handle(.fix(f), into: &out) }
        func places(_ id: UInt64) -> [UInt64?] {
            out.compactMap { d in
                guard d.subscriber == SubscriberID(id), case .visit(let v) = d.event else { return nil }
                return v.place
            }
        }
        #expect(places(1) == [1, 1, 2, 2, 3])  // 3 arrivals, 2 departures at three places
        #expect(places(2) == places(1))
        #expect(places(3).allSatisfy { $0 == nil } && !places(3).isEmpty)
        #expect(places(4).allSatisfy { $0 == nil } && places(4).count == 5)
        #expect(engine.places(of: ProgramID("a")).map(\.visits) == [1, 1, 1])
        #expect(engine.places(of: ProgramID("a")) == engine.places(of: ProgramID("b")))
        #expect(engine.places(of: ProgramID("c")).isEmpty)
        // The recent visits (docs/places.md, "Recent visits") come from the same visits: each
        // once, as last sent; none for the approximate program or the unbound one.
        let sent = out.compactMap { d -> Visit? in if d.subscriber == SubscriberID(1), case .visit(let v) = d.event { v } else { nil } }
        #expect(engine.recentVisits(of: ProgramID("a")) == [sent[1], sent[3], sent[4]])
        #expect(engine.recentVisits(of: ProgramID("b")) == engine.recentVisits(of: ProgramID("a")))
        #expect(engine.recentVisits(of: ProgramID("c")).isEmpty)
        #expect(engine.takeChangedPlaces() == [ProgramID("a"), ProgramID("b")])
        #expect(engine.takeChangedPlaces().isEmpty)
    }
}
