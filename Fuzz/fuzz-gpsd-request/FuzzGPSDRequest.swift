// libFuzzer target: the gpsd-protocol request reader (Sources/GPSDProtocol). The input is fed
// in two reads split where its first byte says; the requests must be the same as from one read,
// and every ERROR message must make a reply line within gpsd's bound.
// Built only by scripts/fuzz (LOCATIOND_FUZZ=1, -sanitize=fuzzer,address); libFuzzer supplies main.
import FuzzDriver
import GPSDProtocol

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzGPSDRequest(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data, size > 0 else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let cut = Int(bytes[0]) * bytes.count / 256
    var whole = GPSDRequestReader(), split = GPSDRequestReader()
    let once = whole.feed(bytes)
    let twice = split.feed(bytes[..<cut]) + split.feed(bytes[cut...])
    precondition(once == twice, "requests depend on how the bytes were read")
    for case .request(.invalid(let message)) in once {
        precondition(GPSDReport.error(message).count <= GPSDReport.maxLineBytes, "ERROR line over the bound")
    }
    return 0
}

@_cdecl("fuzz_gpsd_request_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    runLibFuzzer(argc, argv, fuzzGPSDRequest)
}
