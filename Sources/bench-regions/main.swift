// Benchmark (not a test): re-ranking the active set with 100,000 registered regions.
// Build and run: swift run -c release bench-regions [REGIONS]
import LocationCore
import Simulation  // SplitMix64
#if canImport(Glibc)
import Glibc
#endif

let count = CommandLine.arguments.count > 1 ? Int(CommandLine.arguments[1]) ?? 100_000 : 100_000
var rng = SplitMix64(seed: 42)
let origin = Coordinate(latitude: 52.52, longitude: 13.40)
func place(_ east: Double, _ north: Double) -> Coordinate {
    let m = Geodesy.earthRadius * Double.pi / 180
    return Coordinate(latitude: origin.latitude + north / m,
                      longitude: origin.longitude + east / (m * cos(origin.latitude * Double.pi / 180)))
}
// Half uniform over 200 km × 200 km, half in 50 dense city clusters; radii 50 m – 5 km.
let cities = (0..<50).map { _ in (Double.random(in: -100_000...100_000, using: &rng), Double.random(in: -100_000...100_000, using: &rng)) }
var regions: [Region] = []
regions.reserveCapacity(count)
for i in 0..<count {
    let (e, n): (Double, Double) = i % 2 == 0
        ? (Double.random(in: -100_000...100_000, using: &rng), Double.random(in: -100_000...100_000, using: &rng))
        : (cities[i % 50].0 + Double.random(in: -3000...3000, using: &rng), cities[i % 50].1 + Double.random(in: -3000...3000, using: &rng))
    regions.append(Region(id: "r\(i)", center: place(e, n), radius: exp(Double.random(in: log(50)...log(5000), using: &rng))))
}

func seconds(_ d: Duration) -> Double { Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18 }
let clock = ContinuousClock()

var start = clock.now
let index = RegionIndex(centers: regions.map(\.center), radii: regions.map(\.radius))
let build = seconds(clock.now - start)

let queries = 20_000
let points = (0..<queries).map { i -> Coordinate in
    i % 2 == 0 ? place(Double.random(in: -100_000...100_000, using: &rng), Double.random(in: -100_000...100_000, using: &rng))
               : place(cities[i % 50].0 + Double.random(in: -3000...3000, using: &rng), cities[i % 50].1 + Double.random(in: -3000...3000, using: &rng))
}
var checksum = 0
start = clock.now
for p in points { checksum &+= index.nearest(to: p, k: 21).count }
let perQuery = seconds(clock.now - start) / Double(queries)

// A whole re-rank through the monitor (query + bookkeeping + evaluating the new set) while
// driving at 30 m/s through a city cluster at 1 Hz.
var monitor = RegionMonitor(limits: .init(maxActive: 20, maxRegistered: count))
try! monitor.add(regions)
var events: [RegionEvent] = []
let t0 = Timestamp(seconds: 1_780_000_000)
// First fix evaluates every region once (their state is unknown); not timed.
monitor.handle(Fix(time: t0, coordinate: place(cities[0].0 - 5000, cities[0].1), horizontalAccuracy: 8), into: &events)
let fixes = 3600
start = clock.now
for s in 1...fixes {
    let c = place(cities[0].0 - 5000 + 30 * Double(s % 400), cities[0].1 + Double(s / 400) * 200)
    monitor.handle(Fix(time: t0.adding(seconds: Double(s)), coordinate: c, horizontalAccuracy: 8), into: &events)
}
let perFix = seconds(clock.now - start) / Double(fixes)

print("regions: \(count)")
print("index build: \(String(build * 1000)) ms")
print("re-rank query (21 nearest boundaries), mean of \(queries): \(String(perQuery * 1e6)) µs")
print("monitor per fix at 30 m/s through a dense cluster, mean of \(fixes): \(String(perFix * 1e6)) µs, \(monitor.reranks) re-ranks, \(events.count) events")
print("checksum \(checksum)")
