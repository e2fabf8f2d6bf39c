import LocationCore
import Simulation
import Testing

/// `evaluate --truth` reads every field of a truth line or refuses it with the line number
/// (blank lines counted) and the value: an unreadable departure must not mean "still there".
@Suite struct TruthFileTests {
    static let good = #"{"type":"visit","place":"office","arrival":"2026-03-10T07:22:53Z","departure":"2026-03-10T10:22:53Z","latitude":48.1,"longitude":11.5,"indoors":true}"#

    static func message(_ text: String) -> String? {
        do {
            _ = try TrueVisit.parse(lines: text)
            return nil
        } catch {
            return error.description
        }
    }

    @Test(arguments: [
        (#""departure":"2026-03-10T10:22:53Z""#, #""departure":"yesterday""#,
         #"truth line 4: departure "yesterday" is not an ISO 8601 time; expected YYYY-MM-DDTHH:MM:SS[.fraction] and Z or ±HH:MM, with a real calendar date"#),
        (#""departure":"2026-03-10T10:22:53Z""#, #""departure":"2026-03-10T10:22:53""#,
         #"truth line 4: departure "2026-03-10T10:22:53" has no time zone; add Z for UTC or an offset such as +01:00"#),
        (#""departure":"2026-03-10T10:22:53Z""#, #""departure":42"#,
         "truth line 4: departure must be an ISO 8601 time or null, not 42"),
        (#""place":"office""#, #""place":7"#, "truth line 4: place must be a string or null, not 7"),
        (#""indoors":true"#, #""indoors":"yes""#, #"truth line 4: indoors must be true or false, not "yes""#),
        (#""latitude":48.1"#, #""latitude":"48.1""#, "truth line 4: latitude and longitude are required numbers"),
        (#""latitude":48.1"#, #""latitude":91"#, "truth line 4: latitude 91, longitude 11.5 is off the globe"),
    ])
    func badFieldsAreRefusedWithTheirLine(_ field: String, _ replacement: String, _ expected: String) {
        // Line 4: a good line, two blank lines (one CRLF), then the bad one.
        let bad = Self.good.replacing(field, with: replacement)
        #expect(Self.message(Self.good + "\n\n\r\n" + bad + "\n") == expected)
    }

    @Test func crlfAndBlankLinesAreRead() throws {
        let visits = try TrueVisit.parse(lines: "\n" + Self.good + "\r\n \r\n" + Self.good.replacing(#""2026-03-10T10:22:53Z""#, with: "null"))
        #expect(visits.count == 2)
        #expect(visits.map(\.departure) == [Timestamp(seconds: 1_773_138_173), nil])
        #expect(visits.allSatisfy { $0.indoors && $0.place == "office" })
        #expect(Self.message("\n\n[1]\n") == "truth line 3 is not a JSON object; expected one visit a line, as simulate --truth writes them")
    }

    /// JSON that does not parse is shown at its line and column, as for the other JSON files
    /// locationctl reads.
    @Test func brokenJSONIsShownAtItsLineAndColumn() {
        do {
            _ = try TrueVisit.parse(lines: Self.good + "\n\n{\"arrival\": \"2026-03-10T07:22:53Z\" \"latitude\": 1}\n")
            Issue.record("accepted")
        } catch {
            #expect(error.described(file: "t.jsonl") == "t.jsonl:3:36: not JSON: unexpected '\"'; expected ',' or '}'")
        }
    }
}
