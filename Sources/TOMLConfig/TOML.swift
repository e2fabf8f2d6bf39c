/// A small TOML subset, enough for locationd.toml, with no dependency and no Foundation:
/// `[table]` headers (one level), `key = value` with bare keys, basic ("…", with escapes) and
/// literal ('…') strings, integers (decimal, `_` separators, `0x`/`0o`/`0b`), floats (incl.
/// exponents, `inf`, `nan`), booleans, one-line arrays of those (nested at most 8 deep), and `#` comments.
/// Not supported (an error names it): multi-line strings, dotted keys, inline tables, arrays of
/// tables, dates. One nested form exists: `[policy.NAME]` tables (access rules).
public enum TOMLValue: Equatable, Sendable, CustomStringConvertible {
    case string(String)
    case integer(Int64)
    case float(Double)
    case boolean(Bool)
    case array([TOMLValue])

    /// The TOML type name, for error messages.
    public var typeName: String {
        switch self {
        case .string: "a string"
        case .integer: "an integer"
        case .float: "a float"
        case .boolean: "a boolean"
        case .array: "an array"
        }
    }

    /// TOML source text for the value (used by `--check-config`).
    public var description: String {
        switch self {
        case .string(let s): TOMLValue.quote(s)
        case .integer(let i): String(i)
        case .float(let d): d.isNaN ? "nan" : d.isInfinite ? (d < 0 ? "-inf" : "inf") : String(d)
        case .boolean(let b): b ? "true" : "false"
        case .array(let a): "[" + a.map(\.description).joined(separator: ", ") + "]"
        }
    }

    static func quote(_ s: String) -> String {
        var out = "\""
        for u in s.unicodeScalars {
            switch u {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\t": out += "\\t"
            case "\r": out += "\\r"
            default:
                if u.value < 0x20 || u.value == 0x7F {
                    let hex = String(u.value, radix: 16, uppercase: true)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(u)
                }
            }
        }
        return out + "\""
    }
}

/// An error in a configuration file, printed `FILE:LINE: problem` like a compiler's.
public struct ConfigError: Error, Equatable, Sendable, CustomStringConvertible {
    public var file: String
    /// 1-based; 0 when the problem is the file as a whole (e.g. it cannot be read).
    public var line: Int
    public var message: String
    /// The file may be right and something it names not answering for now (the user database
    /// looking up a policy's user): the start exits 75 (EX_TEMPFAIL), which the unit restarts,
    /// not 78, which it does not.
    public var temporary = false

    public init(file: String, line: Int, message: String) {
        self.file = file; self.line = line; self.message = message
    }

    public var description: String { line > 0 ? "\(file):\(line): \(message)" : "\(file): \(message)" }
}

/// One `key = value` of a document.
public struct TOMLEntry: Equatable, Sendable {
    /// The table the key is in; "" for keys before the first header.
    public var table: String
    public var key: String
    public var value: TOMLValue
    public var line: Int

    /// `table.key`, or `key` at the top level.
    public var path: String { table.isEmpty ? key : "\(table).\(key)" }
}

/// A parsed document: its entries in file order and the line of each table header.
public struct TOMLDocument: Equatable, Sendable {
    public var entries: [TOMLEntry] = []
    public var tables: [(name: String, line: Int)] = []

    public static func == (a: TOMLDocument, b: TOMLDocument) -> Bool {
        a.entries == b.entries && a.tables.map(\.name) == b.tables.map(\.name) && a.tables.map(\.line) == b.tables.map(\.line)
    }

    /// Parses `text`; `file` names the source in errors.
    public static func parse(_ text: String, file: String) throws(ConfigError) -> TOMLDocument {
        var doc = TOMLDocument()
        var table = ""
        var seen: [String: Int] = [:]  // "table.key" or "[table]" → line
        var lineNumber = 0
        if text.utf8.starts(with: [0xEF, 0xBB, 0xBF]) {
            throw ConfigError(file: file, line: 1, message: "the file starts with a byte-order mark (U+FEFF), which TOML does not allow; save it as UTF-8 without one")
        }
        // Split bytes, not Characters: a String sees "\r\n" as one Character.
        for rawLine in Array(text.utf8).split(separator: 10, omittingEmptySubsequences: false) {
            lineNumber += 1
            var p = LineParser(Array(rawLine), file: file, line: lineNumber)
            try p.checkControlCharacters()
            p.skipSpaces()
            if p.atEndOrComment { continue }
            if p.peek == UInt8(ascii: "[") {
                p.index += 1
                p.skipSpaces()
                if p.peek == UInt8(ascii: "[") { throw p.error("arrays of tables ([[…]]) are not supported") }
                var name = try p.bareKey(what: "table name")
                p.skipSpaces()
                // One exception to flat tables: access rules are [policy.NAME] (docs/privacy.md).
                if name == "policy", p.peek == UInt8(ascii: ".") {
                    p.index += 1
                    p.skipSpaces()
                    name += "." + (try p.bareKey(what: "policy rule name"))
                    p.skipSpaces()
                }
                if p.peek == UInt8(ascii: ".") { throw p.error("nested tables ([\(name).…]) are not supported") }
                guard p.peek == UInt8(ascii: "]") else { throw p.error("expected ']' after table name '\(name)'") }
                p.index += 1
                try p.expectEndOfLine(after: "table header [\(name)]")
                if let first = seen["[\(name)]"] {
                    throw p.error("duplicate table [\(name)] (first defined on line \(first))")
                }
                seen["[\(name)]"] = lineNumber
                table = name
                doc.tables.append((name, lineNumber))
                continue
            }
            let key = try p.bareKey(what: "key")
            p.skipSpaces()
            if p.peek == UInt8(ascii: ".") { throw p.error("dotted keys ('\(key).…') are not supported; use a [table]") }
            guard p.peek == UInt8(ascii: "=") else { throw p.error("expected '=' after key '\(key)'") }
            p.index += 1
            p.skipSpaces()
            let path = table.isEmpty ? key : "\(table).\(key)"
            p.path = path
            let valueStart = p.index
            let value = try p.value()
            let written = String(decoding: p.bytes[valueStart..<p.index], as: UTF8.self)
            p.skipSpaces()
            if !p.atEndOrComment {
                var rest = p.bytes[p.index...].prefix { $0 != UInt8(ascii: "#") }
                while let last = rest.last, last == 32 || last == 9 { rest = rest.dropLast() }
                let tail = String(decoding: rest, as: UTF8.self)
                switch value {
                case .integer, .float:
                    // `30 s`: a unit after a space (without one, `30s` is a word value() names).
                    if LineParser.isUnit(tail) { throw p.error(LineParser.unitProblem(written + " " + tail, number: written)) }
                default: break
                }
                // Anything else (`port = 2947 foo`) is no unit: a comment without its '#', or a
                // string left unquoted. The parser does not know the key's
                // type, so quoting is offered only as the case where a string was meant: `loop =
                // true always` is no string, and quoting it would trade this error for a type error.
                let quote = switch value {
                case .string, .array: ""
                default: "; if '\(key)' takes a string, quote it whole (\(key) = \(TOMLValue.quote(written + " " + tail)))"
                }
                throw p.error("unexpected '\(tail)' after the value of '\(key)' (\(written)); a value ends the line: a comment starts with '#' (\(key) = \(written)  # \(tail))\(quote)")
            }
            if let first = seen[path] {
                throw p.error("duplicate key '\(path)' (first set on line \(first))")
            }
            seen[path] = lineNumber
            doc.entries.append(TOMLEntry(table: table, key: key, value: value, line: lineNumber))
        }
        return doc
    }
}

private struct LineParser {
    let bytes: [UInt8]
    let file: String
    let line: Int
    var index = 0
    /// The key whose value is read (`table.key`), for messages that name what to write there.
    var path = ""

    init(_ bytes: [UInt8], file: String, line: Int) {
        // A CRLF file's lines end in '\r'.
        self.bytes = bytes.last == 13 ? Array(bytes.dropLast()) : bytes
        self.file = file; self.line = line
    }

    var peek: UInt8? { index < bytes.count ? bytes[index] : nil }
    var atEndOrComment: Bool { peek == nil || peek == UInt8(ascii: "#") }

    func error(_ message: String) -> ConfigError { ConfigError(file: file, line: line, message: message) }

    mutating func skipSpaces() {
        while let c = peek, c == 32 || c == 9 { index += 1 }
    }

    /// TOML allows no control character but tab anywhere in a line — in a comment or a string
    /// either (a basic string writes them as escapes); a CR only ends a CRLF line.
    func checkControlCharacters() throws(ConfigError) {
        guard let at = bytes.firstIndex(where: { ($0 < 0x20 && $0 != 9) || $0 == 0x7F }) else { return }
        let hex = String(bytes[at], radix: 16, uppercase: true)
        throw error("control character U+\(String(repeating: "0", count: 4 - hex.count) + hex) in column \(at + 1); TOML allows only tab (in a string, write it as an escape)")
    }

    mutating func expectEndOfLine(after what: String) throws(ConfigError) {
        skipSpaces()
        guard atEndOrComment else {
            let rest = String(decoding: bytes[index...], as: UTF8.self)
            throw error("unexpected '\(rest)' after \(what)")
        }
    }

    static func isBare(_ c: UInt8) -> Bool {
        (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || (c >= 0x30 && c <= 0x39) || c == 0x5F || c == 0x2D
    }

    mutating func bareKey(what: String) throws(ConfigError) -> String {
        if peek == UInt8(ascii: "\"") || peek == UInt8(ascii: "'") {
            throw error("quoted \(what)s are not supported; use letters, digits, '_' and '-'")
        }
        let start = index
        while let c = peek, Self.isBare(c) { index += 1 }
        if let c = peek, c >= 0x80 {
            // A letter outside ASCII: named whole (not its first byte alone, read as Latin-1),
            // and by its code point, which tells an invisible one (a no-break or zero-width
            // space pasted in) that shows as a blank or as nothing.
            var end = index + 1
            while end < bytes.count, bytes[end] & 0xC0 == 0x80 { end += 1 }
            let character = String(decoding: bytes[index..<end], as: UTF8.self)
            let hex = String(character.unicodeScalars.first?.value ?? 0xFFFD, radix: 16, uppercase: true)
            let code = "U+" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
            throw error("'\(character)' (\(code)) cannot be in a \(what); use letters A–Z and a–z, digits, '_' and '-'")
        }
        guard index > start else {
            let found = peek.map { "'\(String(UnicodeScalar($0)))'" } ?? "end of line"
            throw error("expected a \(what), found \(found)")
        }
        return String(decoding: bytes[start..<index], as: UTF8.self)
    }

    /// How deep arrays may nest. No option takes even one level of nesting; the limit keeps the
    /// recursion below from overflowing the stack (`[[[[…` on one line would crash the daemon,
    /// a reload included, with nothing logged).
    static let maxArrayDepth = 8

    /// `depth`: the arrays the value is in.
    mutating func value(depth: Int = 0) throws(ConfigError) -> TOMLValue {
        guard let c = peek, c != UInt8(ascii: "#") else { throw error("missing value after '='") }
        switch c {
        case UInt8(ascii: "\""):
            if bytes[index...].starts(with: Array("\"\"\"".utf8)) { throw error("multi-line strings are not supported") }
            return .string(try basicString())
        case UInt8(ascii: "'"):
            if bytes[index...].starts(with: Array("'''".utf8)) { throw error("multi-line strings are not supported") }
            index += 1
            let start = index
            while let c = peek, c != UInt8(ascii: "'") { index += 1 }
            guard peek != nil else { throw error("unterminated string") }
            defer { index += 1 }
            return .string(String(decoding: bytes[start..<index], as: UTF8.self))
        case UInt8(ascii: "["):
            guard depth < Self.maxArrayDepth else {
                throw error("arrays nested more than \(Self.maxArrayDepth) deep are not supported")
            }
            index += 1
            var items: [TOMLValue] = []
            while true {
                skipSpaces()
                if peek == UInt8(ascii: "]") { index += 1; return .array(items) }
                if peek == nil || peek == UInt8(ascii: "#") { throw error("unterminated array (arrays must fit on one line)") }
                items.append(try value(depth: depth + 1))
                skipSpaces()
                if peek == UInt8(ascii: ",") { index += 1; continue }
                if peek == UInt8(ascii: "]") { index += 1; return .array(items) }
                throw error("expected ',' or ']' in array")
            }
        case UInt8(ascii: "{"):
            throw error("inline tables are not supported")
        default:
            let start = index
            while let c = peek, c != 32, c != 9, c != UInt8(ascii: "#"), c != UInt8(ascii: ","), c != UInt8(ascii: "]") {
                index += 1
            }
            let word = String(decoding: bytes[start..<index], as: UTF8.self)
            if word == "true" { return .boolean(true) }
            if word == "false" { return .boolean(false) }
            if let i = Self.integer(word) { return .integer(i) }
            if let d = Self.float(word) {
                if let problem = Self.floatRangeProblem(word, d) { throw error(problem) }
                return .float(d)
            }
            if word.isEmpty { throw error("missing value") }
            if let problem = Self.wordProblem(word, path: path) { throw error(problem) }
            if let first = word.utf8.first, (first >= 0x30 && first <= 0x39) || first == UInt8(ascii: "+") || first == UInt8(ascii: "-") || first == UInt8(ascii: ".") {
                throw error("invalid number '\(word)' (TOML numbers: no leading zeros, a digit on both sides of '.' and of '_', integers within 64 bits)")
            }
            throw error("invalid value '\(word)' (strings must be quoted)")
        }
    }

    /// What an unquoted word that is no TOML value was likely meant as, and what to write; nil
    /// when nothing more is known than that it is invalid. The header promises that dates are
    /// named, and a unit or `True` would otherwise read as "invalid number" or "strings must be
    /// quoted".
    static func wordProblem(_ word: String, path: String) -> String? {
        let b = Array(word.utf8)
        func digits(_ range: Range<Int>) -> Bool { range.upperBound <= b.count && b[range].allSatisfy { $0 >= 0x30 && $0 <= 0x39 } }
        if digits(0..<4), digits(5..<7), digits(8..<10), b[4] == UInt8(ascii: "-"), b[7] == UInt8(ascii: "-") {
            let date = String(word.prefix(10))
            if path == "replay.date" {
                return "'replay.date' is the TOML date \(word); dates are not supported: quote it, date = \"\(date)\""
            }
            return "dates are not supported ('\(word)')"
        }
        if digits(0..<2), digits(3..<5), b[2] == UInt8(ascii: ":") {
            return "times of day are not supported ('\(word)')"
        }
        switch word.lowercased() {
        case "true", "false":
            return "invalid value '\(word)'; a boolean is true or false (lower case, unquoted): write \(word.lowercased())"
        case "yes", "on", "no", "off":
            // Meant as a boolean, or as a string (a key that takes one): both are said.
            let boolean = ["yes", "on"].contains(word.lowercased()) ? "true" : "false"
            return "invalid value '\(word)'; a boolean is true or false (lower case, unquoted): write \(boolean); a string is quoted: \"\(word)\""
        default: break
        }
        // A number with a unit (`5s`, `1/s`, `10m`). Not after 0x/0o/0b: `0xZZ` is a bad number.
        if !(word.hasPrefix("0x") || word.hasPrefix("0o") || word.hasPrefix("0b")) {
            let number = String(decoding: b.prefix { ($0 >= 0x30 && $0 <= 0x39) || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "-")
                || $0 == UInt8(ascii: "e") || $0 == UInt8(ascii: "E") }, as: UTF8.self)
            let rest = b.dropFirst(number.utf8.count)
            if isUnit(String(decoding: rest, as: UTF8.self)), integer(number) != nil || float(number) != nil {
                return unitProblem(word, number: number)
            }
        }
        return nil
    }

    /// Whether `text`, written after a number, reads as a unit (`s`, `ms`, `/s`, `Hz`, `km`, …):
    /// only then is the number told to stand alone; other text (`2947 foo`) is no unit.
    static func isUnit(_ text: String) -> Bool {
        let t = text.lowercased()
        if t.hasPrefix("/") { return t.count > 1 }
        return units.contains(t) || (t.hasSuffix("/s") && units.contains(String(t.dropLast(2))))
    }

    static let units: Set<String> = [
        "s", "sec", "secs", "second", "seconds", "ms", "msec", "millisecond", "milliseconds", "us", "µs",
        "m", "min", "mins", "minute", "minutes", "h", "hr", "hrs", "hour", "hours", "d", "day", "days",
        "hz", "khz", "km", "%", "b", "kb", "kib", "mb", "mib", "req", "reqs", "request", "requests", "rps",
    ]

    static func unitProblem(_ written: String, number: String) -> String {
        "'\(written)': write the number alone, without a unit (\(number)); each option's unit is fixed, e.g. seconds or requests/s (docs/configuration.md)"
    }

    static func isLetter(_ c: UInt8) -> Bool { (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) }

    mutating func basicString() throws(ConfigError) -> String {
        index += 1
        var scalars = String.UnicodeScalarView()
        var raw: [UInt8] = []
        func flush() { scalars.append(contentsOf: String(decoding: raw, as: UTF8.self).unicodeScalars); raw.removeAll() }
        while true {
            guard let c = peek else { throw error("unterminated string") }
            index += 1
            if c == UInt8(ascii: "\"") { break }
            guard c == UInt8(ascii: "\\") else {
                if c < 0x20 && c != 9 { throw error("control character in string") }
                raw.append(c)
                continue
            }
            guard let e = peek else { throw error("unterminated string") }
            index += 1
            flush()
            switch e {
            case UInt8(ascii: "\""): scalars.append("\"")
            case UInt8(ascii: "\\"): scalars.append("\\")
            case UInt8(ascii: "n"): scalars.append("\n")
            case UInt8(ascii: "t"): scalars.append("\t")
            case UInt8(ascii: "r"): scalars.append("\r")
            case UInt8(ascii: "b"): scalars.append("\u{8}")
            case UInt8(ascii: "f"): scalars.append("\u{C}")
            case UInt8(ascii: "u"), UInt8(ascii: "U"):
                let n = e == UInt8(ascii: "u") ? 4 : 8
                guard index + n <= bytes.count, bytes[index..<index + n].allSatisfy({ Self.hexDigit($0) }),
                      let v = UInt32(String(decoding: bytes[index..<index + n], as: UTF8.self), radix: 16),
                      let scalar = Unicode.Scalar(v)
                else { throw error("invalid \\\(String(UnicodeScalar(e))) escape in string") }
                // TOML allows it, but every string here becomes a path, a user or a name for a C
                // call, which ends at it: "root\u0000x" would match the user root.
                guard v != 0 else {
                    let written = String(decoding: bytes[(index - 2)..<(index + n)], as: UTF8.self)
                    throw error("\(written) (NUL) in a string: no path, user or name locationd reads can hold it; remove it")
                }
                index += n
                scalars.append(scalar)
            default:
                throw error("invalid escape '\\\(String(UnicodeScalar(e)))' in string")
            }
        }
        flush()
        return String(scalars)
    }

    static func integer(_ word: String) -> Int64? {
        var s = Substring(word)
        var negative = false
        if s.first == "+" || s.first == "-" { negative = s.first == "-"; s = s.dropFirst() }
        var radix = 10
        if s.count > 2, s.hasPrefix("0x") || s.hasPrefix("0o") || s.hasPrefix("0b") {
            radix = s.hasPrefix("0x") ? 16 : s.hasPrefix("0o") ? 8 : 2
            s = s.dropFirst(2)
            if word.first == "+" || word.first == "-" { return nil }
        } else if s.count > 1, s.first == "0" {
            return nil  // no leading zeros in TOML
        }
        guard let digits = underscoresRemoved(s),
              digits.utf8.allSatisfy({ radix == 16 ? hexDigit($0) : $0 >= 0x30 && $0 < 0x30 + UInt8(radix) })
        else { return nil }  // Int64(_:radix:) would take a second sign: --2947
        guard let magnitude = Int64(digits, radix: radix) else {
            if negative, digits == "9223372036854775808" { return Int64.min }
            return nil
        }
        return negative ? -magnitude : magnitude
    }

    static func float(_ word: String) -> Double? {
        switch word {
        case "inf", "+inf": return .infinity
        case "-inf": return -.infinity
        case "nan", "+nan", "-nan": return .nan
        default: break
        }
        guard isFloat(Array(word.utf8)), let digits = underscoresRemoved(Substring(word)) else { return nil }
        return Double(digits)
    }

    /// Why a float literal does not read as the number written, nil when it does: past the
    /// range of a Double it became inf (then 'flood_rate' "is inf"), below it 0.
    static func floatRangeProblem(_ word: String, _ value: Double) -> String? {
        if value.isInfinite, !word.hasSuffix("inf") {
            return "number '\(word)' is beyond the range of a float (±1.7976931348623157e308); write a smaller one"
        }
        let mantissa = word.utf8.prefix { $0 != UInt8(ascii: "e") && $0 != UInt8(ascii: "E") }
        if value == 0, mantissa.contains(where: { $0 >= UInt8(ascii: "1") && $0 <= UInt8(ascii: "9") }) {
            return "number '\(word)' is too close to 0 for a float (the smallest is 5e-324): it would read as 0; write 0 or a larger one"
        }
        return nil
    }

    /// TOML 1.0's float: `[+-]` integer part (`0`, or no leading zero), then a fraction `.digits`
    /// and/or an exponent `e[+-]digits`; an underscore only between two digits.
    static func isFloat(_ b: [UInt8]) -> Bool {
        var i = 0
        func digits() -> Int {  // digits with single underscores between them; their count
            let start = i
            while i < b.count {
                if b[i] >= 0x30 && b[i] <= 0x39 { i += 1; continue }
                if b[i] == UInt8(ascii: "_"), i > start, i + 1 < b.count, b[i - 1] >= 0x30 && b[i - 1] <= 0x39,
                   b[i + 1] >= 0x30 && b[i + 1] <= 0x39 { i += 1; continue }
                break
            }
            return i - start
        }
        if i < b.count, b[i] == UInt8(ascii: "+") || b[i] == UInt8(ascii: "-") { i += 1 }
        let intStart = i
        guard digits() > 0 else { return false }
        if b[intStart] == UInt8(ascii: "0") && i - intStart > 1 { return false }  // 01.5
        var fractionOrExponent = false
        if i < b.count, b[i] == UInt8(ascii: ".") {
            i += 1
            guard digits() > 0 else { return false }
            fractionOrExponent = true
        }
        if i < b.count, b[i] == UInt8(ascii: "e") || b[i] == UInt8(ascii: "E") {
            i += 1
            if i < b.count, b[i] == UInt8(ascii: "+") || b[i] == UInt8(ascii: "-") { i += 1 }
            guard digits() > 0 else { return false }
            fractionOrExponent = true
        }
        return fractionOrExponent && i == b.count
    }

    static func hexDigit(_ c: UInt8) -> Bool {
        (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x46) || (c >= 0x61 && c <= 0x66)
    }

    /// `1_000` → `1000`; nil for a misplaced underscore.
    static func underscoresRemoved(_ s: Substring) -> String? {
        // Adjacent underscores compared pairwise: `contains("__")` is _StringProcessing's, a
        // module the daemon does not otherwise link (GPSDMessage.firstRange).
        let doubled = zip(s.utf8, s.utf8.dropFirst()).contains { $0 == UInt8(ascii: "_") && $1 == UInt8(ascii: "_") }
        guard !s.hasPrefix("_"), !s.hasSuffix("_"), !doubled else { return nil }
        return s.filter { $0 != "_" }
    }
}
