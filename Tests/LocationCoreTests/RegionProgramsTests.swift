@testable import LocationCore
import Testing

/// Per-program region state the engine keeps only while the program has regions.
@Suite struct RegionProgramsTests {
    /// A program that registers regions and removes them all, or asks to remove one it never
    /// had, leaves no monitor behind: every fix walks the monitors, and over a long run programs
    /// come and go (an upgrade changes the executable, so the program).
    @Test func programsWithoutRegionsAreForgotten() throws {
        var engine = Engine()
        let here = Coordinate(latitude: 48.1, longitude: 11.5)
        for i in 0..<200 {
            let p = ProgramID("uid=0 exe=/opt/app-\(i)/bin/app")
            try engine.addRegions([Region(id: "home", center: here, radius: 100)], for: p)
            try engine.removeRegions(i.isMultiple(of: 2) ? nil : ["home"], for: p)
            #expect(throws: RegionError.self) { try engine.removeRegions(["nope"], for: ProgramID("uid=0 exe=/opt/other-\(i)")) }
        }
        let kept = ProgramID("uid=0 exe=/usr/bin/kept")
        try engine.addRegions([Region(id: "a", center: here, radius: 100), Region(id: "b", center: here, radius: 100)], for: kept)
        try engine.removeRegions(["a"], for: kept)
        #expect(engine.regionProgramIDs == [kept])
        #expect(engine.regionPrograms.order == [kept] && engine.regionPrograms.monitors.count == 1)

        // Suspended, then emptied: a program that registers again later starts monitored.
        engine.suspendRegions(of: kept)
        try engine.removeRegions(nil, for: kept)
        #expect(engine.regionPrograms.monitors.isEmpty && engine.regionPrograms.order.isEmpty && engine.regionPrograms.suspended.isEmpty)
        try engine.addRegions([Region(id: "c", center: here, radius: 100)], for: kept)
        #expect(engine.monitorsRegions)
    }
}
