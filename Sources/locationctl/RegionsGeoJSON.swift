import ArgumentParser
import LocationCore
import LocationProtocol
#if canImport(Glibc)
import Glibc
#endif

/// The GeoJSON convention for regions (docs/regions.md): a FeatureCollection of Point features,
/// `properties.id` (string or number; else the feature's `id`), `properties.radius` (metres), optional `dwell`
/// (seconds), `notifyOnEntry`/`notifyOnExit`/`notifyInitialState` (booleans) and `metadata`.
enum RegionsGeoJSON {
    static func read(path: String) throws -> [Region] {
        let bytes = try readFileBytes(path, what: "GeoJSON file")
        let value: JSONValue
        do { value = try JSONParser(maxDepth: 32, maxBytes: 1 << 28).parse(bytes) } catch {
            let at = error.position(in: bytes)
            throw RuntimeError("\(path):\(at.line):\(at.column): not JSON: \(error.reason)")
        }
        return try parse(value, name: path)
    }

    /// What a file that is no FeatureCollection holds instead, and how to make it one: a bare
    /// Feature or Point needs more than what was expected.
    static func notACollection(_ value: JSONValue) -> String {
        func wrap(_ inside: String = "…") -> String { #"put it in one: {"type":"FeatureCollection","features":["# + inside + "]}" }
        switch value {
        case .object:
            guard case .string(let type)? = value["type"] else { return "found an object without a \"type\"" }
            switch type {
            case "FeatureCollection": return "its \"features\" is missing or not an array"
            case "Feature": return "found a single Feature: \(wrap())"
            case "Point":
                return "found a bare Point geometry: make it a Feature's geometry ({\"type\":\"Feature\",\"geometry\":…,\"properties\":{…}}) and \(wrap())"
            case "Polygon", "MultiPoint", "LineString", "MultiLineString", "MultiPolygon", "GeometryCollection":
                return "found a bare \(type) geometry: a region is a Feature with a Point geometry (its centre) and properties.radius (metres), in a FeatureCollection"
            default: return "found \"type\": \"\(type)\""
            }
        case .array: return "found an array: \(wrap("the array's Features"))"
        default: return "found no object"
        }
    }

    static func parse(_ value: JSONValue, name: String) throws -> [Region] {
        guard value["type"] == .string("FeatureCollection"), case .array(let features)? = value["features"] else {
            throw RuntimeError("\(name): expected a GeoJSON FeatureCollection with a features array; \(notACollection(value))")
        }
        var regions: [Region] = []
        var featureOfID: [String: Int] = [:]
        for (i, f) in features.enumerated() {
            let at = "\(name): features[\(i)]"
            // RFC 7946: a FeatureCollection's members are Features (taken for one, a bare Polygon
            // would have its own "geometry" and "properties" looked up).
            switch f["type"] {
            case .string("Feature")?: break
            case .string(let type)?: throw RuntimeError("\(at): type is \"\(type)\"; expected \"Feature\" (a Point geometry with properties.id and properties.radius)")
            case let other?: throw RuntimeError("\(at): type must be the string \"Feature\", not \(other.kindName)")
            case nil: throw RuntimeError("\(at): has no type; expected \"Feature\" (a Point geometry with properties.id and properties.radius)")
            }
            let (lon, lat) = try point(f["geometry"], at: at)
            guard case .object(var p)? = f["properties"] else {
                throw RuntimeError("\(at): properties is \(f["properties"]?.kindName ?? "missing"); a region needs an object with radius (metres), and id unless the feature has one")
            }
            // Other properties (name, stroke, …) are the file's own and ignored, but one a letter
            // or two from a region's is a typo that would register the region with the default. Not
            // when the feature has the region's own too: then it is the file's (radius_m beside radius).
            for key in p.keys.sorted() {
                if let meant = meant(key), p[meant] == nil {
                    throw RuntimeError("\(at).properties: \(JSONWriter.quoted(key)) is no region property; did you mean \(JSONWriter.quoted(meant))? Rename it: as written it is ignored and the region registered without it (properties a region does not take, such as name or stroke, are ignored)")
                }
            }
            let id: String
            // The feature's own `id` (RFC 7946) when the properties have none or a null one.
            switch p["id"].flatMap({ $0 == .null ? nil : $0 }) ?? f["id"] {
            case .string(let s)?: id = s
            case .number(let n)?: id = JSONWriter.numberText(n)
            default: throw RuntimeError("\(at): properties.id (or the feature's id) must be a string or a number")
            }
            // Before anything is sent: in another request than the first, the daemon would refuse
            // it after the requests before were registered.
            if let j = featureOfID.updateValue(i, forKey: id) {
                throw RuntimeError("\(at): id '\(id)' is also features[\(j)]'s; region ids must be unique: rename or remove one of them")
            }
            p["id"] = .string(id)
            p["latitude"] = .number(lat)
            p["longitude"] = .number(lon)
            p.removeValue(forKey: "state")
            do {
                regions.append(try RegionCodec.decodeRegion(.object(p), at: i, id: nil, label: "features[\(i)].properties"))
            } catch {
                throw RuntimeError("\(name): \(error.message)")  // it names features[i].properties
            }
        }
        return regions
    }

    /// What a feature's properties give a region (docs/regions.md, "GeoJSON").
    static let propertyKeys = ["id", "radius", "dwell", "notifyOnEntry", "notifyOnExit", "notifyInitialState", "metadata"]

    /// The region property `key` is a near miss of, nil when it is one or not close to one: the
    /// same letters but for case, `_`, `-` and spaces (`notify_on_entry`), or one edit away,
    /// for a property of five letters or more (two from one of eight or more: `notifyOnEnter`). A
    /// transposition counts as one edit.
    static func meant(_ key: String) -> String? {
        // `state` is what export adds, and import drops.
        guard !propertyKeys.contains(key), key != "state" else { return nil }
        func folded(_ s: String) -> [Unicode.Scalar] {
            s.lowercased().unicodeScalars.filter { $0 != "_" && $0 != "-" && $0 != " " }
        }
        let k = folded(key)
        return propertyKeys.first { known in
            let n = folded(known)
            // Not `id`: exports carry their own `_id` or `ID` (a database's key), which is no typo.
            if k == n { return n.count >= 5 }
            let allowed = n.count >= 8 ? 2 : n.count >= 5 ? 1 : 0
            return allowed > 0 && abs(k.count - n.count) <= allowed && editDistance(k, n) <= allowed
        }
    }

    /// Optimal string alignment distance: insertions, deletions, substitutions and swaps of two
    /// neighbours.
    static func editDistance(_ a: [Unicode.Scalar], _ b: [Unicode.Scalar]) -> Int {
        guard !a.isEmpty, !b.isEmpty else { return max(a.count, b.count) }
        var d = [[Int]](repeating: [Int](repeating: 0, count: b.count + 1), count: a.count + 1)
        for i in 0...a.count { d[i][0] = i }
        for j in 0...b.count { d[0][j] = j }
        for i in 1...a.count {
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
                }
            }
        }
        return d[a.count][b.count]
    }

    /// A Point geometry's `[longitude, latitude]`; errors say what the feature has instead.
    static func point(_ geometry: JSONValue?, at: String) throws -> (Double, Double) {
        let expected = "expected a Point with [longitude, latitude] (a region is its centre and properties.radius)"
        guard case .object? = geometry else {
            throw RuntimeError("\(at): geometry is \(geometry?.kindName ?? "missing"); \(expected)")
        }
        switch geometry?["type"] {
        case .string("Point")?: break
        case .string(let type)?: throw RuntimeError("\(at): geometry is a \(type); \(expected)")
        case let other?: throw RuntimeError("\(at): geometry.type must be the string \"Point\", not \(other.kindName)")
        case nil: throw RuntimeError("\(at): geometry has no type; \(expected)")
        }
        guard case .array(let c)? = geometry?["coordinates"], c.count >= 2 else {
            let found = switch geometry?["coordinates"] {
            case .array(let c)?: "an array of \(c.count)"
            case let other?: other.kindName
            case nil: "missing"
            }
            throw RuntimeError("\(at): geometry.coordinates must be [longitude, latitude], not \(found)")
        }
        func number(_ k: Int, _ name: String) throws -> Double {
            switch c[k] {
            case .number(let n): return n
            case .string(let text): throw RuntimeError("\(at): geometry.coordinates[\(k)] (\(name)) must be a number, not the string \"\(text)\": write it without quotes")
            case let other: throw RuntimeError("\(at): geometry.coordinates[\(k)] (\(name)) must be a number, not \(other.kindName)")
            }
        }
        let (lon, lat) = (try number(0, "longitude"), try number(1, "latitude"))
        // Checked here, not left to the region's decoding, which would name `properties` for a
        // coordinate and say nothing of the order, the usual mistake (latitude first).
        let swapped = abs(lat) <= 180 && abs(lon) <= 90 ? " (GeoJSON order is [longitude, latitude]: swapped?)" : " (GeoJSON order is [longitude, latitude])"
        guard (-180...180).contains(lon) else {
            throw RuntimeError("\(at): geometry.coordinates[0] (longitude) is \(JSONWriter.numberText(lon)); expected -180…180\(swapped)")
        }
        guard (-90...90).contains(lat) else {
            throw RuntimeError("\(at): geometry.coordinates[1] (latitude) is \(JSONWriter.numberText(lat)); expected -90…90\(swapped)")
        }
        return (lon, lat)
    }

    static func export(_ records: [RegionRecord]) -> String {
        points(records, id: { _ in nil }, encode: RegionCodec.appendRegion)
    }

    /// A FeatureCollection of Points, one a line: each item's protocol object (`encode`) with
    /// its latitude/longitude as the geometry and the rest as properties; `id` the feature's.
    static func points<Item>(_ items: [Item], id: (Item) -> String?, encode: (Item, inout [UInt8]) -> Void) -> String {
        var out: [UInt8] = []
        JSONWriter.appendASCII("{\"type\":\"FeatureCollection\",\"features\":[", to: &out)
        var first = true
        for item in items {
            var body: [UInt8] = []
            encode(item, &body)
            guard case .object(var p)? = try? JSONParser(maxDepth: 32, maxBytes: 1 << 20).parse(body),
                  case .number(let latitude)? = p.removeValue(forKey: "latitude"),
                  case .number(let longitude)? = p.removeValue(forKey: "longitude") else { continue }
            if !first { JSONWriter.appendASCII(",\n", to: &out) } else { out.append(0x0A) }
            first = false
            JSONWriter.appendASCII("{\"type\":\"Feature\",", to: &out)
            if let id = id(item) {
                JSONWriter.appendASCII("\"id\":", to: &out)
                JSONWriter.appendString(id, to: &out)
                out.append(UInt8(ascii: ","))
            }
            JSONWriter.appendASCII("\"geometry\":{\"type\":\"Point\",\"coordinates\":[", to: &out)
            DecimalFormat.appendFixed(longitude, decimals: 9, to: &out)
            out.append(UInt8(ascii: ","))
            DecimalFormat.appendFixed(latitude, decimals: 9, to: &out)
            JSONWriter.appendASCII("]},\"properties\":", to: &out)
            JSONWriter.appendValue(.object(p), to: &out)
            out.append(UInt8(ascii: "}"))
        }
        JSONWriter.appendASCII("\n]}\n", to: &out)
        return String(decoding: out, as: UTF8.self)
    }
}
