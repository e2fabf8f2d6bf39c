// libFuzzer target: the NMEA decoder (and the event encoder on whatever fixes come out).
// Built only by scripts/fuzz (LOCATIOND_FUZZ=1, -sanitize=fuzzer,address); libFuzzer supplies main.
import FuzzDriver
import LocationCore
import LocationProtocol
import NMEA

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzNMEA(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data, size > 0 else { return 0 }
    // With the first byte odd, every sentence's checksum is made right first: a mutated
    // sentence almost never keeps a valid one, and without this the fuzzer seldom gets past
    // the checksum into the field parsers (where the ZDA year overflow hid).
    var input = Array(UnsafeRawBufferPointer(start: data, count: size))
    if input[0] & 1 == 1 { repairChecksums(&input) }
    return input.withUnsafeBytes { decode($0) }
}

/// Rewrites the two hex digits after each `*` to the XOR of the bytes since the line's `$`/`!`.
func repairChecksums(_ bytes: inout [UInt8]) {
    let hex = Array("0123456789ABCDEF".utf8)
    var sum: UInt8 = 0
    var inSentence = false
    var i = 1
    while i < bytes.count {
        let b = bytes[i]
        if b == UInt8(ascii: "$") || b == UInt8(ascii: "!") {
            inSentence = true; sum = 0
        } else if b == UInt8(ascii: "\n") || b == UInt8(ascii: "\r") {
            inSentence = false
        } else if inSentence && b == UInt8(ascii: "*") {
            if i + 2 < bytes.count {
                bytes[i + 1] = hex[Int(sum >> 4)]
                bytes[i + 2] = hex[Int(sum & 15)]
                i += 2
            }
            inSentence = false
        } else if inSentence {
            sum ^= b
        }
        i += 1
    }
}

func decode(_ bytes: UnsafeRawBufferPointer) -> CInt {
    let size = bytes.count
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

@_cdecl("fuzz_nmea_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    runLibFuzzer(argc, argv, fuzzNMEA)
}
