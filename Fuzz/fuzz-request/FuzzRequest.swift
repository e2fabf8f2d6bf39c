// libFuzzer target: the protocol request decoder on whole lines. A request that decodes must
// re-encode to a line that decodes to the same request.
// Built only by scripts/fuzz (LOCATIOND_FUZZ=1, -sanitize=fuzzer,address); libFuzzer supplies main.
import FuzzDriver
import LocationProtocol

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRequest(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data, size > 0 else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    for line in bytes.split(separator: 0x0A, omittingEmptySubsequences: true) {
        guard let request = try? Request.decode(line) else { continue }
        var again: [UInt8] = []
        request.append(to: &again)
        if again.last == 0x0A { again.removeLast() }
        guard let back = try? Request.decode(again) else {
            fatalError("re-encoded request does not decode: \(String(decoding: again, as: UTF8.self))")
        }
        precondition(back == request, "round trip changed the request: \(String(decoding: again, as: UTF8.self))")
    }
    return 0
}

@_cdecl("fuzz_request_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    runLibFuzzer(argc, argv, fuzzRequest)
}
