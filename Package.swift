// swift-tools-version: 6.1
// Dependencies are chosen for footprint (see README "Dependencies"): NIO for the socket
// server (no Foundation), swift-log for logging, swift-argument-parser for locationctl only
// (it pulls FoundationEssentials, so the daemon parses its few flags itself). Signals and the
// graceful shutdown are our own few lines (ProcessSignals, DaemonService).
import PackageDescription

let strict: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
]

// The modules the daemon links do without the implicit `import _StringProcessing`: the string
// searches it adds (`contains("…")`, `firstRange(of:)`, `split(separator: "…")` on strings)
// then do not compile here, and neither it nor _RegexParser is linked into the daemon. One such
// call links both: 0.3 MiB of the idle daemon (docs/benchmarks.md, "Footprint").
let daemonModule: [SwiftSetting] = strict + [
    .unsafeFlags(["-Xfrontend", "-disable-implicit-string-processing-module-import"]),
]

// How the daemon is linked, for its idle memory (docs/benchmarks.md, "Footprint", which
// measures what each of these buys): lld with packed relative relocations and no exported
// symbols; segments aligned to 64 KiB; the functions it runs placed together
// (scripts/locationd.order, `make orderfile`);
// libstdc++ from its static archive (scripts/link/libstdc++.so is a linker script naming it,
// found before the system's); libgps from its static archive, whose strlcpy the static
// libdispatch defines too (`--allow-multiple-definition`). Rebuild after a libgps or libstdc++
// update.
let daemonLinking: [LinkerSetting] = [
    .unsafeFlags(["-use-ld=lld", "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs",
                  "-Xlinker", "--no-export-dynamic",
                  "-Xlinker", "-z", "-Xlinker", "max-page-size=65536",
                  "-Xlinker", "--symbol-ordering-file=\(Context.packageDirectory)/scripts/locationd.order",
                  "-Xlinker", "--no-warn-symbol-ordering",
                  "-Xlinker", "--allow-multiple-definition",
                  "-L", "\(Context.packageDirectory)/scripts/link"], .when(platforms: [.linux])),
]

// The daemon calls only libgps's JSON decoder (CGPS/shim.h), which the archive brings in alone;
// libgps.so.28 would load libdbus-1 besides (docs/gpsd.md).
let libgpsStatic: [LinkerSetting] = [
    .unsafeFlags(["-Xlinker", "-l:libgps.a"], .when(platforms: [.linux])),
]

let package = Package(
    name: "locationd",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "locationd", targets: ["locationd"]),
        .executable(name: "locationctl", targets: ["locationctl"]),
        .executable(name: "locationd-mqtt", targets: ["locationd-mqtt"]),
        .library(name: "LocationClient", targets: ["LocationClient"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio", exact: "2.101.3"),
        .package(url: "https://github.com/apple/swift-log", exact: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser", exact: "1.8.2"),
    ],
    targets: [
        .systemLibrary(name: "CGPS", path: "Sources/CGPS"),
        // libsystemd: notify, watchdog, socket activation, journal (docs/systemd.md).
        .systemLibrary(name: "CSystemd", path: "Sources/CSystemd"),
        // swift-log to journald (structured, sd_journal_sendv) or stderr, with a live log level:
        // locationd's and locationd-mqtt's one logging (docs/systemd.md, "Journal").
        .target(name: "SystemdLogging", dependencies: ["CSystemd", .product(name: "Logging", package: "swift-log")],
                swiftSettings: daemonModule),
        // inet_diag: who a TCP peer is (its structures do not import into Swift).
        .target(name: "CInetDiag"),
        .systemLibrary(name: "CSQLite", path: "Sources/CSQLite"),
        // The TOML subset of locationd.toml and mqtt.toml (no dependency, no Foundation).
        .target(name: "TOMLConfig", swiftSettings: daemonModule),
        // How a message writes a shell command its reader is to run (no dependency, no Foundation).
        .target(name: "ShellWords", swiftSettings: daemonModule),
        .target(name: "LocationCore", swiftSettings: daemonModule),
        .target(name: "NMEA", dependencies: ["LocationCore"], swiftSettings: daemonModule),
        .target(name: "LocationProtocol", dependencies: ["LocationCore"], swiftSettings: daemonModule),
        // gpsd's client protocol (gpsd_json(5)) for existing gpsd programs (docs/compatibility.md).
        .target(name: "GPSDProtocol", dependencies: ["LocationCore", "LocationProtocol"], swiftSettings: daemonModule),
        .target(name: "Simulation", dependencies: ["LocationCore", "NMEA", "LocationProtocol"], swiftSettings: strict),
        .target(
            name: "LocationDaemon",
            dependencies: [
                "LocationCore", "NMEA", "LocationProtocol", "GPSDProtocol", "TOMLConfig", "CGPS", "CSystemd", "CInetDiag", "CSQLite",
                "SystemdLogging", "ShellWords",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: daemonModule, linkerSettings: libgpsStatic),
        .target(name: "LocationClient", dependencies: ["LocationProtocol", "LocationCore"], swiftSettings: strict),
        .executableTarget(name: "locationd", dependencies: ["LocationDaemon", "SystemdLogging"], swiftSettings: daemonModule,
                          linkerSettings: daemonLinking),
        // Benchmark of region re-ranking (docs/regions.md): swift run -c release bench-regions
        .executableTarget(name: "bench-regions", dependencies: ["LocationCore", "Simulation"], swiftSettings: strict),
        // Benchmarks of decoding and the whole engine (docs/benchmarks.md, Benchmarks/compare.sh).
        .executableTarget(name: "locationd-bench", dependencies: ["LocationCore", "NMEA", "LocationProtocol", "Simulation"], swiftSettings: strict),
        .executableTarget(
            name: "locationctl",
            dependencies: [
                "LocationCore", "NMEA", "LocationProtocol", "LocationClient", "Simulation", "ShellWords",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strict),
        // The MQTT bridge (docs/mqtt.md): libmosquitto (Debian libmosquitto-dev) for MQTT; the
        // OwnTracks mapping, its commands and configuration are pure (OwnTracks), the I/O is the
        // executable's. A client of locationd like any other: it does not link the daemon.
        .systemLibrary(name: "CMosquitto", path: "Sources/CMosquitto"),
        .target(name: "OwnTracks", dependencies: ["LocationCore", "LocationProtocol", "TOMLConfig"], swiftSettings: strict),
        .executableTarget(
            name: "locationd-mqtt",
            dependencies: ["OwnTracks", "LocationClient", "LocationProtocol", "LocationCore", "TOMLConfig", "CMosquitto", "SystemdLogging",
                           .product(name: "Logging", package: "swift-log")],
            swiftSettings: strict),
        // What the daemon's and the bridge's tests share: the one wait, datagram sockets, a
        // stand-in journald.
        .target(name: "TestSupport", path: "Tests/TestSupport", swiftSettings: strict),
        .testTarget(name: "LocationCoreTests", dependencies: ["LocationCore", "Simulation"], swiftSettings: strict),
        .testTarget(name: "NMEATests", dependencies: ["NMEA", "GPSDProtocol", "LocationCore", "LocationProtocol", "Simulation"], swiftSettings: strict),
        .testTarget(name: "SimulationTests", dependencies: ["Simulation", "LocationCore", "NMEA"], swiftSettings: strict),
        .testTarget(name: "GPSDProtocolTests", dependencies: ["GPSDProtocol", "LocationCore", "NMEA"], swiftSettings: strict),
        .testTarget(name: "LocationProtocolTests", dependencies: ["LocationProtocol", "LocationCore", "Simulation"], swiftSettings: strict),
        .testTarget(
            name: "LocationDaemonTests",
            dependencies: ["LocationDaemon", "SystemdLogging", "TestSupport", "LocationClient", "LocationProtocol", "LocationCore", "NMEA", "Simulation",
                           // A virtual clock for the hub's timers (publication ticks); part of swift-nio.
                           .product(name: "NIOEmbedded", package: "swift-nio")],
            swiftSettings: strict),
        .testTarget(name: "locationctlTests", dependencies: ["locationctl", "TestSupport"], swiftSettings: strict),
        .testTarget(name: "MQTTBridgeTests",
                    dependencies: ["OwnTracks", "TestSupport", "LocationClient", "LocationProtocol", "LocationCore", "TOMLConfig",
                                   "locationd-mqtt"],
                    swiftSettings: strict),
    ]
)

// libFuzzer targets (scripts/fuzz): only when LOCATIOND_FUZZ is set, so that ordinary builds
// never try to link an executable whose main is libFuzzer's.
if Context.environment["LOCATIOND_FUZZ"] != nil {
    let fuzz: [SwiftSetting] = strict + [.unsafeFlags(["-parse-as-library"])]
    package.targets += [
        .target(name: "FuzzDriver", path: "Fuzz/FuzzDriver", swiftSettings: strict),
        .executableTarget(name: "fuzz-nmea", dependencies: ["FuzzDriver", "NMEA", "LocationCore", "LocationProtocol"],
                          path: "Fuzz/fuzz-nmea", swiftSettings: fuzz),
        .executableTarget(name: "fuzz-request", dependencies: ["FuzzDriver", "LocationProtocol"],
                          path: "Fuzz/fuzz-request", swiftSettings: fuzz),
        .executableTarget(name: "fuzz-owntracks-command", dependencies: ["FuzzDriver", "OwnTracks"],
                          path: "Fuzz/fuzz-owntracks-command", swiftSettings: fuzz),
        .executableTarget(name: "fuzz-gpsd-request", dependencies: ["FuzzDriver", "GPSDProtocol"],
                          path: "Fuzz/fuzz-gpsd-request", swiftSettings: fuzz),
    ]
    package.products += [
        .executable(name: "fuzz-nmea", targets: ["fuzz-nmea"]),
        .executable(name: "fuzz-request", targets: ["fuzz-request"]),
        .executable(name: "fuzz-owntracks-command", targets: ["fuzz-owntracks-command"]),
        .executable(name: "fuzz-gpsd-request", targets: ["fuzz-gpsd-request"]),
    ]
}
