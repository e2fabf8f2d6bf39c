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
// call linked both: 0.3 MiB of the idle daemon (docs/benchmarks.md, "Footprint").
let daemonModule: [SwiftSetting] = strict + [
    .unsafeFlags(["-Xfrontend", "-disable-implicit-string-processing-module-import"]),
]

// How the daemon is linked, for its idle memory (docs/benchmarks.md, "Footprint"): every page
// the dynamic linker reads or writes at start stays resident. lld, because only lld (not the
// default gold) packs the ≈ 40,000 relative relocations of Swift's metadata into a table of a
// few KiB (DT_RELR; glibc ≥ 2.36) instead of 0.9 MiB of Elf64_Rela read at every start; and
// no exported symbols: the driver exports every symbol of an executable, whose 1.1 MiB of
// .dynsym/.dynstr/.gnu.hash every library's symbol lookups then search first, while nothing
// loads the daemon or looks a symbol up in it. And the functions the daemon runs placed together
// (scripts/locationd.order, written by Benchmarks/orderfile.py): code becomes resident in
// 64 KiB blocks, and scattered over 9 MiB of text the few thousand functions it runs made
// ≈ 100 blocks resident. A stale list only costs memory: unknown names are skipped. And
// libstdc++ (only the Swift runtime uses it) and SQLite from their static archives: the
// `-lstdc++` of the driver and the `-lsqlite3` of CSQLite's module map come before any flag
// given here, so scripts/link, searched first, holds linker scripts of those names that name
// the archives. libstdc++.so's relocation and symbol tables cost 0.9 MiB resident, the few
// objects the runtime needs a few pages; SQLite's objects (Debian builds one per source file)
// join the order file. A security update of either then needs a rebuild of locationd.
// And segments aligned to 64 KiB (`-z max-page-size=65536`; lld's default is 4 KiB), for the
// installed copy: a binary just written by install(1) (`make install`) or cp sits in the page
// cache in 64 KiB folios, and a fault maps the folios under its 64 KiB fault-around window
// whole. With 4 KiB alignment the image's addresses and file offsets differed modulo 64 KiB, so
// most windows straddled two folios: 0.4–0.6 MiB more resident code (an installed copy idled at
// 8.2–8.5 MiB, the linker's output at 7.7–7.9). Now offsets and addresses agree modulo 64 KiB
// and the kernel loads the image at a 64 KiB boundary (4 bits less ASLR for the image only), so
// a window is one folio: 7.6–7.9 MiB installed. Same file size; segment permissions unchanged.
let daemonLinking: [LinkerSetting] = [
    .unsafeFlags(["-use-ld=lld", "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs",
                  "-Xlinker", "--no-export-dynamic",
                  "-Xlinker", "-z", "-Xlinker", "max-page-size=65536",
                  "-Xlinker", "--symbol-ordering-file=\(Context.packageDirectory)/scripts/locationd.order",
                  "-Xlinker", "--no-warn-symbol-ordering",
                  "-Xlinker", "--allow-multiple-definition",
                  "-L", "\(Context.packageDirectory)/scripts/link"], .when(platforms: [.linux])),
]

// libgps from its static archive (libgps-dev's libgps.a), for what it loads: the daemon only
// calls libgps's JSON decoder (CGPS/shim.h), which the archive brings in alone, while
// libgps.so.28 needs libdbus-1, which needs libsystemd, libgcrypt, lz4, zstd, lzma and libcap:
// 1.0 MiB resident that nothing here uses (docs/benchmarks.md, "Footprint"). The decoder's
// strlcat comes from libgps's os_compat.o, which also defines strlcpy, as the static
// libdispatch's shims do (glibc 2.36 has neither): the same BSD function twice, so the
// statically linked daemon keeps the first (`--allow-multiple-definition`, in daemonLinking).
let libgpsStatic: [LinkerSetting] = [
    .unsafeFlags(["-Xlinker", "-l:libgps.a"], .when(platforms: [.linux])),
]

let package = Package(
    name: "locationd",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "locationd", targets: ["locationd"]),
        .executable(name: "locationctl", targets: ["locationctl"]),
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
        .systemLibrary(name: "CSQLite", path: "Sources/CSQLite"),
        .target(name: "LocationCore", swiftSettings: daemonModule),
        .target(name: "NMEA", dependencies: ["LocationCore"], swiftSettings: daemonModule),
        .target(name: "LocationProtocol", dependencies: ["LocationCore"], swiftSettings: daemonModule),
        .target(name: "Simulation", dependencies: ["LocationCore", "NMEA", "LocationProtocol"], swiftSettings: strict),
        .target(
            name: "LocationDaemon",
            dependencies: [
                "LocationCore", "NMEA", "LocationProtocol", "CGPS", "CSystemd", "CSQLite",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: daemonModule, linkerSettings: libgpsStatic),
        .target(name: "LocationClient", dependencies: ["LocationProtocol", "LocationCore"], swiftSettings: strict),
        // Empty initialisers for the SQLite extensions the store does not use (FTS3/4, FTS5,
        // R*Tree, dbstat, sqlite_stmt), so that the daemon's static SQLite has none of them and
        // does not run their code at every open: 0.15 MiB idle (NoExtensions.c).
        .target(name: "CSQLiteNoExtensions"),
        .executableTarget(name: "locationd", dependencies: ["LocationDaemon", "CSQLiteNoExtensions"], swiftSettings: daemonModule,
                          linkerSettings: daemonLinking),
        // Benchmark of region re-ranking (docs/regions.md): swift run -c release bench-regions
        .executableTarget(name: "bench-regions", dependencies: ["LocationCore", "Simulation"], swiftSettings: strict),
        // Benchmarks of decoding and the whole engine (docs/benchmarks.md, Benchmarks/compare.sh).
        .executableTarget(name: "locationd-bench", dependencies: ["LocationCore", "NMEA", "LocationProtocol", "Simulation"], swiftSettings: strict),
        .executableTarget(
            name: "locationctl",
            dependencies: [
                "LocationCore", "NMEA", "LocationProtocol", "LocationClient", "Simulation",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strict),
        .testTarget(name: "LocationCoreTests", dependencies: ["LocationCore", "Simulation"], swiftSettings: strict),
        .testTarget(name: "NMEATests", dependencies: ["NMEA", "LocationCore", "LocationProtocol", "Simulation"], swiftSettings: strict),
        .testTarget(name: "SimulationTests", dependencies: ["Simulation", "LocationCore", "NMEA"], swiftSettings: strict),
        .testTarget(name: "LocationProtocolTests", dependencies: ["LocationProtocol", "LocationCore", "Simulation"], swiftSettings: strict),
        .testTarget(
            name: "LocationDaemonTests",
            dependencies: ["LocationDaemon", "LocationClient", "LocationProtocol", "LocationCore", "NMEA", "Simulation",
                           // A virtual clock for the hub's timers (publication ticks); part of swift-nio.
                           .product(name: "NIOEmbedded", package: "swift-nio")],
            swiftSettings: strict),
    ]
)

// libFuzzer targets (scripts/fuzz): only when LOCATIOND_FUZZ is set, so that ordinary builds
// never try to link an executable whose main is libFuzzer's.
if Context.environment["LOCATIOND_FUZZ"] != nil {
    let fuzz: [SwiftSetting] = strict + [.unsafeFlags(["-parse-as-library"])]
    package.targets += [
        .executableTarget(name: "fuzz-nmea", dependencies: ["NMEA", "LocationCore", "LocationProtocol"],
                          path: "Fuzz/fuzz-nmea", swiftSettings: fuzz),
        .executableTarget(name: "fuzz-request", dependencies: ["LocationProtocol"],
                          path: "Fuzz/fuzz-request", swiftSettings: fuzz),
    ]
    package.products += [
        .executable(name: "fuzz-nmea", targets: ["fuzz-nmea"]),
        .executable(name: "fuzz-request", targets: ["fuzz-request"]),
    ]
}
