#if canImport(Glibc)
import Glibc
#endif

/// Gazetteer files in GeoNames' dump format (docs/places.md, "Gazetteer"), written by tests and
/// the benchmark: no GeoNames data is bundled.
public enum GeoNamesSample {
    /// One row of 19 tab-separated columns, as in `cities500.txt`, newline included.
    public static func row(id: Int, name: String, latitude: Double, longitude: Double, featureClass: String = "P",
                           countryCode: String, admin1: String, alternateNames: String = "", population: Int = 1000) -> String {
        let columns = [String(id), name, name, alternateNames, degrees(latitude), degrees(longitude), featureClass,
                       featureClass == "P" ? "PPL" : "MT", countryCode, "", admin1, "", "", "", String(population),
                       "", "12", "Etc/UTC", "2024-01-01"]
        return columns.joined(separator: "\t") + "\n"
    }

    /// Five decimals, no exponent, as GeoNames writes coordinates.
    static func degrees(_ value: Double) -> String {
        let units = Int64((abs(value) * 1e5).rounded())
        let fraction = String(units % 100_000)
        return (value < 0 && units != 0 ? "-" : "") + "\(units / 100_000)." + String(repeating: "0", count: 5 - fraction.count) + fraction
    }

    /// `count` places spread over the land-like latitudes (uniform on the sphere within ±70°),
    /// with names and alternate names of the lengths `cities500.txt` has (≈ 190 bytes a row):
    /// what the benchmark loads in place of the real file.
    public static func synthetic(count: Int, seed: UInt64 = 1) -> [UInt8] {
        var rng = SplitMix64(seed: seed)
        var out: [UInt8] = []
        out.reserveCapacity(count * 200)
        let syllables = ["ka", "lo", "mer", "san", "ta", "vil", "burg", "do", "ri", "an", "ville", "stadt", "pur", "ko"]
        func word(_ rng: inout SplitMix64) -> String {
            var w = ""
            for _ in 0..<Int.random(in: 2...4, using: &rng) { w += syllables.randomElement(using: &rng)! }
            return w.prefix(1).uppercased() + w.dropFirst()
        }
        let z = sin(70.0 * Double.pi / 180)
        for index in 0..<count {
            let id = index + 1
            let latitude = asin(Double.random(in: -z...z, using: &rng)) * 180 / Double.pi
            let longitude = Double.random(in: -180..<180, using: &rng)
            let name = word(&rng)
            var alternates: [String] = []
            for _ in 0..<Int.random(in: 0...12, using: &rng) { alternates.append(word(&rng)) }
            let cc = String(UnicodeScalar(UInt8(65 + Int.random(in: 0..<26, using: &rng)))) + String(UnicodeScalar(UInt8(65 + Int.random(in: 0..<26, using: &rng))))
            out.append(contentsOf: row(id: id, name: name, latitude: latitude, longitude: longitude, countryCode: cc,
                                       admin1: String(format2: Int.random(in: 1...40, using: &rng)),
                                       alternateNames: alternates.joined(separator: ","),
                                       population: Int.random(in: 500...100_000, using: &rng)).utf8)
        }
        return out
    }
}

private extension String {
    /// Two digits, zero-padded (GeoNames' numeric admin1 codes).
    init(format2 n: Int) { self = n < 10 ? "0\(n)" : String(n) }
}
