/// A parsed JSON value. Numbers are `Double` (every number the protocol carries fits one).
public enum JSONValue: Hashable, Sendable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    /// The member `key` of an object, or `nil` (also for non-objects).
    public subscript(key: String) -> JSONValue? {
        if case .object(let members) = self { return members[key] }
        return nil
    }

    /// A short name of the value's kind, for error messages.
    public var kindName: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .number: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }
}

/// Why a text is not acceptable JSON, and where (byte offset from the start of the text).
public struct JSONError: Error, Hashable, Sendable, CustomStringConvertible {
    public var offset: Int
    public var reason: String
    public init(offset: Int, reason: String) { self.offset = offset; self.reason = reason }
    public var description: String { "\(reason) at byte \(offset)" }

    /// Where the error is in `text` as an editor shows it, for files a person edits (a request
    /// keeps the byte offset: it is one line): the line, and the column in characters (a UTF-8
    /// sequence counts one, a tab too), both from 1.
    public func position(in text: some Collection<UInt8>) -> (line: Int, column: Int) {
        var line = 1, column = 1
        for b in text.prefix(offset) {
            if b == 0x0A {
                line += 1
                column = 1
            } else if b & 0xC0 != 0x80 {
                column += 1
            }
        }
        return (line, column)
    }
}

/// A strict RFC 8259 parser with limits, written for the protocol (no Foundation).
///
/// - One value, optionally surrounded by whitespace; trailing content is an error.
/// - Strings must be valid UTF-8 without raw control characters; `\uXXXX` escapes must pair
///   surrogates correctly. Duplicate object keys are rejected (their meaning is ambiguous).
/// - Nesting deeper than `maxDepth` and texts longer than `maxBytes` are rejected.
public struct JSONParser: Sendable {
    public var maxDepth: Int
    public var maxBytes: Int

    public init(maxDepth: Int = 32, maxBytes: Int = 65_536) {
        self.maxDepth = maxDepth
        self.maxBytes = maxBytes
    }

    public func parse(_ text: String) throws(JSONError) -> JSONValue {
        try parse(Array(text.utf8))
    }

    public func parse(_ bytes: [UInt8]) throws(JSONError) -> JSONValue {
        try parse(bytes[...])
    }

    public func parse(_ bytes: ArraySlice<UInt8>) throws(JSONError) -> JSONValue {
        let result: Result<JSONValue, JSONError> = bytes.withUnsafeBufferPointer { buf in
            Result { () throws(JSONError) -> JSONValue in try parse(buf) }
        }
        return try result.get()
    }

    public func parse(_ bytes: UnsafeBufferPointer<UInt8>) throws(JSONError) -> JSONValue {
        guard bytes.count <= maxBytes else {
            throw JSONError(offset: maxBytes, reason: "text is longer than \(maxBytes) bytes")
        }
        var reader = JSONReader(bytes: bytes, maxDepth: maxDepth)
        reader.skipWhitespace()
        let value = try reader.parseValue(depth: 0)
        reader.skipWhitespace()
        if reader.pos < bytes.count {
            throw JSONError(offset: reader.pos, reason: "unexpected \(JSONReader.describe(bytes[reader.pos])) after the value")
        }
        return value
    }
}

struct JSONReader {
    let bytes: UnsafeBufferPointer<UInt8>
    let maxDepth: Int
    var pos = 0

    init(bytes: UnsafeBufferPointer<UInt8>, maxDepth: Int) {
        self.bytes = bytes
        self.maxDepth = maxDepth
    }

    static func describe(_ b: UInt8) -> String {
        if b >= 0x21 && b < 0x7F { return "'\(Character(Unicode.Scalar(b)))'" }
        return "byte 0x\(String(b, radix: 16, uppercase: true))"
    }

    func fail(_ reason: String, at offset: Int? = nil) -> JSONError {
        JSONError(offset: offset ?? pos, reason: reason)
    }

    func unexpected(_ expected: String) -> JSONError {
        if pos >= bytes.count { return fail("unexpected end of text; expected \(expected)") }
        return fail("unexpected \(JSONReader.describe(bytes[pos])); expected \(expected)")
    }

    mutating func skipWhitespace() {
        while pos < bytes.count {
            switch bytes[pos] {
            case 0x20, 0x09, 0x0A, 0x0D: pos += 1
            default: return
            }
        }
    }

    mutating func parseValue(depth: Int) throws(JSONError) -> JSONValue {
        guard pos < bytes.count else { throw unexpected("a value") }
        switch bytes[pos] {
        case UInt8(ascii: "{"): return try parseObject(depth: depth + 1)
        case UInt8(ascii: "["): return try parseArray(depth: depth + 1)
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try literal("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try parseNumber())
        default: throw unexpected("a value")
        }
    }

    mutating func literal(_ word: StaticString) throws(JSONError) {
        let start = pos
        let count = word.utf8CodeUnitCount
        let w = UnsafeBufferPointer(start: word.utf8Start, count: count)
        for i in 0..<count {
            guard pos < bytes.count, bytes[pos] == w[i] else {
                throw fail("invalid literal; expected \(word)", at: start)
            }
            pos += 1
        }
    }

    mutating func parseObject(depth: Int) throws(JSONError) -> JSONValue {
        guard depth <= maxDepth else { throw fail("nesting deeper than \(maxDepth)") }
        pos += 1  // {
        var members: [String: JSONValue] = [:]
        skipWhitespace()
        if pos < bytes.count && bytes[pos] == UInt8(ascii: "}") { pos += 1; return .object(members) }
        while true {
            skipWhitespace()
            guard pos < bytes.count, bytes[pos] == UInt8(ascii: "\"") else { throw unexpected("a string key") }
            let keyOffset = pos
            let key = try parseString()
            skipWhitespace()
            guard pos < bytes.count, bytes[pos] == UInt8(ascii: ":") else { throw unexpected("':'") }
            pos += 1
            skipWhitespace()
            let value = try parseValue(depth: depth)
            if members.updateValue(value, forKey: key) != nil {
                throw fail("duplicate key \"\(key)\"", at: keyOffset)
            }
            skipWhitespace()
            guard pos < bytes.count else { throw unexpected("',' or '}'") }
            if bytes[pos] == UInt8(ascii: ",") { pos += 1; continue }
            if bytes[pos] == UInt8(ascii: "}") { pos += 1; return .object(members) }
            throw unexpected("',' or '}'")
        }
    }

    mutating func parseArray(depth: Int) throws(JSONError) -> JSONValue {
        guard depth <= maxDepth else { throw fail("nesting deeper than \(maxDepth)") }
        pos += 1  // [
        var elements: [JSONValue] = []
        skipWhitespace()
        if pos < bytes.count && bytes[pos] == UInt8(ascii: "]") { pos += 1; return .array(elements) }
        while true {
            skipWhitespace()
            elements.append(try parseValue(depth: depth))
            skipWhitespace()
            guard pos < bytes.count else { throw unexpected("',' or ']'") }
            if bytes[pos] == UInt8(ascii: ",") { pos += 1; continue }
            if bytes[pos] == UInt8(ascii: "]") { pos += 1; return .array(elements) }
            throw unexpected("',' or ']'")
        }
    }

    static func isDigit(_ b: UInt8) -> Bool { b >= 0x30 && b <= 0x39 }

    mutating func parseNumber() throws(JSONError) -> Double {
        let start = pos
        if bytes[pos] == UInt8(ascii: "-") { pos += 1 }
        guard pos < bytes.count, JSONReader.isDigit(bytes[pos]) else { throw unexpected("a digit") }
        if bytes[pos] == UInt8(ascii: "0") {
            pos += 1
            if pos < bytes.count, JSONReader.isDigit(bytes[pos]) { throw fail("leading zeros are not allowed", at: start) }
        } else {
            while pos < bytes.count, JSONReader.isDigit(bytes[pos]) { pos += 1 }
        }
        if pos < bytes.count, bytes[pos] == UInt8(ascii: ".") {
            pos += 1
            guard pos < bytes.count, JSONReader.isDigit(bytes[pos]) else { throw unexpected("a digit after '.'") }
            while pos < bytes.count, JSONReader.isDigit(bytes[pos]) { pos += 1 }
        }
        if pos < bytes.count, bytes[pos] == UInt8(ascii: "e") || bytes[pos] == UInt8(ascii: "E") {
            pos += 1
            if pos < bytes.count, bytes[pos] == UInt8(ascii: "+") || bytes[pos] == UInt8(ascii: "-") { pos += 1 }
            guard pos < bytes.count, JSONReader.isDigit(bytes[pos]) else { throw unexpected("a digit in the exponent") }
            while pos < bytes.count, JSONReader.isDigit(bytes[pos]) { pos += 1 }
        }
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<pos]), as: UTF8.self)
        guard let value = Double(text), value.isFinite else {
            throw fail("number \(text) is out of the range of a double", at: start)
        }
        return value
    }

    static func hexValue(_ b: UInt8) -> UInt32? {
        switch b {
        case 0x30...0x39: UInt32(b - 0x30)
        case 0x41...0x46: UInt32(b - 0x41 + 10)
        case 0x61...0x66: UInt32(b - 0x61 + 10)
        default: nil
        }
    }

    mutating func hex4() throws(JSONError) -> UInt32 {
        var v: UInt32 = 0
        for _ in 0..<4 {
            guard pos < bytes.count, let d = JSONReader.hexValue(bytes[pos]) else { throw unexpected("a hex digit") }
            v = v << 4 | d
            pos += 1
        }
        return v
    }

    mutating func parseString() throws(JSONError) -> String {
        let start = pos
        pos += 1  // opening quote
        var runStart = pos
        var scratch: [UInt8] = []
        var escaped = false
        while true {
            guard pos < bytes.count else { throw fail("unterminated string", at: start) }
            let b = bytes[pos]
            if b == UInt8(ascii: "\"") {
                let tail = UnsafeBufferPointer(rebasing: bytes[runStart..<pos])
                pos += 1
                if !escaped {
                    guard let s = String(validating: tail, as: UTF8.self) else {
                        throw fail("string is not valid UTF-8", at: start)
                    }
                    return s
                }
                scratch.append(contentsOf: tail)
                guard let s = String(validating: scratch, as: UTF8.self) else {
                    throw fail("string is not valid UTF-8", at: start)
                }
                return s
            }
            if b < 0x20 { throw fail("control character \(JSONReader.describe(b)) in string; escape it") }
            if b != UInt8(ascii: "\\") { pos += 1; continue }
            escaped = true
            scratch.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<pos]))
            let escapeOffset = pos
            pos += 1
            guard pos < bytes.count else { throw fail("unterminated string", at: start) }
            let e = bytes[pos]
            pos += 1
            switch e {
            case UInt8(ascii: "\""): scratch.append(0x22)
            case UInt8(ascii: "\\"): scratch.append(0x5C)
            case UInt8(ascii: "/"): scratch.append(0x2F)
            case UInt8(ascii: "b"): scratch.append(0x08)
            case UInt8(ascii: "f"): scratch.append(0x0C)
            case UInt8(ascii: "n"): scratch.append(0x0A)
            case UInt8(ascii: "r"): scratch.append(0x0D)
            case UInt8(ascii: "t"): scratch.append(0x09)
            case UInt8(ascii: "u"):
                var code = try hex4()
                if code >= 0xD800 && code < 0xDC00 {
                    guard pos + 1 < bytes.count, bytes[pos] == UInt8(ascii: "\\"), bytes[pos + 1] == UInt8(ascii: "u") else {
                        throw fail("unpaired high surrogate \\u\(String(code, radix: 16, uppercase: true))", at: escapeOffset)
                    }
                    pos += 2
                    let low = try hex4()
                    guard low >= 0xDC00 && low < 0xE000 else {
                        throw fail("high surrogate not followed by a low surrogate", at: escapeOffset)
                    }
                    code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                } else if code >= 0xDC00 && code < 0xE000 {
                    throw fail("unpaired low surrogate \\u\(String(code, radix: 16, uppercase: true))", at: escapeOffset)
                }
                guard let scalar = Unicode.Scalar(code), let units = UTF8.encode(scalar) else {
                    throw fail("invalid code point", at: escapeOffset)
                }
                for unit in units { scratch.append(unit) }
            default:
                throw fail("invalid escape \\\(Character(Unicode.Scalar(e)))", at: escapeOffset)
            }
            runStart = pos
        }
    }
}

/// Appending JSON text to a byte buffer (no Foundation, no intermediate strings).
public enum JSONWriter {
    /// Appends `s` as a JSON string literal, quotes included. Escapes `"`, `\` and control
    /// characters (as `\n`, `\t`, … or `\u00XX`); everything else is copied as UTF-8.
    public static func appendString(_ s: String, to out: inout [UInt8]) {
        out.append(0x22)
        for b in s.utf8 {
            switch b {
            case 0x22: out.append(0x5C); out.append(0x22)
            case 0x5C: out.append(0x5C); out.append(0x5C)
            case 0x0A: out.append(0x5C); out.append(UInt8(ascii: "n"))
            case 0x0D: out.append(0x5C); out.append(UInt8(ascii: "r"))
            case 0x09: out.append(0x5C); out.append(UInt8(ascii: "t"))
            case 0x08: out.append(0x5C); out.append(UInt8(ascii: "b"))
            case 0x0C: out.append(0x5C); out.append(UInt8(ascii: "f"))
            case 0..<0x20, 0x7F:
                out.append(0x5C); out.append(UInt8(ascii: "u")); out.append(0x30); out.append(0x30)
                out.append(hexDigit(b >> 4)); out.append(hexDigit(b & 0xF))
            default: out.append(b)
            }
        }
        out.append(0x22)
    }

    @inline(__always) static func hexDigit(_ v: UInt8) -> UInt8 { v < 10 ? 0x30 + v : 0x61 + v - 10 }

    /// `s` as a JSON string literal.
    public static func quoted(_ s: String) -> String {
        var out: [UInt8] = []
        appendString(s, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    @inlinable public static func appendASCII(_ s: StaticString, to out: inout [UInt8]) {
        out.append(contentsOf: UnsafeBufferPointer(start: s.utf8Start, count: s.utf8CodeUnitCount))
    }

    /// Appends `value` as JSON: a plain integer when it is integral and exact, otherwise
    /// Swift's shortest round-trip representation. Non-finite values become `null`.
    public static func appendNumber(_ value: Double, to out: inout [UInt8]) {
        guard value.isFinite else { appendASCII("null", to: &out); return }
        // Whole numbers below 10^16 as integers (2^53 and just above too, which `description`
        // writes as "9007199254740992.0"); from 10^16 `description`'s exponent form.
        if value == value.rounded(), abs(value) < 10_000_000_000_000_000 {
            DecimalFormat.appendInteger(Int64(value), to: &out)
        } else {
            out.append(contentsOf: value.description.utf8)
        }
    }

    /// A human-readable number for messages (same rules as `appendNumber`).
    public static func numberText(_ value: Double) -> String {
        var out: [UInt8] = []
        appendNumber(value, to: &out)
        return String(decoding: out, as: UTF8.self)
    }
}
