// libFuzzer target: the NMEA decoder (and the event encoder on whatever fixes come out).
// Built only by scripts/fuzz (LOCATIOND_FUZZ=1, -sanitize=fuzzer,address); libFuzzer supplies main.
import LocationCore
import LocationProtocol
import NMEA

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzNMEA(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data, size > 0 else { return 0 }
    let bytes = UnsafeRawBufferPointer(start: data, count: size)
    // The first byte picks where the input is split in two reads: lines straddling reads take
    // the decoder's pending-line path.
    let cut = 1 + Int(bytes[0]) * (size - 1) / 255
    var decoder = NMEADecoder()
    let encoder = EventEncoder()
    var out: [UInt8] = []
    let onEpoch = { (e: NMEAEpoch) in
        if let fix = e.fix { encoder.appendLocation(fix, to: &out) }
        _ = e.engineInput
    }
    decoder.feed(UnsafeRawBufferPointer(rebasing: bytes[1..<cut]), onEpoch: onEpoch)
    decoder.feed(UnsafeRawBufferPointer(rebasing: bytes[cut..<size]), onEpoch: onEpoch)
    decoder.finish(onEpoch: onEpoch)
    return 0
}

// SwiftPM links an executable with main = fuzz_nmea_main; hand control to libFuzzer's driver
// from there (libFuzzer's own main is then not linked).
@_silgen_name("LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt) -> CInt

@_cdecl("fuzz_nmea_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    var argc = argc, argv = argv
    return LLVMFuzzerRunDriver(&argc, &argv, fuzzNMEA)
}
