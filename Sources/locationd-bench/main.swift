// Benchmarks (not tests) of the hot paths, release-built: Benchmarks/compare.sh runs them next
// to the peers (gpsdecode, pynmea2, gpspipe) and docs/benchmarks.md records the numbers.
//
//   locationd-bench decode LOG...      NMEA → epochs → fixes, and NMEA → location JSON lines
//   locationd-bench pipeline LOG       100 subscribers + 10,000 regions (20 active) + visits
//                                      + significant change, every delivery encoded
//   locationd-bench cold [FIXES]       one fix through the engine and the encoder, with nothing
//                                      of it cached (as after a second asleep) and warm
//   locationd-bench gazetteer [PLACES|FILE]  a GeoNames dump (default: 200,000 generated rows,
//                                      the size of cities500.txt) read into the reverse-geocoding
//                                      index, its heap, and nearest-place lookups
//
// Each measurement repeats its work until at least MIN_SECONDS (default 1) have passed and
// reports the rate over all repetitions; inputs are read into memory first (no I/O timed).
import LocationCore
import Simulation  // SplitMix64
import LocationProtocol
import NMEA
#if canImport(Glibc)
import Glibc
#endif

func seconds(_ d: Duration) -> Double { Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18 }
let clock = ContinuousClock()
let minSeconds = getenv("MIN_SECONDS").flatMap { Double(String(cString: $0)) } ?? 1.0

func fail(_ message: String) -> Never {
    let line = Array("locationd-bench: \(message)\n".utf8)
    _ = line.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
    exit(2)
}

func readFile(_ path: String) -> [UInt8] {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { fail("\(path): \(String(cString: strerror(errno)))") }
    defer { close(fd) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 1 << 16)
    while true {
        let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n < 0 { if errno == EINTR { continue }; fail("\(path): read: \(String(cString: strerror(errno)))") }
        if n == 0 { break }
        bytes.append(contentsOf: chunk[0..<n])
    }
    return bytes
}

/// Runs `body` (one pass over the input) until `minSeconds` have passed; returns passes and time.
func repeatTimed(_ body: () -> Void) -> (passes: Int, seconds: Double) {
    body()  // warm-up, not timed
    var passes = 0
    let start = clock.now
    var elapsed = 0.0
    repeat {
        body()
        passes += 1
        elapsed = seconds(clock.now - start)
    } while elapsed < minSeconds
    return (passes, elapsed)
}

func fmt(_ x: Double, _ decimals: Int = 1) -> String {
    var s = String(Int64((x * pow(10, Double(decimals))).rounded()))
    if decimals > 0 {
        while s.count <= decimals { s = "0" + s }
        s.insert(".", at: s.index(s.endIndex, offsetBy: -decimals))
    }
    return s
}

/// `decode`: per file, one line per measurement, tab-separated, machine-readable:
/// `decode <file> bytes=N epochs=N fixes=N fixes_per_s=X epochs_per_s=X mb_per_s=X`
/// `json <file> ... lines=N` (decode + encode every fix as a protocol `location` line).
func decode(_ paths: [String]) {
    for path in paths {
        let bytes = readFile(path)
        let name = path.split(separator: "/").last.map(String.init) ?? path
        var epochs = 0, fixes = 0
        let r1 = repeatTimed {
            var decoder = NMEADecoder()
            epochs = 0; fixes = 0
            bytes.withUnsafeBytes { raw in
                decoder.feed(raw) { e in epochs += 1; if e.fix != nil { fixes += 1 } }
            }
            decoder.finish { e in epochs += 1; if e.fix != nil { fixes += 1 } }
        }
        report("decode", name, bytes.count, epochs, fixes, r1, extra: "")
        var lines = 0, outBytes = 0
        let encoder = EventEncoder()
        var out: [UInt8] = []
        out.reserveCapacity(1 << 16)
        let r2 = repeatTimed {
            var decoder = NMEADecoder()
            lines = 0; outBytes = 0
            let onEpoch = { (e: NMEAEpoch) in
                if let fix = e.fix {
                    encoder.appendLocation(fix, to: &out)
                    lines += 1
                    if out.count > 60_000 { outBytes += out.count; out.removeAll(keepingCapacity: true) }
                }
            }
            bytes.withUnsafeBytes { raw in decoder.feed(raw, onEpoch: onEpoch) }
            decoder.finish(onEpoch: onEpoch)
            outBytes += out.count
            out.removeAll(keepingCapacity: true)
        }
        report("json", name, bytes.count, epochs, fixes, r2, extra: "\tlines=\(lines)\tjson_bytes=\(outBytes)")
    }
}

func report(_ kind: String, _ name: String, _ bytes: Int, _ epochs: Int, _ fixes: Int,
            _ r: (passes: Int, seconds: Double), extra: String) {
    let per = r.seconds / Double(r.passes)
    print("\(kind)\t\(name)\tbytes=\(bytes)\tepochs=\(epochs)\tfixes=\(fixes)"
          + "\tfixes_per_s=\(fmt(Double(fixes) / per, 0))\tepochs_per_s=\(fmt(Double(epochs) / per, 0))"
          + "\tmb_per_s=\(fmt(Double(bytes) / per / 1e6, 1))\tpasses=\(r.passes)" + extra)
}

/// `pipeline LOG`: the whole engine as the daemon runs it, over a decoded log: 100 subscribers
/// (distance filters 0…99 m, events location+visits+significant), one program with 10,000
/// regions (20 active, rotated) bound to every subscriber, every delivery encoded as its line.
/// Decoding is not timed (see `decode`); the inputs are decoded once up front.
func pipeline(_ path: String, subscribers: Int, regionCount: Int) {
    var inputs: [EngineInput] = []
    try! NMEAReplay.inputs(fromFile: path) { inputs.append($0) }
    let fixes = inputs.reduce(0) { n, i in if case .fix = i { return n + 1 }; return n }
    guard let firstFix = inputs.lazy.compactMap({ i -> Fix? in if case .fix(let f) = i { return f }; return nil }).first
    else { fail("\(path): no fixes") }
    // Regions scattered over ±20 km around the log's first fix, radii 50 m – 2 km.
    var rng = SplitMix64(seed: 7)
    let o = firstFix.coordinate
    let m = Geodesy.earthRadius * Double.pi / 180
    let regions = (0..<regionCount).map { i in
        let n = Double.random(in: -20_000...20_000, using: &rng), e = Double.random(in: -20_000...20_000, using: &rng)
        return Region(id: "r\(i)", center: Coordinate(latitude: o.latitude + n / m,
                                                     longitude: o.longitude + e / (m * cos(o.latitude * Double.pi / 180))),
                      radius: exp(Double.random(in: log(50)...log(2000), using: &rng)), dwell: 300)
    }
    var delivered = 0, encodedBytes = 0
    var digest: UInt64 = 0
    /// One pass; with `hashing`, an FNV-1a digest of every encoded line (the output's identity,
    /// for telling an optimisation from a change of behaviour: compare it before and after).
    func pass(hashing: Bool) {
        var engine = Engine()
        engine.regionLimits = RegionMonitor.Limits(maxActive: 20, maxRegistered: regionCount)
        var deliveries: [Delivery] = []
        let program = ProgramID("bench")
        for s in 0..<subscribers {
            let id = SubscriberID(UInt64(s + 1))
            engine.handle(.subscribe(id, SubscriptionOptions(distanceFilter: Double(s % 100), events: [.location, .visits, .significant])),
                          into: &deliveries)
            engine.bind(id, to: program)
        }
        try! engine.addRegions(regions, for: program)
        let encoder = EventEncoder()
        var out: [UInt8] = []
        out.reserveCapacity(1 << 16)
        delivered = 0; encodedBytes = 0
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        func flush() {
            if hashing { for b in out { hash = (hash ^ UInt64(b)) &* 0x100_0000_01b3 } }
            encodedBytes += out.count
            out.removeAll(keepingCapacity: true)
        }
        for input in inputs {
            deliveries.removeAll(keepingCapacity: true)
            engine.handle(input, into: &deliveries)
            for d in deliveries {
                encoder.append(d.event, to: &out)
                if hashing { hash = (hash ^ UInt64(d.subscriber.rawValue)) &* 0x100_0000_01b3 }
                if out.count > 60_000 { flush() }
            }
            delivered += deliveries.count
        }
        flush()
        if hashing { digest = hash }
    }
    pass(hashing: true)  // not timed
    let r = repeatTimed { pass(hashing: false) }
    let per = r.seconds / Double(r.passes)
    print("pipeline\t\(path.split(separator: "/").last.map(String.init) ?? path)\tsubscribers=\(subscribers)\tregions=\(regionCount)"
          + "\tfixes=\(fixes)\tdeliveries=\(delivered)\tjson_bytes=\(encodedBytes)\toutput_fnv1a=\(String(digest, radix: 16))"
          + "\tfixes_per_s=\(fmt(Double(fixes) / per, 0))\tus_per_fix=\(fmt(per / Double(fixes) * 1e6, 2))\tpasses=\(r.passes)")
}

/// `cold [FIXES]`: what one report costs the daemon's engine and encoder when none of its code or
/// data is cached, next to the same work warm. A daemon that serves a 1 Hz receiver sleeps a
/// second between reports while other processes run, so its report path starts cold: every cache
/// line and page it touches is fetched again (and, in a VM, every page walk is two-level). Before
/// each cold fix it writes a buffer larger than the caches and TLBs cover, which evicts both;
/// the warm fix follows at once. One subscriber with no filter, as in the latency benchmark.
/// Prints nanoseconds per fix at p50/p90/p99.
func cold(fixes count: Int) {
    let flushSize = 64 << 20
    let flush = UnsafeMutableRawBufferPointer.allocate(byteCount: flushSize, alignment: 64)
    defer { flush.deallocate() }
    var engine = Engine()
    var deliveries: [Delivery] = []
    engine.handle(.subscribe(SubscriberID(1), SubscriptionOptions()), into: &deliveries)
    engine.handle(.source(.connected), into: &deliveries)
    let encoder = EventEncoder()
    var line: [UInt8] = []
    line.reserveCapacity(4096)
    var coldTimes: [Double] = [], warmTimes: [Double] = []
    coldTimes.reserveCapacity(count); warmTimes.reserveCapacity(count)
    func fix(_ k: Int) -> Fix {
        Fix(time: Timestamp(seconds: 1_773_136_800 + Int64(k), nanoseconds: 0),
            coordinate: Coordinate(latitude: 48.112 + Double(k) * 1e-6, longitude: 11.537), mode: .threeD,
            altitudeHAE: 75.8, horizontalAccuracy: 3.1, speed: 0.25, course: 45)
    }
    engine.handle(.fix(fix(0)), into: &deliveries)  // the status change to "fix" comes with the first
    func report(_ k: Int) -> Double {
        let fix = fix(k)
        let start = clock.now
        deliveries.removeAll(keepingCapacity: true)
        engine.handle(.fix(fix), into: &deliveries)
        line.removeAll(keepingCapacity: true)
        for d in deliveries { encoder.append(d.event, to: &line) }
        let took = seconds(clock.now - start)
        guard deliveries.count == 1, !line.isEmpty else { fail("cold: fix \(k) gave \(deliveries.count) deliveries") }
        return took
    }
    for k in 0..<(count + 10) {
        var i = 0
        while i < flushSize { flush[i] = UInt8(truncatingIfNeeded: k &+ i); i += 64 }
        let c = report(2 * k + 1), w = report(2 * k + 2)
        if k >= 10 { coldTimes.append(c); warmTimes.append(w) }  // the first ones also load the code
    }
    func ns(_ times: [Double], _ p: Int) -> String {
        let sorted = times.sorted()
        return fmt(sorted[min(sorted.count - 1, sorted.count * p / 100)] * 1e9, 0)
    }
    print("cold\tfixes=\(count)\tcold_p50_ns=\(ns(coldTimes, 50))\tcold_p90_ns=\(ns(coldTimes, 90))\tcold_p99_ns=\(ns(coldTimes, 99))"
          + "\twarm_p50_ns=\(ns(warmTimes, 50))\twarm_p90_ns=\(ns(warmTimes, 90))\twarm_p99_ns=\(ns(warmTimes, 99))")
}

/// Resident set size, bytes (/proc/self/statm).
func residentBytes() -> Int {
    let text = String(decoding: readFile("/proc/self/statm"), as: UTF8.self)
    let pages = text.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
    return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
}

/// `gazetteer`: `gazetteer places=N bytes=N load_ms=X index_bytes=N rss_growth_bytes=N lookup_ns=X
/// index_file_bytes=N index_load_ms=X`.
/// load: the dump's bytes (in memory) to a ready index, the best of 5; index: the bytes its
/// arrays hold; rss growth: the process's resident memory after the first load minus before it
/// (the dump's bytes already resident; what the build freed but malloc kept counts too, so an
/// upper bound); lookup: the mean of 1,000,000 nearest-place lookups at uniformly random
/// positions, each a `Locality` with its name and distance; index file: the size of the
/// prebuilt index (`locationctl gazetteer build`); index load: its bytes (in memory) to the same
/// ready index, the best of 5.
func gazetteer(_ source: String) {
    let bytes = Int(source).map { GeoNamesSample.synthetic(count: $0) } ?? readFile(source)
    let before = residentBytes()
    guard let g = try? GeoNamesReader.read(bytes) else { fail("gazetteer: the dump has a malformed row") }
    let growth = residentBytes() - before
    var best = Double.infinity
    for _ in 0..<5 {
        let start = clock.now
        guard let again = try? GeoNamesReader.read(bytes) else { fail("gazetteer: the dump has a malformed row") }
        best = min(best, seconds(clock.now - start))
        guard again.count == g.count else { fail("gazetteer: loads differ") }
    }
    let count = g.count
    var rng = SplitMix64(seed: 11)
    let queries = (0..<1_000_000).map { _ in
        Coordinate(latitude: Double.random(in: -90...90, using: &rng), longitude: Double.random(in: -180..<180, using: &rng))
    }
    var total = 0.0
    let start = clock.now
    for q in queries { total += g.nearest(q)?.distance ?? 0 }
    let lookup = seconds(clock.now - start) / Double(queries.count)
    guard total > 0 || count == 0 else { fail("gazetteer: no lookup found a place") }
    let file = GazetteerIndex.bytes(of: g, source: GazetteerIndex.Source(size: Int64(bytes.count), modified: 0))
    var bestIndex = Double.infinity
    for _ in 0..<5 {
        let start = clock.now
        guard let again = file.withUnsafeBytes({ try? GazetteerIndex.gazetteer(from: $0) }) else { fail("gazetteer: the index does not load") }
        bestIndex = min(bestIndex, seconds(clock.now - start))
        guard again.count == g.count, again.nearest(queries[0]) == g.nearest(queries[0]) else { fail("gazetteer: the index differs") }
    }
    print("gazetteer\tplaces=\(count)\tbytes=\(bytes.count)\tload_ms=\(fmt(best * 1e3))\tindex_bytes=\(g.byteSize)"
          + "\trss_growth_bytes=\(growth)\tlookup_ns=\(fmt(lookup * 1e9, 0))"
          + "\tindex_file_bytes=\(file.count)\tindex_load_ms=\(fmt(bestIndex * 1e3, 1))")
}

var args = Array(CommandLine.arguments.dropFirst())
guard let command = args.first else {
    fail("usage: locationd-bench decode LOG... | pipeline LOG [SUBSCRIBERS [REGIONS]] | cold [FIXES] | gazetteer [PLACES|FILE]")
}
args.removeFirst()
switch command {
case "decode":
    guard !args.isEmpty else { fail("decode: no logs given") }
    decode(args)
case "pipeline":
    guard let log = args.first else { fail("pipeline: no log given") }
    pipeline(log, subscribers: args.count > 1 ? Int(args[1]) ?? 100 : 100, regionCount: args.count > 2 ? Int(args[2]) ?? 10_000 : 10_000)
case "cold":
    guard let fixes = args.isEmpty ? 2000 : Int(args[0]), fixes > 0 else { fail("cold: FIXES must be a positive number, not '\(args[0])'") }
    cold(fixes: fixes)
case "gazetteer":
    gazetteer(args.first ?? "200000")
default:
    fail("unknown command \(command); expected decode, pipeline, cold or gazetteer")
}
