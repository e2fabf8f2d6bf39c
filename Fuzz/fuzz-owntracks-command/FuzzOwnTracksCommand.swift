// libFuzzer target: the OwnTracks command decoder (locationd-mqtt's input from the broker) on
// whole payloads. A setWaypoints that decodes registers only valid regions, and its waypoints,
// published as a `waypoints` message and sent back in a setWaypoints, decode to the same ones.
// Built only by scripts/fuzz (LOCATIOND_FUZZ=1, -sanitize=fuzzer,address); libFuzzer supplies main.
import FuzzDriver
import OwnTracks

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzCommand(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data, size > 0 else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard case .setWaypoints(let set, _)? = try? OwnTracksCommand.decode(bytes, now: 1_700_000_000) else { return 0 }
    for w in set { precondition(w.region.invalidReason == nil, "decoded an invalid region: \(w)") }
    let published = OwnTracksEncoder(base: "owntracks/u/d", tid: "d").waypoints(set).payload
    let command = Array(#"{"_type":"cmd","action":"setWaypoints","waypoints":"#.utf8) + published + [UInt8(ascii: "}")]
    guard case .setWaypoints(let again, let removed)? = try? OwnTracksCommand.decode(command, now: 0) else {
        fatalError("published waypoints do not decode: \(String(decoding: command, as: UTF8.self))")
    }
    precondition(removed.isEmpty && again.count == set.count, "round trip changed the waypoints")
    for (a, b) in zip(set, again) {
        precondition(a.rid == b.rid && a.desc == b.desc && a.created == b.created, "round trip changed \(a) into \(b)")
    }
    return 0
}

@_cdecl("fuzz_owntracks_command_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    runLibFuzzer(argc, argv, fuzzCommand)
}
