import Foundation
@testable import LocationCore
import Testing

/// Held approximate visits (docs/privacy.md, "Other channels") and publications of a live
/// source, which only the clock makes (docs/privacy.md, "Publication epochs").
@Suite struct HeldVisitTests {
    typealias T = ApproximateLocationTests

    static var visitsOnly: SubscriptionOptions {
        var o = T.approximate
        o.events = [.visits]
        return o
    }

    static func parked(_ engine: inout Engine, _ range: Range<Int>, at c: Coordinate = T.truth) -> [Delivery] {
        range.flatMap { engine.handle(.fix(fix(at: Double($0), c, accuracy: 5))) }
    }

    static func visits(_ out: [Delivery], _ id: SubscriberID) -> [Visit] {
        out.compactMap { if $0.subscriber == id, case .visit(let v) = $0.event { v } else { nil } }
    }

    /// Two connections of one program: 2 goes to the background, both detectors detect the
    /// same arrival and hold it; 1 subscribes again (same options) and takes the background
    /// back: it is sent the arrival once.
    @Test func takeBackIntoASubscriptionHoldingTheSameVisitSendsItOnce() {
        let o = Self.visitsOnly
        var engine = T.engine()
        _ = engine.handle(.subscribe(SubscriberID(1), o))
        _ = engine.handle(.subscribe(SubscriberID(2), o))
        var out = Self.parked(&engine, 0..<10)
        engine.handOver(SubscriberID(2), to: ProgramID("p"), options: o)
        out += Self.parked(&engine, 10..<400)
        #expect(Self.visits(out, SubscriberID(1)).isEmpty, "held, not sent")
        out = engine.handle(.subscribe(SubscriberID(1), o))  // e.g. a new distanceFilter
        engine.takeBack(ProgramID("p"), into: SubscriberID(1))  // Connection.takeBackground
        out += Self.parked(&engine, 400..<700)
        let arrivals = Self.visits(out, SubscriberID(1)).filter { $0.kind == .arrival }
        #expect(arrivals.count == 1, "sent \(arrivals.count) arrivals for one stay")
    }

    /// An approximate subscription's visit detector starts at the next publication, not at its
    /// subscribe: connections a program opens within one epoch watch a stay from the same fix,
    /// so whether one got an arrival cannot time a departure finer than the epoch. Started at
    /// the subscribe, the one opened at 1210 s got an arrival and the one opened at 1790 s none
    /// (the device left at 2050 s, less than the dwell after 1790): opened 10 s apart, such
    /// connections timed the departure to 10 s.
    @Test(arguments: [2050, 2400])
    func connectionsOpenedWithinAnEpochSeeTheSameVisits(leavingAt leave: Int) {
        let o = Self.visitsOnly
        var engine = T.engine()
        var out = Self.parked(&engine, 0..<1210)
        out += engine.handle(.subscribe(SubscriberID(1), o))
        out += Self.parked(&engine, 1210..<1790)
        out += engine.handle(.subscribe(SubscriberID(2), o))
        out += Self.parked(&engine, 1790..<leave)
        // Then walks off north at 1.4 m/s for an hour, far beyond the visit's radius and the
        // cell, past the publications that send held visits.
        out += (0..<3600).flatMap { engine.handle(.fix(fix(at: Double(leave + $0), offset(T.truth, east: 0, north: 1.4 * Double($0)), accuracy: 5))) }
        let (first, second) = (Self.visits(out, SubscriberID(1)), Self.visits(out, SubscriberID(2)))
        #expect(first == second)
        // Stayed the dwell from the epoch's start (1800 s): both have the visit; not: neither.
        #expect(first.map(\.kind) == (leave == 2400 ? [.arrival, .departure] : []))
    }

    /// A program's background monitor without visits (a significant-only connection handed
    /// over) that takes a newcomer's visit detector keeps it waiting for the publication:
    /// started at the hand-over, a moment the program chose, it watched the stay from then.
    /// The background sees what a live subscription opened in the same epoch sees.
    @Test func aDetectorJoiningTheBackgroundStillWaitsForThePublication() {
        var significant = T.approximate
        significant.events = [.significant]
        let o = Self.visitsOnly
        let p = ProgramID("p")
        var engine = T.engine()
        _ = engine.handle(.subscribe(SubscriberID(3), significant))
        var out = Self.parked(&engine, 0..<100)
        engine.handOver(SubscriberID(3), to: p, options: significant)
        out += Self.parked(&engine, 100..<1210)
        out += engine.handle(.subscribe(SubscriberID(1), o))  // the reference
        out += engine.handle(.subscribe(SubscriberID(2), o))
        out += Self.parked(&engine, 1210..<1230)
        engine.handOver(SubscriberID(2), to: p, options: o)
        out += Self.parked(&engine, 1230..<2050)
        out += (0..<3600).flatMap { engine.handle(.fix(fix(at: Double(2050 + $0), offset(T.truth, east: 0, north: 1.4 * Double($0)), accuracy: 5))) }
        var queued: [ProgramEvent] = []
        engine.drainProgramEvents(into: &queued)
        let background = queued.compactMap { if case .visit(let v) = $0.event { v.kind } else { nil } }
        #expect(background == Self.visits(out, SubscriberID(1)).map(\.kind))
        #expect(background.isEmpty, "a stay of 250 s from the epoch's start is no visit: \(background)")
    }

    /// Taken back into a subscription without visits, the held arrival is queued at the next
    /// publication, not at once (a moment the program chose, its subscribe: polling `queued`
    /// would time the detection).
    @Test func takeBackIntoASubscriptionWithoutVisitsQueuesAtThePublication() {
        let o = Self.visitsOnly
        var engine = T.engine()
        _ = engine.handle(.subscribe(SubscriberID(1), o))
        _ = Self.parked(&engine, 0..<10)
        engine.handOver(SubscriberID(1), to: ProgramID("p"), options: o)
        _ = Self.parked(&engine, 10..<400)
        var queued: [ProgramEvent] = []
        engine.drainProgramEvents(into: &queued)
        #expect(queued.isEmpty)
        var l = T.approximate
        l.events = [.location]
        _ = engine.handle(.subscribe(SubscriberID(2), l))
        engine.takeBack(ProgramID("p"), into: SubscriberID(2))
        engine.drainProgramEvents(into: &queued)
        #expect(queued.isEmpty, "queued at 400 s, between publications: \(queued)")
        _ = Self.parked(&engine, 400..<600)
        engine.drainProgramEvents(into: &queued)
        #expect(queued.isEmpty)
        _ = Self.parked(&engine, 600..<601)
        engine.drainProgramEvents(into: &queued)
        #expect(queued.count == 1, "queued at the publication: \(queued)")
    }

    /// gpsd goes away and comes back within an epoch, the device now ~6 km away; the first
    /// fix after it is the next epoch's first report: the held arrival (at the old place) is
    /// sent as the published cell, the old one, not the current one no location has published.
    @Test func aHeldVisitAfterSourceLossCarriesThePublishedCell() {
        var engine = T.engine()
        _ = engine.handle(.subscribe(SubscriberID(1), Self.visitsOnly))
        _ = engine.handle(.source(.connected))
        _ = Self.parked(&engine, 0..<400)  // arrival detected ~300 s, held
        _ = engine.handle(.source(.disconnected))
        _ = engine.handle(.source(.connected))
        let away = T.offset(T.truth, north: 6000, east: 0)
        let out = Self.parked(&engine, 610..<611, at: away)
        let sent = Self.visits(out, SubscriberID(1))
        let home = T.grid.centre(of: T.grid.cell(of: T.truth).cell)
        #expect(sent.map(\.coordinate) == [home], "sent as \(sent.map(\.coordinate)); published: \(String(describing: engine.privacy.published))")
    }

    /// A live source: a noFix report whose time steps back a minute or more, then a fix with
    /// the right time, publish nothing at those reports (only ticks do).
    @Test func aClockStepBackThenForwardDoesNotPublishMidEpoch() {
        var engine = T.engine()
        engine.privacy.publishesAtReports = false
        _ = engine.handle(.subscribe(SubscriberID(1), Self.visitsOnly))
        _ = engine.handle(.source(.connected))
        _ = Self.parked(&engine, 600..<1000)  // arrival detected ~900 s, held
        let p = engine.privacy.publications
        _ = engine.handle(.noFix(t0.adding(seconds: 600 - 3600)))  // one glitched report
        let out = Self.parked(&engine, 1001..<1002)
        #expect(engine.privacy.publications == p, "published at 1001 s")
        #expect(Self.visits(out, SubscriberID(1)).isEmpty, "held arrival sent at 1001 s")
    }
}

extension HeldVisitTests {
    /// Regranted precise (e.g. a temporary-precise `purpose`) while holding an approximate
    /// visit: the re-subscribe sends it coarse, as detected while the session was approximate.
    @Test func aVisitHeldWhileApproximateIsSentCoarseAfterARegrant() {
        var engine = T.engine()
        _ = engine.handle(.subscribe(SubscriberID(1), Self.visitsOnly))
        _ = Self.parked(&engine, 0..<400)
        let out = engine.handle(.subscribe(SubscriberID(1), SubscriptionOptions(events: [.visits])))
        let sent = Self.visits(out, SubscriberID(1))
        #expect(sent.count == 1 && sent.allSatisfy { T.isCellCentre($0.coordinate) && $0.arrival == ApproximateLocation.coarse($0.arrival) },
                "sent: \(sent)")
    }
}

extension HeldVisitTests {
    /// A live source: one report an hour ahead (a receiver time glitch) publishes nothing.
    @Test func aForwardGlitchDoesNotPublishMidEpoch() {
        var engine = T.engine()
        engine.privacy.publishesAtReports = false
        var o = Self.visitsOnly
        o.events = [.visits, .location]
        _ = engine.handle(.subscribe(SubscriberID(1), o))
        _ = engine.handle(.source(.connected))
        _ = Self.parked(&engine, 600..<1000)
        let out = engine.handle(.fix(fix(at: 1000 + 3600, T.truth, accuracy: 5)))
        #expect(out.locations(for: SubscriberID(1)).isEmpty && Self.visits(out, SubscriberID(1)).isEmpty,
                "published at 1000 s: \(out.map(\.event))")
    }
}

extension HeldVisitTests {
    /// A live source publishes at its first report and then only at the shell's ticks: an
    /// epoch's first report, whatever it says, is not a publication.
    @Test func aLiveSourcePublishesOnlyAtTicksAfterItsFirstReport() {
        var engine = T.engine()
        engine.privacy.publishesAtReports = false
        var o = T.approximate
        o.events = [.location]
        _ = engine.handle(.subscribe(SubscriberID(1), o))
        var sentAt: [Int] = []
        for i in 0..<1300 {
            if engine.handle(.fix(fix(at: Double(i), T.truth))).contains(where: { $0.subscriber == SubscriberID(1) }) { sentAt.append(i) }
            if i == 700 { _ = engine.handle(.tick(t0.adding(seconds: 600.001))) }  // a late tick
            if i == 1199 {
                if engine.handle(.tick(t0.adding(seconds: 1200.001))).contains(where: { $0.subscriber == SubscriberID(1) }) { sentAt.append(-1200) }
            }
        }
        #expect(sentAt == [0, -1200], "sent at inputs \(sentAt) (-N: the tick for N)")
    }
}

extension HeldVisitTests {
    /// Taken back into a precise subscription with visits (the program's session became
    /// precise meanwhile), the held visit is sent to it at once, coarse, as a re-subscribe does.
    @Test func aVisitHeldInTheBackgroundIsSentCoarseToAPreciseSubscriptionTakingItBack() {
        var engine = T.engine()
        _ = engine.handle(.subscribe(SubscriberID(1), Self.visitsOnly))
        _ = Self.parked(&engine, 0..<10)
        engine.handOver(SubscriberID(1), to: ProgramID("p"), options: Self.visitsOnly)
        _ = Self.parked(&engine, 10..<400)  // the arrival is detected and held
        _ = engine.handle(.subscribe(SubscriberID(2), SubscriptionOptions(events: [.visits])))
        var out: [Delivery] = []
        engine.takeBack(ProgramID("p"), into: SubscriberID(2), deliveries: &out)
        let sent = Self.visits(out, SubscriberID(2))
        #expect(sent.count == 1 && sent.allSatisfy { T.isCellCentre($0.coordinate) && $0.arrival == ApproximateLocation.coarse($0.arrival) },
                "sent: \(sent)")
        var queued: [ProgramEvent] = []
        _ = Self.parked(&engine, 400..<700)
        engine.drainProgramEvents(into: &queued)
        #expect(queued.isEmpty, "queued as well: \(queued)")
    }
}
