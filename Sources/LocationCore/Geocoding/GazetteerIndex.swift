/// A gazetteer's index as a file (`locationctl gazetteer build`; docs/places.md, "Gazetteer"):
/// the arrays of a built `Gazetteer` as they are in memory, so loading is copying them back —
/// no parsing, no tree to build. It names the dump it was built from by size and modification
/// time: a daemon uses it only while the dump is that file.
///
/// Layout, native byte order (a check word tells another machine's apart), 4-byte aligned:
/// the magic `locgaz1\n`; UInt32 check `0x01020304`, places `n`, name bytes, regions `r`,
/// region text bytes; Int64 dump size and modification time (ns since 1970); then Float
/// `x`, `y`, `z`, `latitude`, `longitude` (n each), UInt32 `nameStart` (n + 1) and `region`
/// (n), the names, and the regions as `countryCode<TAB>admin1<LF>` lines.
public enum GazetteerIndex {
    static let magic = Array("locgaz1\n".utf8)
    static let check: UInt32 = 0x0102_0304
    static let headerSize = 8 + 5 * 4 + 2 * 8

    /// Which dump an index was built from.
    public struct Source: Hashable, Sendable {
        public var size: Int64
        /// Modification time, nanoseconds since 1970.
        public var modified: Int64
        public init(size: Int64, modified: Int64) { self.size = size; self.modified = modified }
    }

    /// Why an index cannot be used.
    public struct Problem: Error, Hashable, Sendable {
        public var reason: String
        init(_ reason: String) { self.reason = reason }
        public init(reason: String) { self.reason = reason }
    }

    /// The index file's bytes for `gazetteer`, built from the dump `source`.
    public static func bytes(of g: Gazetteer, source: Source) -> [UInt8] {
        var regionText: [UInt8] = []
        for r in g.regions { regionText += Array(r.countryCode.utf8) + [9] + Array(r.admin1.utf8) + [10] }
        var out = magic
        func put<T>(_ value: T) { withUnsafeBytes(of: value) { out.append(contentsOf: $0) } }
        func put<T>(_ array: [T]) { array.withUnsafeBytes { out.append(contentsOf: $0) } }
        put(check); put(UInt32(g.count)); put(UInt32(g.names.count)); put(UInt32(g.regions.count)); put(UInt32(regionText.count))
        put(source.size); put(source.modified)
        put(g.x); put(g.y); put(g.z); put(g.latitude); put(g.longitude)
        put(g.nameStart); put(g.region)
        out += g.names
        out += regionText
        return out
    }

    /// The dump an index names, or a problem if it is no index of this format.
    public static func source(of bytes: UnsafeRawBufferPointer) throws(Problem) -> Source {
        try header(bytes).source
    }

    /// The gazetteer an index holds if it was built from the dump `source` is now: the rule by
    /// which the daemon and `locationctl replay` take an index for its dump.
    public static func gazetteer(from bytes: UnsafeRawBufferPointer, builtFrom source: Source) throws(Problem) -> Gazetteer {
        let built = try header(bytes).source
        guard built == source else {
            throw Problem("was built from another version of the dump (\(built.size) bytes, not \(source.size), or another modification time)")
        }
        return try gazetteer(from: bytes)
    }

    /// The gazetteer an index holds. Every offset is checked against the file's length and
    /// every reference against what it refers to, so a truncated or foreign file is refused,
    /// never read out of bounds.
    public static func gazetteer(from bytes: UnsafeRawBufferPointer) throws(Problem) -> Gazetteer {
        let h = try header(bytes)
        var at = headerSize
        func floats() -> [Float] {
            defer { at += h.count * 4 }
            return [Float](unsafeUninitializedCapacity: h.count) { buf, n in
                UnsafeMutableRawBufferPointer(buf).copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[at..<at + h.count * 4]))
                n = h.count
            }
        }
        func words(_ count: Int) -> [UInt32] {
            defer { at += count * 4 }
            return [UInt32](unsafeUninitializedCapacity: count) { buf, n in
                UnsafeMutableRawBufferPointer(buf).copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[at..<at + count * 4]))
                n = count
            }
        }
        let x = floats(), y = floats(), z = floats(), latitude = floats(), longitude = floats()
        let nameStart = words(h.count + 1), region = words(h.count)
        let names = Array(bytes[at..<at + h.nameBytes])
        at += h.nameBytes
        guard nameStart.first == 0, nameStart.last == UInt32(h.nameBytes),
              zip(nameStart, nameStart.dropFirst()).allSatisfy({ $0 <= $1 }) else {
            throw Problem("has name offsets out of order (damaged)")
        }
        guard region.allSatisfy({ $0 < UInt32(h.regions) }) else { throw Problem("has a place of a region it does not hold (damaged)") }
        var regions: [(countryCode: String, admin1: String)] = []
        regions.reserveCapacity(h.regions)
        for line in bytes[at..<at + h.regionBytes].split(separator: 10, omittingEmptySubsequences: false).dropLast() {
            let fields = line.split(separator: 9, omittingEmptySubsequences: false)
            guard fields.count == 2 else { throw Problem("has a region that is not a country and admin1 code (damaged)") }
            regions.append((String(decoding: fields[0], as: UTF8.self), String(decoding: fields[1], as: UTF8.self)))
        }
        guard regions.count == h.regions else { throw Problem("has \(regions.count) regions, its header says \(h.regions) (damaged)") }
        return Gazetteer(x: x, y: y, z: z, latitude: latitude, longitude: longitude,
                         nameStart: nameStart, names: names, region: region, regions: regions)
    }

    struct Header {
        var count: Int, nameBytes: Int, regions: Int, regionBytes: Int
        var source: Source
    }

    static func header(_ bytes: UnsafeRawBufferPointer) throws(Problem) -> Header {
        guard bytes.count >= headerSize, bytes.prefix(8).elementsEqual(magic) else {
            throw Problem("is no gazetteer index of this version")
        }
        func word(_ i: Int) -> UInt32 { bytes.loadUnaligned(fromByteOffset: 8 + 4 * i, as: UInt32.self) }
        func long(_ i: Int) -> Int64 { bytes.loadUnaligned(fromByteOffset: 28 + 8 * i, as: Int64.self) }
        guard word(0) == check else { throw Problem("was built on a machine of another byte order") }
        let h = Header(count: Int(word(1)), nameBytes: Int(word(2)), regions: Int(word(3)), regionBytes: Int(word(4)),
                       source: Source(size: long(0), modified: long(1)))
        let expected = headerSize + h.count * 4 * 7 + 4 + h.nameBytes + h.regionBytes
        guard bytes.count == expected else {
            throw Problem("is \(bytes.count) bytes, its header says \(expected) (truncated or damaged)")
        }
        return h
    }
}
