/// A row of a gazetteer file the reader could not use, named by its line (1-based).
public struct GazetteerError: Error, Hashable, Sendable, CustomStringConvertible {
    public var line: Int
    public var reason: String
    public init(line: Int, _ reason: String) { self.line = line; self.reason = reason }
    public var description: String { "line \(line): \(reason)" }
}

/// Reads a GeoNames dump (`cities500.txt`, `cities1000.txt`, `allCountries.txt`, …: UTF-8, one
/// place a line, tab-separated; docs/places.md, "Gazetteer") into a `Gazetteer`.
///
/// Columns used: 1 name, 4 latitude, 5 longitude, 6 feature class, 8 country code, 10 admin1
/// code (0-based). Only populated places (feature class `P`) are kept, so `allCountries.txt`
/// yields its towns and not its mountains; empty lines are skipped. A row with fewer than 11
/// columns, no name, or a latitude or longitude that is not a number in range is an error
/// naming its line: a truncated or foreign file is refused, not half-read.
public enum GeoNamesReader {
    public static func read(_ bytes: UnsafeRawBufferPointer) throws(GazetteerError) -> Gazetteer {
        var builder = Gazetteer.Builder()
        let b = bytes.bindMemory(to: UInt8.self)
        var start = 0, line = 0
        // Column boundaries of the current row: start and end of columns 0...10.
        var columnStart = [Int](repeating: 0, count: 11), columnEnd = [Int](repeating: 0, count: 11)
        while start < b.count {
            line += 1
            var end = start
            while end < b.count && b[end] != 0x0A { end += 1 }
            let next = end + 1
            if end > start && b[end - 1] == 0x0D { end -= 1 }
            defer { start = next }
            if end == start { continue }
            var column = 0, p = start
            columnStart[0] = start
            while p < end && column < 11 {
                if b[p] == 0x09 {
                    columnEnd[column] = p
                    column += 1
                    if column < 11 { columnStart[column] = p + 1 }
                }
                p += 1
            }
            if column < 11 {
                if column < 10 { throw GazetteerError(line: line, "\(column + 1) columns; a GeoNames row has 19 (name, latitude, longitude, …, country code, admin1 code)") }
                columnEnd[10] = end
            }
            func field(_ i: Int) -> UnsafeBufferPointer<UInt8> { UnsafeBufferPointer(rebasing: b[columnStart[i]..<columnEnd[i]]) }
            let featureClass = field(6)
            if !featureClass.isEmpty && !(featureClass.count == 1 && featureClass[0] == UInt8(ascii: "P")) { continue }
            let name = field(1)
            guard !name.isEmpty else { throw GazetteerError(line: line, "no name (column 2)") }
            guard let latitude = decimal(field(4)), abs(latitude) <= 90 else {
                throw GazetteerError(line: line, "latitude '\(String(decoding: field(4), as: UTF8.self))' is not a number in -90…90")
            }
            guard let longitude = decimal(field(5)), abs(longitude) <= 180 else {
                throw GazetteerError(line: line, "longitude '\(String(decoding: field(5), as: UTF8.self))' is not a number in -180…180")
            }
            builder.add(name: name, coordinate: Coordinate(latitude: latitude, longitude: longitude),
                        countryCode: String(decoding: field(8), as: UTF8.self),
                        admin1: String(decoding: field(10), as: UTF8.self))
        }
        return Gazetteer(builder)
    }

    public static func read(_ bytes: [UInt8]) throws(GazetteerError) -> Gazetteer {
        var result: Result<Gazetteer, GazetteerError>!
        bytes.withUnsafeBytes { raw in
            do throws(GazetteerError) { result = .success(try read(raw)) } catch { result = .failure(error) }
        }
        return try result.get()
    }

    /// A plain decimal (`-33.86785`): optional sign, digits, optional fraction; nothing else.
    static func decimal(_ s: UnsafeBufferPointer<UInt8>) -> Double? {
        var i = 0
        var negative = false
        if i < s.count && (s[i] == UInt8(ascii: "-") || s[i] == UInt8(ascii: "+")) { negative = s[i] == UInt8(ascii: "-"); i += 1 }
        var mantissa: Int64 = 0, scale = 0, digits = 0, fraction = false
        while i < s.count {
            let c = s[i]
            if c == UInt8(ascii: ".") && !fraction {
                fraction = true
            } else if c >= 0x30 && c <= 0x39 {
                guard digits < 18 else { return nil }
                mantissa = mantissa * 10 + Int64(c - 0x30)
                digits += 1
                if fraction { scale += 1 }
            } else {
                return nil
            }
            i += 1
        }
        guard digits > 0 else { return nil }
        let value = Double(mantissa) / Double(powerOfTen(scale))
        return negative ? -value : value
    }
}
