import LocationCore
import OwnTracks
import Testing

/// Commands on BASE/cmd (docs/mqtt.md, "Commands"): the four the bridge runs, and a clear
/// rejection for everything else.
@Suite struct OwnTracksCommandTests {
    func decode(_ text: String) throws(OwnTracksCommand.Rejection) -> OwnTracksCommand {
        try OwnTracksCommand.decode(Array(text.utf8), now: 1_000)
    }

    func rejection(_ text: String) -> String? {
        do { _ = try decode(text); return nil } catch { return error.message }
    }

    @Test func theSimpleActions() throws {
        #expect(try decode(#"{"_type":"cmd","action":"reportLocation"}"#) == .reportLocation)
        #expect(try decode(#"{"_type":"cmd","action":"clearWaypoints"}"#) == .clearWaypoints)
        #expect(try decode(#"{"_type":"cmd","action":"waypoints","extra":[1]}"#) == .waypoints)
    }

    @Test func setWaypointsInTheBookletsForm() throws {
        let command = try decode(#"{"_type":"cmd","action":"setWaypoints","waypoints":{"_type":"waypoints","waypoints":[{"_type":"waypoint","desc":"Home","lat":52.5,"lon":13.4,"rad":150,"tst":1700000000,"rid":"h1"},{"desc":"Gone","lat":-1000000,"lon":0,"rad":50},{"desc":"Work","lat":52.51,"lon":13.38,"rad":200}]}}"#)
        #expect(command == .setWaypoints(set: [
            Waypoint(rid: "h1", desc: "Home", latitude: 52.5, longitude: 13.4, radius: 150, created: 1_700_000_000),
            Waypoint(rid: "Work", desc: "Work", latitude: 52.51, longitude: 13.38, radius: 200, created: 1_000),
        ], remove: ["Gone"]))
    }

    @Test func setWaypointsWithABareArray() throws {
        let command = try decode(#"{"_type":"cmd","action":"setWaypoints","waypoints":[{"desc":"A","lat":1,"lon":2,"rad":10}]}"#)
        #expect(command == .setWaypoints(set: [Waypoint(rid: "A", desc: "A", latitude: 1, longitude: 2, radius: 10, created: 1_000)], remove: []))
    }

    @Test func aWaypointRoundTripsThroughItsRegion() {
        let w = Waypoint(rid: "h1", desc: "Home \u{e9}\"", latitude: 52.5, longitude: 13.4, radius: 150, created: 1_700_000_000)
        #expect(w.region.invalidReason == nil)
        #expect(!w.region.notifyInitialState && w.region.dwell == nil)
        #expect(Waypoint(region: w.region) == w)
        // A region registered by other means: its id is its name.
        let other = Region(id: "cli", center: Coordinate(latitude: 1, longitude: 2), radius: 30, metadata: "[1]")
        #expect(Waypoint(region: other) == Waypoint(rid: "cli", desc: "cli", latitude: 1, longitude: 2, radius: 30, created: 0))
    }

    @Test func rejectionsSayWhat() {
        #expect(rejection("not json")?.hasPrefix("not JSON: ") == true)
        #expect(rejection("[1]") == "not a JSON object but an array")
        #expect(rejection(#"{"action":"reportLocation"}"#) == #"_type is absent; expected "cmd""#)
        #expect(rejection(#"{"_type":"location","lat":1}"#) == #"_type is "location"; expected "cmd""#)
        #expect(rejection(#"{"_type":"cmd","action":7}"#) == "action is 7; expected a string")
        #expect(rejection(#"{"_type":"cmd","action":"dump"}"#) == #"unsupported action "dump"; supported: reportLocation, setWaypoints, clearWaypoints, waypoints"#)
        #expect(rejection(#"{"_type":"cmd","action":"setWaypoints"}"#)?.hasPrefix("setWaypoints: waypoints is absent") == true)
        #expect(rejection(#"{"_type":"cmd","action":"setWaypoints","waypoints":[{"lat":1,"lon":2,"rad":10}]}"#) == "waypoints[0]: desc is absent; expected a non-empty string")
        #expect(rejection(#"{"_type":"cmd","action":"setWaypoints","waypoints":[{"desc":"a","lat":1,"lon":2,"rad":5}]}"#) == "waypoints[0]: region a: radius 5 is out of range; expected 10…100000 metres")
        #expect(rejection(#"{"_type":"cmd","action":"setWaypoints","waypoints":[{"desc":"a","lat":1,"lon":2}]}"#) == #"waypoints[0] ("a"): rad is absent; expected a number of metres"#)
        #expect(rejection(#"{"_type":"cmd","action":"setWaypoints","waypoints":[{"desc":"a","lat":1,"lon":2,"rad":10,"tst":1.5}]}"#) == #"waypoints[0] ("a"): tst is 1.5; expected integer epoch seconds"#)
        #expect(rejection(#"{"_type":"cmd","action":"setWaypoints","waypoints":[{"desc":"a","lat":1,"lon":2,"rad":10},{"desc":"a","lat":1,"lon":2,"rad":10}]}"#) == #"waypoints[1]: rid "a" is given twice"#)
        #expect(rejection(#"{"_type":"cmd","action":"setWaypoints","waypoints":[{"desc":"a","rid":"x\u0000","lat":1,"lon":2,"rad":10}]}"#) == "waypoints[0]: region id must not contain U+0000 (NUL)")
        #expect(rejection(String(repeating: "[", count: 40))?.hasPrefix("not JSON") == true)
    }

    @Test func anOversizedCommandIsRejectedUnread() {
        let big = [UInt8](repeating: 0x20, count: OwnTracksCommand.maxBytes + 1)
        #expect(throws: OwnTracksCommand.Rejection("command of \(big.count) bytes; at most \(OwnTracksCommand.maxBytes)")) {
            try OwnTracksCommand.decode(big, now: 0)
        }
    }
}
