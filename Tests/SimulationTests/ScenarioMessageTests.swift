import Simulation
import Testing

/// Legs that could be misread silently (a typo in a target as a move of zero metres, a second
/// mode or a string `indoors` ignored) are refused, and every parse error names
/// the JSON path and the value.
@Suite struct ScenarioMessageTests {
    static func message(_ fields: String) -> String? {
        let text = #"{"start":"2026-03-10T07:00:00Z","origin":{"latitude":48.1,"longitude":11.5},"# + fields + "}"
        do {
            _ = try Scenario.parse(text)
            return nil
        } catch {
            return error.description
        }
    }

    @Test(arguments: [
        (#""legs":[{"stay":60},{"walk":{"lat":48.2,"lon":11.6}}]"#,
         #"legs[1].walk: unknown field "lat"; expected one of east, latitude, longitude, north"#),
        (#""legs":[{"walk":{"nrth":500}}]"#,
         #"legs[0].walk: unknown field "nrth"; expected one of east, latitude, longitude, north"#),
        (#""legs":[{"walk":{"latitude":48.2}}]"#,
         "legs[0].walk.longitude is missing; a position needs both latitude and longitude"),
        (#""legs":[{"drive":{"longitude":11.6}}]"#,
         "legs[0].drive.latitude is missing; a position needs both latitude and longitude"),
        (#""legs":[{"walk":{}}]"#, "legs[0].walk is empty; give {latitude, longitude} or {north, east} in metres"),
        (#""legs":[{"walk":{"latitude":48.2,"longitude":11.6,"north":100}}]"#,
         "legs[0].walk has both latitude/longitude and north/east; give a position or an offset, not both"),
        (#""legs":[{"walk":{"north":100},"drive":{"north":200}}]"#,
         "legs[0] has walk and drive; a leg is exactly one of stay, walk, cycle or drive: make each its own leg"),
        (#""legs":[{"stay":60,"walk":{"north":100}}]"#,
         "legs[0] has stay and walk; a leg is exactly one of stay, walk, cycle or drive: make each its own leg"),
        (#""legs":[{"speed":3}]"#, "legs[0] must have one of stay, walk, cycle or drive"),
        (#""legs":[{"stay":60},{"stay":600,"indoors":"yes"}]"#, #"legs[1].indoors must be true or false, not "yes""#),
        (#""legs":[{"walk":"home"}]"#, #"legs[0].walk must be an object, not "home""#),
        (#""legs":[{"walk":{"latitude":95,"longitude":11}}]"#,
         "legs[0].walk latitude 95, longitude 11 is off the globe; expected latitude −90…90 and longitude −180…180"),
    ])
    func legsAreReadExactly(_ fields: String, _ expected: String) {
        #expect(Self.message(fields) == expected)
    }

    @Test(arguments: [
        (#""outdoor":{"sigma":"3"},"legs":[{"stay":60}]"#, #"outdoor.sigma must be a number, not "3""#),
        (#""indoor":{"sigma":true},"legs":[{"stay":60}]"#, "indoor.sigma must be a number, not true"),
        (#""legs":[{"stay":60},{"walk":{"north":10},"speed":"fast"}]"#, #"legs[1].speed must be a number, not "fast""#),
        (#""legs":[{"walk":{"north":10},"speed":0}]"#, "legs[0].speed 0 must be positive metres per second"),
        (#""legs":[{"stay":60},{"stay":"1h"}]"#, #"legs[1].stay must be a number, not "1h""#),
        (#""legs":[{"stay":-5}]"#, "legs[0].stay -5 must be positive seconds"),
        (#""legs":[{"walk":{"north":"10"}}]"#, #"legs[0].walk.north must be a number, not "10""#),
        (#""legs":[{"stay":60,"place":7}]"#, "legs[0].place must be a string, not 7"),
        (#""sampleInterval":0,"legs":[{"stay":60}]"#,
         "sampleInterval 0 is out of range; expected more than 0 and at most 3600 seconds"),
        (#""outdoor":{"lossFraction":1},"legs":[{"stay":60}]"#,
         "outdoor.lossFraction 1 is out of range; expected at least 0 and less than 1"),
    ])
    func errorsNameThePathAndTheValue(_ fields: String, _ expected: String) {
        #expect(Self.message(fields) == expected)
    }

    @Test(arguments: [
        ("2026-03-10T07:00:00", #"start "2026-03-10T07:00:00" has no time zone; add Z for UTC or an offset such as +01:00"#),
        ("1500-03-10T07:00:00Z", #"start "1500-03-10T07:00:00Z" is out of range; a time must be in the years 1678–2261"#),
        ("2026-02-30T07:00:00Z",
         #"start "2026-02-30T07:00:00Z" is not an ISO 8601 time; expected YYYY-MM-DDTHH:MM:SS[.fraction] and Z or ±HH:MM, with a real calendar date"#),
    ])
    func startSaysWhyItIsNotATime(_ start: String, _ expected: String) {
        let text = #"{"start":""# + start + #"","origin":{"latitude":48.1,"longitude":11.5},"legs":[{"stay":60}]}"#
        do {
            _ = try Scenario.parse(text)
            Issue.record("accepted: \(text)")
        } catch {
            #expect(error.description == expected)
        }
    }
}
