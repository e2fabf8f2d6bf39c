import Testing
@testable import LocationDaemon

/// `[gpsd_server]` and `[nmea_server]`, and their flags.
@Suite struct GPSDListenerConfigTests {
    @Test("A numeric address and port; off loopback only when allowed")
    func listenAddress() throws {
        #expect(try ConfigTests.load("[gpsd_server]\nlisten = \"127.0.0.1:2948\"\n").gpsdServerAddress
            == ListenAddress(host: "127.0.0.1", port: 2948, isLoopback: true))
        #expect(try ConfigTests.load("", ["--gpsd-listen", "[::1]:2947"]).gpsdServerAddress
            == ListenAddress(host: "::1", port: 2947, isLoopback: true))
        #expect(try ConfigTests.load("").gpsdServerAddress == nil, "off unless configured")
        #expect(ConfigTests.error("[gpsd_server]\nlisten = \"192.0.2.1:2948\"\n")?
            .hasPrefix("locationd.toml:2: 'gpsd_server.listen': 192.0.2.1:2948 is not a loopback address") == true)
        let allowed = try ConfigTests.load("[gpsd_server]\nlisten = \"0.0.0.0:2948\"\nallow_non_loopback = true\n")
        #expect(allowed.gpsdServerAddress?.isLoopback == false)
        for bad in ["localhost:2948", "127.0.0.1", "127.0.0.1:0", "127.0.0.1:x", "::1:2948"] {
            #expect(ConfigTests.error("[gpsd_server]\nlisten = \"\(bad)\"\n")?.contains("expected ADDRESS:PORT") == true, "\(bad)")
        }
        #expect(throws: DaemonOptions.Failure.self) { try ConfigTests.load("", ["--gpsd-listen", "192.0.2.1:2948"]) }
        #expect(throws: DaemonOptions.Failure.self) { try ConfigTests.load("", ["--gpsd-listen", "gps.local:2948"]) }
        #expect(try ConfigTests.load("", ["--nmea-socket", "/run/x/nmea.sock"]).nmeaServerSocket == "/run/x/nmea.sock")
    }
}
