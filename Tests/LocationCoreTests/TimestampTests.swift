import Testing
import LocationCore

@Suite struct TimestampTests {
    @Test func epochIsDayZero() {
        #expect(CivilTime.daysFromCivil(year: 1970, month: 1, day: 1) == 0)
        #expect(CivilTime(year: 1970, month: 1, day: 1).timestamp == Timestamp(nanoseconds: 0))
    }

    @Test func knownDate() {
        // 2000-03-01 is day 11017: 30 years of 365 days + 7 leap days + Jan (31) + Feb (29).
        #expect(CivilTime.daysFromCivil(year: 2000, month: 3, day: 1) == 30 * 365 + 7 + 31 + 29)
    }

    @Test(arguments: [-800_000, -1, 0, 1, 59, 11_016, 11_017, 18_000, 2_932_896])
    func civilRoundTrip(days: Int) {
        let (y, m, d) = CivilTime.civilFromDays(days)
        #expect(CivilTime.daysFromCivil(year: y, month: m, day: d) == days)
    }

    @Test func decomposesBeforeEpochWithFraction() {
        let t = Timestamp(nanoseconds: -1) // 1969-12-31T23:59:59.999999999Z
        let c = CivilTime(t)
        #expect(c == CivilTime(year: 1969, month: 12, day: 31, hour: 23, minute: 59, second: 59, nanosecond: 999_999_999))
        #expect(c.timestamp == t)
    }

    @Test func differenceInSeconds() {
        #expect(t0.adding(seconds: 1.25) - t0 == 1.25)
        #expect(t0 - t0.adding(seconds: 3) == -3)
    }
}
