import Testing
@testable import LocationProtocol

@Suite struct JSONParserTests {
    let p = JSONParser()

    /// A file's error is shown at its line and column (a byte offset is no help in an editor):
    /// columns count characters, not bytes; an error at the end is after the last one.
    @Test func errorPositionIsLineAndColumn() {
        func position(_ text: String) -> (line: Int, column: Int)? {
            do { _ = try JSONParser().parse(text); return nil } catch { return error.position(in: text.utf8) }
        }
        #expect(position("{\n \"a\": 1,\n \"b\": [,]\n}").map { [$0.line, $0.column] } == [3, 8])
        #expect(position("{\"ü\": x}").map { [$0.line, $0.column] } == [1, 7])
        #expect(position("[1,\r\n\t2").map { [$0.line, $0.column] } == [2, 3])
        #expect(position("nul").map { [$0.line, $0.column] } == [1, 1])
    }

    @Test func scalars() throws {
        #expect(try p.parse("null") == .null)
        #expect(try p.parse(" true ") == .bool(true))
        #expect(try p.parse("false") == .bool(false))
        #expect(try p.parse("\"hi\"") == .string("hi"))
        #expect(try p.parse("[]") == .array([]))
        #expect(try p.parse("{}") == .object([:]))
    }

    @Test(arguments: [
        ("0", 0.0), ("-0", -0.0), ("12", 12), ("-3.25", -3.25), ("1e3", 1000), ("1E-2", 0.01),
        ("2.5e+2", 250), ("52.123456789", 52.123456789), ("1.7976931348623157e308", 1.7976931348623157e308),
    ])
    func numbers(text: String, value: Double) throws {
        #expect(try p.parse(text) == .number(value))
    }

    @Test(arguments: ["01", "-", "1.", ".5", "1e", "+1", "1e+", "0x10", "1e400", "NaN", "Infinity", "--1"])
    func badNumbers(text: String) {
        #expect(throws: JSONError.self) { try p.parse(text) }
    }

    @Test func nested() throws {
        let v = try p.parse(#"{"a":[1,{"b":null}],"c":"d"}"#)
        #expect(v["a"] == .array([.number(1), .object(["b": .null])]))
        #expect(v["c"] == .string("d"))
    }

    @Test func escapes() throws {
        #expect(try p.parse(#""a\"b\\c\/d\b\f\n\r\t""#) == .string("a\"b\\c/d\u{8}\u{c}\n\r\t"))
        #expect(try p.parse(#""\u00e9\u20AC""#) == .string("é€"))
        #expect(try p.parse(#""\ud83d\ude00""#) == .string("😀"))
        #expect(try p.parse("\"é😀\"") == .string("é😀"))
        #expect(try p.parse(#""\u0000""#) == .string("\u{0}"))
    }

    @Test func errorsCarryOffsets() {
        func offset(_ s: String) -> Int? {
            do { _ = try p.parse(s); return nil } catch { return error.offset }
        }
        #expect(offset("{\"a\":}") == 5)
        #expect(offset("[1,2") == 4)
        #expect(offset("{\"a\":1} x") == 8)
        #expect(offset("\"abc") == 0)
        #expect(offset(#"["\ud83d"]"#) == 2)
        #expect(offset(#""\ude00""#) == 1)
        #expect(offset(#""\x""#) == 1)
        #expect(offset("\"a\u{1}\"") == 2)
        #expect(offset(#"{"a":1,"a":2}"#) == 7)
        #expect(offset("tru") == 0)
        #expect(offset("") == 0)
        #expect(offset("{1:2}") == 1)
    }

    @Test func invalidUTF8() {
        #expect(throws: JSONError.self) { try p.parse([0x22, 0xC3, 0x28, 0x22]) }
    }

    @Test func depthAndSizeLimits() throws {
        let small = JSONParser(maxDepth: 3, maxBytes: 10)
        #expect(try small.parse("[[[1]]]") == .array([.array([.array([.number(1)])])]))
        #expect(throws: JSONError.self) { try small.parse("[[[[1]]]]") }
        #expect(throws: JSONError.self) { try small.parse("\"0123456789\"") }
        let deep = String(repeating: "[", count: 10_000)
        #expect(throws: JSONError.self) { try JSONParser(maxBytes: 100_000).parse(deep) }
    }

    @Test func writerEscapes() throws {
        let s = "q\"b\\n\n\t\u{1}é😀\u{7f}"
        let quoted = JSONWriter.quoted(s)
        #expect(quoted == #""q\"b\\n\n\t\u0001é😀\u007f""#)
        #expect(try p.parse(quoted) == .string(s))
    }

    @Test func writerNumbers() {
        #expect(JSONWriter.numberText(3) == "3")
        #expect(JSONWriter.numberText(-3) == "-3")
        #expect(JSONWriter.numberText(1.5) == "1.5")
        #expect(JSONWriter.numberText(1e20) == "1e+20")
        #expect(JSONWriter.numberText(9_007_199_254_740_992) == "9007199254740992")
        #expect(JSONWriter.numberText(-9_999_999_999_999_998) == "-9999999999999998")
        #expect(JSONWriter.numberText(1e16) == "1e+16")
        #expect(JSONWriter.numberText(.nan) == "null")
    }
}
