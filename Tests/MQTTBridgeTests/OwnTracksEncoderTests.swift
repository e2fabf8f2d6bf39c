import LocationCore
import LocationProtocol
import OwnTracks
import Testing

/// The mapping from locationd's events to OwnTracks JSON (docs/mqtt.md, "Payloads"): field
/// names, units, integer types and the omission of zero values, as OwnTracks consumers read them.
@Suite struct OwnTracksEncoderTests {
    let encoder = OwnTracksEncoder(base: "owntracks/alice/car", tid: "ac")
    let t = Timestamp(seconds: 1_777_883_403, nanoseconds: 750_000_000)

    @Test func aLocationCarriesEveryFieldInOwnTracksUnits() {
        let fix = Fix(time: t, coordinate: Coordinate(latitude: 52.520018833, longitude: 13.4050005), mode: .threeD,
                      altitudeHAE: 80, altitudeMSL: 38.4, horizontalAccuracy: 7.2, verticalAccuracy: 9.5, speed: 10, course: 87.6)
        let m = encoder.location(fix, trigger: .timer)
        #expect(m.topic == "owntracks/alice/car")
        #expect(m.retain)
        // tst whole seconds rounded down; acc/vac metres rounded up; alt MSL; vel km/h (10 m/s = 36).
        #expect(m.text == #"{"_type":"location","tid":"ac","lat":52.520018833,"lon":13.4050005,"tst":1777883403,"acc":8,"alt":38,"vac":10,"vel":36,"cog":88,"t":"t"}"#)
    }

    @Test func zeroAndUnknownValuesAreLeftOut() {
        let fix = Fix(time: t, coordinate: Coordinate(latitude: -33.5, longitude: -70.25), altitudeMSL: 0.4, speed: 0.1, course: 359.7)
        // alt 0.4 → 0, vel 0.36 km/h → 0, cog 359.7 → 360 ≡ 0: all zero, all left out; acc unknown.
        #expect(encoder.location(fix, trigger: .reply).text == #"{"_type":"location","tid":"ac","lat":-33.5,"lon":-70.25,"tst":1777883403,"t":"r"}"#)
    }

    @Test func aQueuedEventCarriesItsSequenceNumber() {
        let fix = Fix(time: Timestamp(seconds: 10), coordinate: Coordinate(latitude: 1, longitude: 2))
        #expect(encoder.location(fix, trigger: .ping, seq: 41).text == #"{"_type":"location","tid":"ac","lat":1,"lon":2,"tst":10,"t":"p","_seq":41}"#)
    }

    @Test func aTimeBeforeTheEpochRoundsDown() {
        let fix = Fix(time: Timestamp(nanoseconds: -1_500_000_000), coordinate: Coordinate(latitude: 0, longitude: 0))
        #expect(encoder.location(fix, trigger: .timer).text.contains(#""tst":-2,"#))
    }

    @Test func regionEnterAndExitAreTransitions() throws {
        let home = Waypoint(rid: "home", desc: "Home", latitude: 52.5, longitude: 13.4, radius: 150, created: 1_700_000_000)
        let enter = RegionEvent(region: "home", kind: .enter, time: t, coordinate: Coordinate(latitude: 52.5006, longitude: 13.4002))
        let m = try #require(encoder.transition(enter, waypoint: home, seq: 7))
        #expect(m.topic == "owntracks/alice/car/event")
        #expect(!m.retain)
        #expect(m.text == #"{"_type":"transition","tid":"ac","wtst":1700000000,"lat":52.5006,"lon":13.4002,"tst":1777883403,"event":"enter","desc":"Home","rid":"home","t":"c","_seq":7}"#)
        var exit = enter
        exit.kind = .exit
        #expect(try #require(encoder.transition(exit, waypoint: nil)).text.contains(#""event":"leave","desc":"home","rid":"home""#))
    }

    @Test func regionEventsWithoutAnOwnTracksFormAreNotPublished() {
        for kind in [RegionEventKind.dwell, .inside, .outside] {
            #expect(encoder.transition(RegionEvent(region: "r", kind: kind, time: t, coordinate: Coordinate(latitude: 0, longitude: 0)), waypoint: nil) == nil)
        }
    }

    @Test func visitsHaveTheirOwnTopicAndType() {
        let arrival = Visit(kind: .arrival, arrival: Timestamp(seconds: 100), departure: nil,
                            coordinate: Coordinate(latitude: 52.52, longitude: 13.405), horizontalAccuracy: 7.35)
        let m = encoder.visit(arrival, seq: 3)
        #expect(m.topic == "owntracks/alice/car/visit")
        #expect(!m.retain)
        #expect(m.text == #"{"_type":"visit","tid":"ac","event":"arrival","lat":52.52,"lon":13.405,"acc":8,"atst":100,"_seq":3}"#)
        var departure = arrival
        departure.kind = .departure
        departure.departure = Timestamp(seconds: 433)
        #expect(encoder.visit(departure).text.hasSuffix(#""atst":100,"dtst":433}"#))
    }

    @Test func waypointsLostAndLastWill() {
        let w = Waypoint(rid: "w1", desc: "Work \"A\"", latitude: 52.51, longitude: 13.38, radius: 200.4, created: 5)
        #expect(encoder.waypoints([w]).text == #"{"_type":"waypoints","_creator":"locationd-mqtt","waypoints":[{"_type":"waypoint","desc":"Work \"A\"","lat":52.51,"lon":13.38,"rad":200,"tst":5,"rid":"w1"}]}"#)
        #expect(encoder.waypoints([w]).topic == "owntracks/alice/car/waypoints")
        #expect(encoder.lost(3, seq: 40).text == #"{"_type":"lost","tid":"ac","lost":3,"_seq":40}"#)
        #expect(encoder.lost(3, seq: 40).topic == "owntracks/alice/car/lost")
        let will = encoder.lastWill(connectedAt: 1_700_000_000)
        #expect(will.text == #"{"_type":"lwt","tst":1700000000}"#)
        #expect(will.topic == "owntracks/alice/car" && !will.retain)
    }

    /// Every payload is JSON that locationd's own parser reads back with the same numbers.
    @Test func payloadsAreJSONObjects() throws {
        let fix = Fix(time: t, coordinate: Coordinate(latitude: 52.123456789, longitude: -0.000000001), horizontalAccuracy: 0.2)
        let value = try JSONParser().parse(encoder.location(fix, trigger: .timer).payload)
        #expect(value["lat"] == .number(52.123456789))
        #expect(value["lon"] == .number(-0.000000001))
        #expect(value["acc"] == .number(1))
        #expect(value["tst"] == .number(1_777_883_403))
    }
}
