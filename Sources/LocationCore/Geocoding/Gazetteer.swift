/// The populated place nearest a position, as events carry it (docs/places.md, "Locality").
public struct Locality: Hashable, Sendable {
    public var name: String
    /// ISO 3166-1 alpha-2, as GeoNames gives it (empty for places in no country).
    public var countryCode: String
    /// GeoNames' first-level administrative division code (e.g. `CA` in the US, `08` in France).
    public var admin1: String
    /// Great-circle distance from the position looked up to the place, metres.
    public var distance: Double

    public init(name: String, countryCode: String, admin1: String, distance: Double) {
        self.name = name; self.countryCode = countryCode; self.admin1 = admin1; self.distance = distance
    }
}

/// One place of a gazetteer before indexing.
public struct GazetteerPlace: Hashable, Sendable {
    public var name: String
    public var coordinate: Coordinate
    public var countryCode: String
    public var admin1: String

    public init(name: String, coordinate: Coordinate, countryCode: String, admin1: String) {
        self.name = name; self.coordinate = coordinate; self.countryCode = countryCode; self.admin1 = admin1
    }
}

/// Populated places in a static 3-D k-d tree over their points on the unit sphere: the nearest
/// by straight-line (chord) distance is the nearest by great-circle distance, so the search has
/// no seam at the antimeridian and no singularity at the poles.
///
/// Compact: the tree is implicit (the places are stored in tree order, a node being the middle
/// of its range), names are one UTF-8 buffer, and a country and admin-1 code pair is stored once
/// and referenced by number — 28 bytes a place plus its name (`byteSize`). Immutable once built.
public final class Gazetteer: Sendable {
    /// Ranges this short are scanned rather than split.
    static let leafSize = 8

    // Column per field, in tree order; coordinates as Float (≈ 1 m at the antimeridian).
    let x: [Float], y: [Float], z: [Float]
    let latitude: [Float], longitude: [Float]
    /// Byte offsets of each name in `names`, one more than places (the last is the end).
    let nameStart: [UInt32]
    let names: [UInt8]
    /// Index into `regions` per place.
    let region: [UInt32]
    let regions: [(countryCode: String, admin1: String)]

    public var count: Int { x.count }

    /// Bytes held by the index's arrays (what it keeps resident, less allocator overhead).
    public var byteSize: Int {
        (x.count + y.count + z.count + latitude.count + longitude.count) * MemoryLayout<Float>.stride
            + (nameStart.count + region.count) * MemoryLayout<UInt32>.stride + names.count
            + regions.reduce(0) { $0 + 32 + $1.countryCode.utf8.count + $1.admin1.utf8.count }
    }

    public convenience init(places: [GazetteerPlace]) {
        var builder = Builder()
        for p in places { builder.add(name: p.name.utf8, coordinate: p.coordinate, countryCode: p.countryCode, admin1: p.admin1) }
        self.init(builder)
    }

    init(_ b: Builder) {
        let n = b.latitude.count
        var order = [Int32](unsafeUninitializedCapacity: n) { buf, count in
            for i in 0..<n { buf[i] = Int32(i) }
            count = n
        }
        var px = [Float](), py = [Float](), pz = [Float]()
        px.reserveCapacity(n); py.reserveCapacity(n); pz.reserveCapacity(n)
        for i in 0..<n {
            let v = Geodesy.unitVector(Coordinate(latitude: Double(b.latitude[i]), longitude: Double(b.longitude[i])))
            px.append(Float(v.x)); py.append(Float(v.y)); pz.append(Float(v.z))
        }
        Gazetteer.sortTree(&order, px, py, pz, 0, n, axis: 0)
        var names: [UInt8] = []
        names.reserveCapacity(b.names.count)
        var nameStart: [UInt32] = []
        nameStart.reserveCapacity(n + 1)
        for i in order {
            nameStart.append(UInt32(names.count))
            names.append(contentsOf: b.names[Int(b.nameStart[Int(i)])..<Int(b.nameStart[Int(i) + 1])])
        }
        nameStart.append(UInt32(names.count))
        self.x = order.map { px[Int($0)] }
        self.y = order.map { py[Int($0)] }
        self.z = order.map { pz[Int($0)] }
        self.latitude = order.map { b.latitude[Int($0)] }
        self.longitude = order.map { b.longitude[Int($0)] }
        self.region = order.map { b.region[Int($0)] }
        self.nameStart = nameStart
        self.names = names
        self.regions = b.regions
    }

    /// The arrays of an index file (`GazetteerIndex`), already in tree order.
    init(x: [Float], y: [Float], z: [Float], latitude: [Float], longitude: [Float],
         nameStart: [UInt32], names: [UInt8], region: [UInt32], regions: [(countryCode: String, admin1: String)]) {
        self.x = x; self.y = y; self.z = z; self.latitude = latitude; self.longitude = longitude
        self.nameStart = nameStart; self.names = names; self.region = region; self.regions = regions
    }

    /// The nearest place to `c`, or nil for an empty gazetteer.
    public func nearest(_ c: Coordinate) -> Locality? {
        guard let i = nearestIndex(c) else { return nil }
        let place = Coordinate(latitude: Double(latitude[i]), longitude: Double(longitude[i]))
        let r = regions[Int(region[i])]
        let name = String(decoding: names[Int(nameStart[i])..<Int(nameStart[i + 1])], as: UTF8.self)
        return Locality(name: name, countryCode: r.countryCode, admin1: r.admin1, distance: Geodesy.distance(c, place))
    }

    /// The index (tree order) of the place nearest `c`.
    func nearestIndex(_ c: Coordinate) -> Int? {
        guard !x.isEmpty else { return nil }
        let v = Geodesy.unitVector(c)
        var search = Search(qx: Float(v.x), qy: Float(v.y), qz: Float(v.z))
        x.withUnsafeBufferPointer { xs in
            y.withUnsafeBufferPointer { ys in
                z.withUnsafeBufferPointer { zs in
                    search.run(xs, ys, zs, 0, xs.count, axis: 0)
                }
            }
        }
        return search.best
    }

    struct Search {
        let qx: Float, qy: Float, qz: Float
        var best = -1
        var bestDistance = Float.infinity

        init(qx: Float, qy: Float, qz: Float) { self.qx = qx; self.qy = qy; self.qz = qz }

        mutating func consider(_ i: Int, _ xs: UnsafeBufferPointer<Float>, _ ys: UnsafeBufferPointer<Float>, _ zs: UnsafeBufferPointer<Float>) {
            let dx = xs[i] - qx, dy = ys[i] - qy, dz = zs[i] - qz
            let d = dx * dx + dy * dy + dz * dz
            if d < bestDistance { bestDistance = d; best = i }
        }

        mutating func run(_ xs: UnsafeBufferPointer<Float>, _ ys: UnsafeBufferPointer<Float>, _ zs: UnsafeBufferPointer<Float>,
                          _ lo: Int, _ hi: Int, axis: Int) {
            if hi - lo <= Gazetteer.leafSize {
                for i in lo..<hi { consider(i, xs, ys, zs) }
                return
            }
            let m = (lo + hi) >> 1
            consider(m, xs, ys, zs)
            let split: Float, q: Float
            switch axis {
            case 0: split = xs[m]; q = qx
            case 1: split = ys[m]; q = qy
            default: split = zs[m]; q = qz
            }
            let next = axis == 2 ? 0 : axis + 1
            let d = q - split
            if d <= 0 {
                run(xs, ys, zs, lo, m, axis: next)
                if d * d < bestDistance { run(xs, ys, zs, m + 1, hi, axis: next) }
            } else {
                run(xs, ys, zs, m + 1, hi, axis: next)
                if d * d < bestDistance { run(xs, ys, zs, lo, m, axis: next) }
            }
        }
    }

    /// Orders `order[lo..<hi]` as an implicit k-d tree: the middle element splits the range on
    /// `axis`, those before it are not greater on that axis, those after not smaller.
    static func sortTree(_ order: inout [Int32], _ xs: [Float], _ ys: [Float], _ zs: [Float], _ lo: Int, _ hi: Int, axis: Int) {
        if hi - lo <= leafSize { return }
        let m = (lo + hi) >> 1
        let key: [Float] = axis == 0 ? xs : axis == 1 ? ys : zs
        select(&order, key, m, lo, hi - 1)
        let next = axis == 2 ? 0 : axis + 1
        sortTree(&order, xs, ys, zs, lo, m, axis: next)
        sortTree(&order, xs, ys, zs, m + 1, hi, axis: next)
    }

    /// Quickselect (Hoare partition, middle pivot): puts the `k`-th smallest of
    /// `order[left...right]` by `key` at `k`, smaller-or-equal before, greater-or-equal after.
    static func select(_ order: inout [Int32], _ key: [Float], _ k: Int, _ left: Int, _ right: Int) {
        var left = left, right = right
        order.withUnsafeMutableBufferPointer { o in
            key.withUnsafeBufferPointer { key in
                while left < right {
                    let pivot = key[Int(o[(left + right) >> 1])]
                    var i = left, j = right
                    while i <= j {
                        while key[Int(o[i])] < pivot { i += 1 }
                        while key[Int(o[j])] > pivot { j -= 1 }
                        if i <= j { o.swapAt(i, j); i += 1; j -= 1 }
                    }
                    if k <= j { right = j } else if k >= i { left = i } else { return }
                }
            }
        }
    }

    /// Places gathered before indexing, in the columns the index keeps.
    struct Builder {
        var latitude: [Float] = []
        var longitude: [Float] = []
        var nameStart: [UInt32] = [0]
        var names: [UInt8] = []
        var region: [UInt32] = []
        var regions: [(countryCode: String, admin1: String)] = []
        var regionIndex: [String: UInt32] = [:]

        mutating func add(name: some Collection<UInt8>, coordinate: Coordinate, countryCode: String, admin1: String) {
            latitude.append(Float(coordinate.latitude))
            longitude.append(Float(coordinate.longitude))
            names.append(contentsOf: name)
            nameStart.append(UInt32(names.count))
            let key = countryCode + "\t" + admin1
            if let r = regionIndex[key] {
                region.append(r)
            } else {
                let r = UInt32(regions.count)
                regions.append((countryCode, admin1))
                regionIndex[key] = r
                region.append(r)
            }
        }
    }
}
