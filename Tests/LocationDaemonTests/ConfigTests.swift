import Foundation
import LocationCore
@testable import LocationDaemon
import TOMLConfig
import Testing

@Suite(.timeLimit(.minutes(5))) struct ConfigTests {
    static let repo = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let shipped = repo.appendingPathComponent("Config/locationd.toml")

    /// Parses `text` as the file `locationd.toml` with `flags` after `--config`; a replay log
    /// named is taken as readable unless `replayProblem` says otherwise.
    static func load(_ text: String, _ flags: [String] = [],
                     replayProblem: @escaping DaemonOptions.ReplayCheck = { _ in nil }) throws(DaemonOptions.Failure) -> DaemonOptions {
        let parsed = try DaemonOptions.parse(["--config", "locationd.toml"] + flags, defaultConfigPath: "/nonexistent",
                                             readFile: { path throws(ConfigError) in path == "locationd.toml" ? text : nil },
                                             replayProblem: replayProblem)
        guard case .run(let o) = parsed else { fatalError("\(parsed)") }
        return o
    }

    static func error(_ text: String) -> String? {
        do { _ = try load(text); return nil } catch { return error.description }
    }

    @Test func everyInvalidCaseHasItsMessage() {
        let cases: [(String, String)] = [
            // unknown key, unknown table, top-level key
            ("[gpsd]\nhost = \"a\"\nhots = \"x\"\n", "locationd.toml:3: unknown key 'gpsd.hots'; expected one of host, port, device"),
            ("# c\n[gspd]\n", "locationd.toml:2: unknown table [gspd]; expected one of socket, gpsd, replay, log, regions, store, gpsd_server, nmea_server, geocoding, daemon, systemd"),
            // [policy] without a rule name: the message listed the other tables only
            ("[policy]\nuser = \"root\"\nauthorization = \"always\"\n",
             "locationd.toml:1: [policy] needs a rule name: [policy.NAME] (e.g. [policy.navit]), or [policy.default] for everyone no rule matches"),
            ("port = 1\n", "locationd.toml:1: unknown key 'port'; every option belongs in a table: [socket], [gpsd], [replay], [log], [regions], [store], [gpsd_server], [nmea_server], [geocoding], [daemon], [systemd]"),
            // bad types
            ("[gpsd]\nport = \"2947\"\n", "locationd.toml:2: 'gpsd.port' must be an integer, not a string"),
            ("[log]\nlevel = 3\n", "locationd.toml:2: 'log.level' must be a string, not an integer"),
            ("[replay]\nloop = \"yes\"\n", "locationd.toml:2: 'replay.loop' must be true or false, not a string"),
            ("[replay]\nspeed = true\n", "locationd.toml:2: 'replay.speed' must be a number, not a boolean"),
            ("[replay]\ndate = \"2012-1-19\"\n", "locationd.toml:2: 'replay.date' is \"2012-1-19\"; expected a date as YYYY-MM-DD (UTC), e.g. 2012-01-19"),
            ("[replay]\ndate = \"2023-02-29\"\n", "locationd.toml:2: 'replay.date' is \"2023-02-29\"; there is no such day; expected a date as YYYY-MM-DD (UTC)"),
            ("[replay]\ndate = \"1979-12-31\"\n", "locationd.toml:2: 'replay.date' is \"1979-12-31\"; year 1979 is out of range; expected 1980…2261"),
            ("[gpsd]\nport = 2947.0\n", "locationd.toml:2: 'gpsd.port' must be an integer, not a float"),
            // out of range, bad choice, empty
            ("[gpsd]\nport = 70000\n", "locationd.toml:2: 'gpsd.port' is 70000; expected 1…65535"),
            ("[daemon]\nshutdown_timeout = 0\n", "locationd.toml:2: 'daemon.shutdown_timeout' is 0; expected 0.1…300 s"),
            ("[socket]\nflood_rate = inf\n", "locationd.toml:2: 'socket.flood_rate' is inf; expected 0.001…1000000 requests/s"),
            ("[log]\nlevel = \"loud\"\n", "locationd.toml:2: 'log.level' is \"loud\"; expected one of trace, debug, info, notice, warning, error, critical"),
            ("[socket]\npath = \"\"\n", "locationd.toml:2: 'socket.path' must not be empty"),
            ("[socket]\npath = \"/run/" + String(repeating: "x", count: 120) + "\"\n",
             "locationd.toml:2: 'socket.path' is 125 bytes long; at most 107 (a Unix socket address holds 108 bytes with its terminating NUL): choose a shorter path"),
            // duplicates
            ("[gpsd]\nport = 1\nport = 2\n", "locationd.toml:3: duplicate key 'gpsd.port' (first set on line 2)"),
            ("[gpsd]\n[log]\n[gpsd]\n", "locationd.toml:3: duplicate table [gpsd] (first defined on line 1)"),
            // TOML syntax
            ("[gpsd]\nhost = localhost\n", "locationd.toml:2: invalid value 'localhost' (strings must be quoted)"),
            ("[gpsd]\nhost = \"localhost\n", "locationd.toml:2: unterminated string"),
            ("[gpsd]\nhost \"x\"\n", "locationd.toml:2: expected '=' after key 'host'"),
            ("[gpsd\n", "locationd.toml:1: expected ']' after table name 'gpsd'"),
            ("[gpsd]\nport = 1 2\n",
             "locationd.toml:2: unexpected '2' after the value of 'port' (1); a value ends the line: a comment starts with '#' (port = 1  # 2); if 'port' takes a string, quote it whole (port = \"1 2\")"),
            // Text after a number that is no unit is not told to drop a unit.
            ("[gpsd]\nport = 2947 foo  # x\n",
             "locationd.toml:2: unexpected 'foo' after the value of 'port' (2947); a value ends the line: a comment starts with '#' (port = 2947  # foo); if 'port' takes a string, quote it whole (port = \"2947 foo\")"),
            ("[gpsd]\nport = 2947foo\n",
             "locationd.toml:2: invalid number '2947foo' (TOML numbers: no leading zeros, a digit on both sides of '.' and of '_', integers within 64 bits)"),
            ("[replay]\nloop = true always\n",
             "locationd.toml:2: unexpected 'always' after the value of 'loop' (true); a value ends the line: a comment starts with '#' (loop = true  # always); if 'loop' takes a string, quote it whole (loop = \"true always\")"),
            ("[gpsd]\nhost = \"gps\" local\n",
             "locationd.toml:2: unexpected 'local' after the value of 'host' (\"gps\"); a value ends the line: a comment starts with '#' (host = \"gps\"  # local)"),
            ("[socket]\nflood_rate = 100 requests/s\n",
             "locationd.toml:2: '100 requests/s': write the number alone, without a unit (100); each option's unit is fixed, e.g. seconds or requests/s (docs/configuration.md)"),
            ("[gpsd]\nport =\n", "locationd.toml:2: missing value after '='"),
            ("[gpsd]\nhost = \"a\\qb\"\n", "locationd.toml:2: invalid escape '\\q' in string"),
            ("[policy.a]\nuser = \"root\\u0000x\"\n", "locationd.toml:2: \\u0000 (NUL) in a string: no path, user or name locationd reads can hold it; remove it"),
            // Named as written, the long form too.
            ("[policy.a]\nuser = \"root\\U00000000x\"\n", "locationd.toml:2: \\U00000000 (NUL) in a string: no path, user or name locationd reads can hold it; remove it"),
            ("[gpsd]\nport = 007\n", "locationd.toml:2: invalid number '007' (TOML numbers: no leading zeros, a digit on both sides of '.' and of '_', integers within 64 bits)"),
            // What an unquoted word was likely meant as: a date, a number with a unit, a
            // boolean written True.
            ("[replay]\ndate = 2024-05-01\n",
             "locationd.toml:2: 'replay.date' is the TOML date 2024-05-01; dates are not supported: quote it, date = \"2024-05-01\""),
            ("[gpsd]\nport = 1979-05-27T07:32:00Z\n", "locationd.toml:2: dates are not supported ('1979-05-27T07:32:00Z')"),
            ("[gpsd]\nport = 07:32:00\n", "locationd.toml:2: times of day are not supported ('07:32:00')"),
            ("[daemon]\nshutdown_timeout = 5s\n",
             "locationd.toml:2: '5s': write the number alone, without a unit (5); each option's unit is fixed, e.g. seconds or requests/s (docs/configuration.md)"),
            ("[socket]\nflood_rate = 1/s\n",
             "locationd.toml:2: '1/s': write the number alone, without a unit (1); each option's unit is fixed, e.g. seconds or requests/s (docs/configuration.md)"),
            ("[socket]\nflood_rate = 1.5e2Hz\n",
             "locationd.toml:2: '1.5e2Hz': write the number alone, without a unit (1.5e2); each option's unit is fixed, e.g. seconds or requests/s (docs/configuration.md)"),
            ("[daemon]\nshutdown_timeout = 2.5 s  # x\n",
             "locationd.toml:2: '2.5 s': write the number alone, without a unit (2.5); each option's unit is fixed, e.g. seconds or requests/s (docs/configuration.md)"),
            ("[replay]\nloop = True\n", "locationd.toml:2: invalid value 'True'; a boolean is true or false (lower case, unquoted): write true"),
            ("[replay]\nloop = no\n", "locationd.toml:2: invalid value 'no'; a boolean is true or false (lower case, unquoted): write false; a string is quoted: \"no\""),
            ("[gpsd.x]\n", "locationd.toml:1: nested tables ([gpsd.…]) are not supported"),
            ("[gpsd]\nhost.name = \"x\"\n", "locationd.toml:2: dotted keys ('host.…') are not supported; use a [table]"),
            ("[gpsd]\nhost = \"\"\"x\"\"\"\n", "locationd.toml:2: multi-line strings are not supported"),
            ("[[gpsd]]\n", "locationd.toml:1: arrays of tables ([[…]]) are not supported"),
            ("= 1\n", "locationd.toml:1: expected a key, found '='"),
            // A non-ASCII letter in a bare key: named whole, with its code point.
            ("[gpsd]\npört = 1\n", "locationd.toml:2: 'ö' (U+00F6) cannot be in a key; use letters A–Z and a–z, digits, '_' and '-'"),
            ("[policy.straße]\n", "locationd.toml:1: 'ß' (U+00DF) cannot be in a policy rule name; use letters A–Z and a–z, digits, '_' and '-'"),
            ("é = 1\n", "locationd.toml:1: 'é' (U+00E9) cannot be in a key; use letters A–Z and a–z, digits, '_' and '-'"),
            // An invisible one (a zero-width space pasted in) is told by its code point.
            ("[gpsd]\nport\u{200B} = 1\n", "locationd.toml:2: '\u{200B}' (U+200B) cannot be in a key; use letters A–Z and a–z, digits, '_' and '-'"),
            // A byte-order mark (Notepad's "UTF-8"): TOML has none.
            ("\u{FEFF}[gpsd]\nport = 1\n",
             "locationd.toml:1: the file starts with a byte-order mark (U+FEFF), which TOML does not allow; save it as UTF-8 without one"),
            // gpsd.host with a port or brackets (the --gpsd forms): resolved as a name, it would
            // never connect, and nothing would say so before a client needed fixes
            ("[gpsd]\nhost = \"localhost:2947\"\n",
             "locationd.toml:2: 'gpsd.host' is \"localhost:2947\"; give the host alone, without brackets or a port: host = \"localhost\" (and port = 2947)"),
            ("[gpsd]\nhost = \"[::1]:3000\"\n",
             "locationd.toml:2: 'gpsd.host' is \"[::1]:3000\"; give the host alone, without brackets or a port: host = \"::1\" (and port = 3000)"),
            ("[gpsd]\nhost = \"[::1]\"\n",
             "locationd.toml:2: 'gpsd.host' is \"[::1]\"; give the host alone, without brackets or a port: host = \"::1\""),
            ("[gpsd]\nhost = \"gps:x\"\n",
             "locationd.toml:2: 'gpsd.host' is \"gps:x\"; expected a host name, an IPv4 or an IPv6 address (the port goes in 'gpsd.port')"),
            ("[gpsd]\nhost = \"gps:70000\"\n",
             "locationd.toml:2: 'gpsd.host' is \"gps:70000\"; expected a host name, an IPv4 or an IPv6 address (the port goes in 'gpsd.port')"),
            // Not an IPv6 address though it has its characters: it never resolved.
            ("[gpsd]\nhost = \"1.2.3.4:2947:1\"\n",
             "locationd.toml:2: 'gpsd.host' is \"1.2.3.4:2947:1\"; not an IPv6 address; expected a host name, an IPv4 or an IPv6 address alone, e.g. host = \"::1\" (the port goes in 'gpsd.port')"),
        ]
        for host in ["::1", "fe80::1%eth0", "gps.local", "192.0.2.1"] {
            #expect(Self.error("[gpsd]\nhost = \"\(host)\"\n") == nil, "\(host)")
        }
        for (text, message) in cases {
            #expect(Self.error(text) == message, "\(text.debugDescription)")
        }
    }

    /// SQLite's own name for a memory database, `:memory:`, is memory only like "none": no lock
    /// file `:memory:.lock` or `privacy-secret` in the working directory (under systemd, `/`:
    /// the start would fail on the read-only root).
    @Test func sqliteMemoryNameKeepsNothingOnDisk() throws {
        for value in ["none", "", ":memory:"] {
            #expect(try Self.load("[store]\ndatabase = \"\(value)\"\n").databasePath == nil, "\(value)")
        }
        #expect(try Self.load("[store]\ndatabase = \"/var/lib/x.db\"\n").databasePath == "/var/lib/x.db")
    }

    @Test func valuesAndComments() throws {
        let o = try Self.load("""
            # comment
            [gpsd]   # trailing
            host = 'gps\\host'  # literal string: no escapes
            port = 2_948
            [socket]\r
            path = "/run/x\\u00e9.sock"\r
            flood_burst = 0x10
            flood_rate = 1e3
            [replay]
            file = "a \\"b\\".nmea"
            speed = 0
            loop = true
            [log]
            level = "debug"
            precise_coordinates = true
            """)
        #expect(o.gpsdHost == "gps\\host")
        #expect(o.gpsdPort == 2948)
        #expect(o.socketPath == "/run/xé.sock")
        #expect(o.floodBurst == 16)
        #expect(o.floodRate == 1000)
        #expect(o.source == .replay(path: "a \"b\".nmea", speed: 0, loop: true))
        #expect(o.logLevel == "debug" && o.preciseCoordinates)
        #expect(try TOMLDocument.parse("a = [1, \"x\", [true]]\n", file: "f").entries.first?.value
                == .array([.integer(1), .string("x"), .array([.boolean(true)])]))
    }

    /// TOML 1.0's number, escape and control-character rules (compared with Python's tomllib):
    /// what it refuses is refused, with the line, and what it accepts still parses.
    @Test func invalidTOMLIsRefused() throws {
        for bad in ["a = --2947", "a = 0x+B83", "a = +0x10", "a = 01.5", "a = 00.1", "a = 1._5", "a = 1_.5", "a = 1e_5",
                    "a = +.5", "a = 1.e5", "a = .5", "a = 007", "a = 9223372036854775808", "a = 1__0",
                    "a = \"\\u+041\"", "a = \"\\u04\"", "a = 'x\u{1}y'", "a = \"x\u{7F}y\"", "a = 1 # bell\u{7}"] {
            do {
                _ = try TOMLDocument.parse("\n" + bad + "\n", file: "f")
                Issue.record("accepted: \(bad)")
            } catch {
                #expect(error.description.hasPrefix("f:2: "), "\(bad): \(error)")
            }
        }
        let good: [(String, TOMLValue)] = [
            ("a = 0", .integer(0)), ("a = -17", .integer(-17)), ("a = 1_000", .integer(1000)), ("a = 0xDEAD_beef", .integer(0xDEADBEEF)),
            ("a = 0o17", .integer(15)), ("a = 0b101", .integer(5)), ("a = 0.5", .float(0.5)), ("a = -1e-3", .float(-0.001)),
            ("a = 6.626e-34", .float(6.626e-34)), ("a = 1_000.000_1", .float(1000.0001)), ("a = 0e0", .float(0)),
            ("a = \"\\u00e9\\U0001F600\"", .string("é😀")), ("a = \"tab\there\"", .string("tab\there")),
        ]
        for (text, value) in good {
            #expect(try TOMLDocument.parse(text + "\n", file: "f").entries.first?.value == value, "\(text)")
        }
        // Past a Double's range a literal read as inf ("'socket.flood_rate' is inf") or as 0.
        #expect(Self.error("[socket]\nflood_rate = 1e400\n")
                == "locationd.toml:2: number '1e400' is beyond the range of a float (±1.7976931348623157e308); write a smaller one")
        #expect(Self.error("[socket]\nflood_rate = -1_0.5e99_999\n")
                == "locationd.toml:2: number '-1_0.5e99_999' is beyond the range of a float (±1.7976931348623157e308); write a smaller one")
        #expect(Self.error("[socket]\nflood_rate = 1e-400\n")
                == "locationd.toml:2: number '1e-400' is too close to 0 for a float (the smallest is 5e-324): it would read as 0; write 0 or a larger one")
        for (text, value) in [("a = 0.0e-400", 0.0), ("a = -0.0", -0.0), ("a = 1e-320", Double("1e-320")!), ("a = 1.7976931348623157e308", Double.greatestFiniteMagnitude)] {
            #expect(try TOMLDocument.parse(text + "\n", file: "f").entries.first?.value == .float(value), "\(text)")
        }
        #expect(Self.error("[gpsd]\nport = 02947\n") == "locationd.toml:2: invalid number '02947' (TOML numbers: no leading zeros, a digit on both sides of '.' and of '_', integers within 64 bits)")
    }

    /// Arrays nested past a small depth are refused with the line: `[` two hundred thousand times
    /// overflowed the parser's stack (a debug build at about 2,000), and a reload of such a file
    /// killed the daemon with nothing logged.
    @Test func deeplyNestedArraysAreRefused() throws {
        func nested(_ depth: Int) -> String { "a = " + String(repeating: "[", count: depth) + String(repeating: "]", count: depth) + "\n" }
        #expect(try TOMLDocument.parse(nested(8), file: "f").entries.count == 1)
        for depth in [9, 200_000] {
            #expect(throws: ConfigError(file: "f", line: 2, message: "arrays nested more than 8 deep are not supported")) {
                _ = try TOMLDocument.parse("\n" + nested(depth), file: "f")
            }
        }
        #expect(Self.error("[log]\nlevel = " + String(repeating: "[", count: 200_000) + "\n")
                == "locationd.toml:2: arrays nested more than 8 deep are not supported")
    }

    /// A config file that is not UTF-8 is refused with the line of the first bad byte, not read
    /// with the byte replaced (a Latin-1 executable path would never match).
    @Test func aConfigFileThatIsNotUTF8IsRefused() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("latin1-\(UUID().uuidString.prefix(8)).toml").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let bytes = Array("[policy.nav]\nauthorization = \"always\"\nexecutable = \"/opt/caf".utf8) + [0xE9] + Array("\"\n".utf8)
        #expect(FileManager.default.createFile(atPath: path, contents: Data(bytes)))
        #expect(throws: ConfigError(file: path, line: 3, message: "not UTF-8 text; save the file as UTF-8")) {
            _ = try DaemonOptions.readTextFile(path)
        }
        #expect(try DaemonOptions.readFile(path)?.contains("\u{FFFD}") == true)  // /proc files stay lenient
    }

    @Test func flagsOverrideTheFile() throws {
        let text = "[gpsd]\nhost = \"a\"\nport = 1234\n[log]\nlevel = \"debug\"\n[replay]\nfile = \"x.nmea\"\n"
        let o = try Self.load(text, ["--gpsd", "b:5", "--log-level", "error"])
        #expect(o.source == .gpsd(host: "b", port: "5"))
        #expect(o.logLevel == "error")
        // IPv6: in brackets with a port, or bare without one.
        for (flag, host, port) in [("[::1]:2950", "::1", "2950"), ("[fe80::1%eth0]", "fe80::1%eth0", "2947"),
                                   ("::1", "::1", "2947"), ("gps.local", "gps.local", "2947")] {
            #expect(try Self.load("", ["--gpsd", flag]).source == .gpsd(host: host, port: port), "\(flag)")
        }
        let long = "/tmp/" + String(repeating: "s", count: 103)
        #expect(throws: DaemonOptions.Failure.usage("--socket '\(long)' is 108 bytes long; at most 107 (a Unix socket address holds 108 bytes with its terminating NUL): choose a shorter path")) {
            try Self.load("", ["--socket", long])
        }
        for bad in ["[::1", "[::1]2950", ":2947", "[]:2947", "host:0", "host:x"] {
            #expect(throws: DaemonOptions.Failure.usage("--gpsd '\(bad)': expected HOST, HOST:PORT, [IPv6] or [IPv6]:PORT with a port 1…65535")) {
                try Self.load("", ["--gpsd", bad])
            }
        }
        // Two colons and no brackets: only an IPv6 address. "1.2.3.4:2947:1" (hex digits, dots
        // and colons) was taken for one, and as a host name it never resolved.
        for bad in ["localhost:2947:", "gps.local:29:47", "1.2.3.4:2947:1", "::1:2947:x", "1::2::3", "::1%", "12345::1",
                    "fe80::1%lo:2947"] {
            #expect(throws: DaemonOptions.Failure.usage("--gpsd '\(bad)': expected HOST, HOST:PORT, [IPv6] or [IPv6]:PORT with a port 1…65535 ('\(bad)' is not an IPv6 address: an IPv6 address is written alone (::1), and with a port in brackets ([::1]:2947))")) {
                try Self.load("", ["--gpsd", bad])
            }
        }
        for good in ["::ffff:1.2.3.4", "2001:db8::1", "fe80::1%eth0", "::"] {
            #expect(try Self.load("", ["--gpsd", good]).source == .gpsd(host: good, port: "2947"), "\(good)")
        }
        // A flag's value is not the next option: that would name the wrong mistake, or none.
        #expect(throws: DaemonOptions.Failure.usage("--socket needs a value before the option '--database' (a path that starts with '-' is written ./--database)")) {
            try Self.load("", ["--socket", "--database", "none"])
        }
        #expect(throws: DaemonOptions.Failure.usage("--log-level needs a value before the option '-h' (a path that starts with '-' is written ./-h)")) {
            try Self.load("", ["--log-level", "-h"])
        }
        #expect(try Self.load("", ["--socket", "./--database"]).socketPath == "./--database")
        #expect(try Self.load("", ["--replay", "-"]).source == .replay(path: "-", speed: 1, loop: false))
        #expect(throws: DaemonOptions.Failure.usage("--speed '-1': expected a number ≥ 0 (0 = as fast as possible)")) {
            try Self.load("", ["--replay", "x.nmea", "--speed", "-1"])
        }
        // The file's replay applies without flags; --speed needs a replay from somewhere.
        #expect(try Self.load(text, ["--speed", "3"]).source == .replay(path: "x.nmea", speed: 3, loop: false))
        #expect(throws: DaemonOptions.Failure.usage("--speed, --loop, --date and --as-gpsd apply only with --replay (or replay.file in the config)")) {
            try Self.load("", ["--loop"])
        }
        // --date dates a GGA/GLL-only log's positions; the file's date is overridden by it.
        #expect(try Self.load("", ["--replay", "x.nmea", "--date", "2012-01-19"]).source
                == .replay(path: "x.nmea", speed: 1, loop: false, decoding: .init(assumedDate: CivilTime(year: 2012, month: 1, day: 19))))
        #expect(try Self.load(text + "date = \"2000-02-29\"\n", ["--date", "2012-01-19"]).replayDate == "2012-01-19")
        #expect(try Self.load(text + "date = \"2000-02-29\"\n").source
                == .replay(path: "x.nmea", speed: 1, loop: false, decoding: .init(assumedDate: CivilTime(year: 2000, month: 2, day: 29))))
        #expect(throws: DaemonOptions.Failure.usage("--date '19.01.2012': expected a date as YYYY-MM-DD (UTC), e.g. 2012-01-19")) {
            try Self.load("", ["--replay", "x.nmea", "--date", "19.01.2012"])
        }
        #expect(throws: DaemonOptions.Failure.usage("--speed, --loop, --date and --as-gpsd apply only with --replay (or replay.file in the config)")) {
            try Self.load("", ["--date", "2012-01-19"])
        }
        // --as-gpsd (or replay.as_gpsd) decodes the log as gpsd reports it, with its date.
        #expect(try Self.load("", ["--replay", "x.nmea", "--as-gpsd", "--date", "2012-01-19"]).source
                == .replay(path: "x.nmea", speed: 1, loop: false, decoding: .init(assumedDate: CivilTime(year: 2012, month: 1, day: 19), asGPSD: true)))
        #expect(try Self.load(text + "as_gpsd = true\n").source == .replay(path: "x.nmea", speed: 1, loop: false, decoding: .init(asGPSD: true)))
        #expect(throws: DaemonOptions.Failure.config(ConfigError(file: "locationd.toml", line: 8, message: "'replay.as_gpsd' must be true or false, not a string"))) {
            try Self.load(text + "as_gpsd = \"yes\"\n")
        }
        #expect(throws: DaemonOptions.Failure.usage("--speed, --loop, --date and --as-gpsd apply only with --replay (or replay.file in the config)")) {
            try Self.load("", ["--as-gpsd"])
        }
    }

    @Test func missingFiles() throws {
        // --config names a file that must exist; the default file is optional.
        // With the fix, for the option that named it.
        #expect(throws: DaemonOptions.Failure.config(ConfigError(file: "nope.toml", line: 0, message: "no such file; give the path of an existing file, or leave out --config to use /etc/locationd/locationd.toml when it exists"))) {
            try DaemonOptions.parse(["--config", "nope.toml"], readFile: { _ throws(ConfigError) in nil })
        }
        #expect(throws: DaemonOptions.Failure.config(ConfigError(file: "nope.toml", line: 0, message: "no such file; give the path of an existing file, or leave out the path to check /etc/locationd/locationd.toml"))) {
            try DaemonOptions.parse(["--check-config", "nope.toml"], readFile: { _ throws(ConfigError) in nil })
        }
        let parsed = try DaemonOptions.parse([], defaultConfigPath: "/nonexistent/locationd.toml")
        #expect(parsed == .run(DaemonOptions()))
    }

    /// The shipped file documents every option with its default: parsing it gives the defaults,
    /// and every key of the schema appears in it (commented in or out).
    @Test func shippedConfigIsValidAndComplete() throws {
        let text = try String(contentsOf: Self.shipped, encoding: .utf8)
        #expect(ConfigSchema.changes(from: try Self.load(text), to: DaemonOptions()).isEmpty, "the file sets every option to its default")
        for key in ConfigSchema.keys {
            #expect(text.contains("[\(key.table)]"), "table of \(key.path)")
            #expect(text.contains("\n\(key.key) = ") || text.contains("\n# \(key.key) = "), "\(key.path) not documented")
        }
        let docs = try String(contentsOf: Self.repo.appendingPathComponent("docs/configuration.md"), encoding: .utf8)
        for key in ConfigSchema.keys { #expect(docs.contains("`\(key.key)`"), "\(key.path) not in docs/configuration.md") }
    }

    /// Runs locationd to its exit (`runToExit`). `launcher`: a command it runs under (setpriv,
    /// to run it as another user).
    static func run(_ arguments: [String], launcher: [String] = [], timeout: Double = 60) throws -> (status: Int32, out: String, err: String) {
        guard let command = launcher.first else { return try runToExit(DaemonProcess.executable, arguments, timeout: timeout) }
        return try runToExit(URL(fileURLWithPath: command), launcher.dropFirst() + [DaemonProcess.executable.path] + arguments, timeout: timeout)
    }

    @Test func checkConfigCommand() throws {
        let ok = try Self.run(["--check-config", Self.shipped.path])
        #expect(ok.status == 0, "\(ok.err)")
        #expect(ok.out.contains("\(Self.shipped.path): valid"))
        #expect(ok.out.contains("[gpsd]\nhost = \"localhost\"\nport = 2947\n"))
        // Flags apply to the printed, effective config.
        let flagged = try Self.run(["--check-config", Self.shipped.path, "--gpsd", "gps.local:3000"])
        #expect(flagged.out.contains("host = \"gps.local\"\nport = 3000\n"))

        let bad = FileManager.default.temporaryDirectory.appendingPathComponent("locationd-\(UUID().uuidString.prefix(6)).toml")
        try "[gpsd]\nhots = \"x\"\n".write(to: bad, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: bad) }
        let failed = try Self.run(["--check-config", bad.path])
        #expect(failed.status == 78)
        #expect(failed.err == "locationd: \(bad.path):2: unknown key 'gpsd.hots'; expected one of host, port, device\n")

        // Not read(2)'s bare "Is a directory".
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("locationd-dir-\(UUID().uuidString.prefix(6))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let isDirectory = try Self.run(["--check-config", directory.path])
        #expect(isDirectory.status == 78)
        #expect(isDirectory.err == "locationd: \(directory.path): is a directory, not a config file; give the file's path (such as \(directory.path)/locationd.toml)\n", "\(isDirectory.err)")
    }

    /// A socket path taken by something else (a file, a directory) is left alone, and the
    /// error says what to do instead.
    @Test func aSocketPathThatIsNotASocketNamesTheFix() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("locationd-notasocket-\(UUID().uuidString.prefix(6))")
        try "keep me\n".write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        let started = try Self.run(["--socket", file.path, "--database", "none", "--gpsd", "127.0.0.1:1"], timeout: 20)
        #expect(started.status == 78, "\(started.err)")
        #expect(started.err.contains("\(file.path) exists and is not a socket; locationd will not remove it: remove it yourself if nothing needs it, or choose another path with --socket or [socket] path\n"), "\(started.err)")
        #expect(try String(contentsOf: file, encoding: .utf8) == "keep me\n")
    }

    /// A config file the daemon's user may not read (made 0600 root's to hide the policy, say)
    /// names that user and the fix, as the store's errors do, at start and at a reload alike. A
    /// directory on the way the user may not enter is named as such.
    @Test(.enabled("user 'daemon' cannot run the built locationd (a parent folder is not searchable by others)") {
        try OtherUserTests.daemonUserCanRunLocationd()
    })
    func aConfigFileTheDaemonsUserCannotReadNamesTheUserAndTheFix() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("locationd-unreadable-\(UUID().uuidString.prefix(6))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        chmod(dir.path, 0o755)
        let config = dir.appendingPathComponent("locationd.toml").path
        try FileManager.default.copyItem(atPath: Self.shipped.path, toPath: config)
        chmod(config, 0o600)
        let user = try #require(getpwnam("daemon")).pointee.pw_uid
        let asDaemon = ["/usr/bin/setpriv", "--reuid=daemon", "--regid=daemon", "--clear-groups"]
        let file = try Self.run(["--check-config", config], launcher: asDaemon)
        #expect(file.status == 78)
        #expect(file.err == "locationd: \(config): cannot be read by user daemon, uid \(user) (permission denied); make it readable by the daemon's user (chmod 0644, as installed)\n", "\(file.err)")
        chmod(config, 0o644)
        chmod(dir.path, 0o700)
        let directory = try Self.run(["--check-config", config], launcher: asDaemon)
        #expect(directory.status == 78)
        #expect(directory.err == "locationd: \(config): cannot be read: the directory \(dir.path) cannot be entered by user daemon, uid \(user) (no search permission); let the daemon's user search it (chmod o+x, or g+x for a group it is in)\n", "\(directory.err)")
    }

    /// The config file a symbolic link (into a checkout of the admin's, say) whose target is
    /// readable (0644) in a directory the daemon's user may not enter: that directory is named,
    /// through the link (not the file, readable already).
    @Test(.enabled("user 'daemon' cannot run the built locationd (a parent folder is not searchable by others)") {
        try OtherUserTests.daemonUserCanRunLocationd()
    })
    func aConfigFileLinkedIntoADirectoryTheDaemonsUserCannotEnterNamesThatDirectory() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("locationd-linked-\(UUID().uuidString.prefix(6))")
        let hidden = dir.appendingPathComponent("private")
        try FileManager.default.createDirectory(at: hidden, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        chmod(dir.path, 0o755)
        chmod(hidden.path, 0o700)
        let target = hidden.appendingPathComponent("locationd.toml").path
        try FileManager.default.copyItem(atPath: Self.shipped.path, toPath: target)
        chmod(target, 0o644)
        let config = dir.appendingPathComponent("locationd.toml").path
        #expect(symlink("private/locationd.toml", config) == 0)
        let user = try #require(getpwnam("daemon")).pointee.pw_uid
        let result = try Self.run(["--check-config", config], launcher: ["/usr/bin/setpriv", "--reuid=daemon", "--regid=daemon", "--clear-groups"])
        #expect(result.status == 78)
        #expect(result.err == "locationd: \(config): cannot be read: the directory \(hidden.path) (on the way through the symbolic link \(config)) cannot be entered by user daemon, uid \(user) (no search permission); let the daemon's user search it (chmod o+x, or g+x for a group it is in)\n", "\(result.err)")
    }

    /// A replay log that cannot be opened is refused at start and by --check-config, naming
    /// the file, the reason and the fix (it failed only when the first subscriber started the
    /// replay); from --replay a usage error (64), from the file a config error at its line (78).
    @Test func aReplayLogThatCannotBeOpenedIsRefused() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("locationd-replay-\(UUID().uuidString.prefix(6))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let missing = dir.appendingPathComponent("nosuch.nmea").path
        #expect(DaemonOptions.replayProblem(missing) == "no such file")
        #expect(DaemonOptions.replayProblem(dir.path) == "it is a directory")
        // Under the unit, a log in a home directory or /tmp is hidden from the daemon: said so.
        let hides: (String) -> Bool = { _ in true }
        #expect(DaemonOptions.hiddenByTheUnit("/home/ann/drive.nmea", unitHides: hides) == "the unit's ProtectHome=yes hides /home from locationd")
        #expect(DaemonOptions.hiddenByTheUnit("/tmp/x.nmea", unitHides: hides) == "the unit's PrivateTmp=yes gives locationd a /tmp of its own")
        // (A relative path is taken from the working directory: visible unless the suite runs in
        // a clone under /tmp or /home.)
        let cwd = FileManager.default.currentDirectoryPath
        let cwdHidden = ["/tmp", "/var/tmp", "/home", "/root", "/run/user"].contains { cwd == $0 || cwd.hasPrefix($0 + "/") }
        for visible in ["/homework/x.nmea", "/var/lib/locationd/x.nmea", "/srv/tmp/x"] + (cwdHidden ? [] : ["relative/x.nmea"]) {
            #expect(DaemonOptions.hiddenByTheUnit(visible, unitHides: hides) == nil, "\(visible)")
        }
        // A unit that does not hide them (or a shell that inherited INVOCATION_ID): no hint.
        #expect(DaemonOptions.hiddenByTheUnit("/home/ann/drive.nmea", unitHides: { _ in false }) == nil)
        // Here (no ProtectHome=, no PrivateTmp=) nothing is hidden, whatever INVOCATION_ID says.
        for dir in ["/home", "/root", "/tmp", "/var/tmp"] { #expect(!DaemonOptions.unitHides(dir), "\(dir)") }
        #expect(DaemonOptions.replayProblem("nosuch-\(UUID().uuidString).nmea")?.hasPrefix("no such file (a relative path is taken from the working directory, /") == true)
        for readable in ["-", "/dev/null", Self.shipped.path] { #expect(DaemonOptions.replayProblem(readable) == nil, "\(readable)") }
        let fifo = dir.appendingPathComponent("fifo").path
        #expect(mkfifo(fifo, 0o600) == 0)
        #expect(DaemonOptions.replayProblem(fifo) == nil)  // opened without waiting for a writer

        let config = dir.appendingPathComponent("locationd.toml")
        try "[replay]\nspeed = 0\nfile = \"\(missing)\"\n".write(to: config, atomically: true, encoding: .utf8)
        let fromFile = "\(config.path):3: 'replay.file' is \"\(missing)\": cannot open it for reading: no such file; give the path of a readable NMEA log, or \"\" to read gpsd"
        let checked = try Self.run(["--check-config", config.path])
        #expect(checked.status == 78 && checked.err == "locationd: \(fromFile)\n", "\(checked)")
        let started = try Self.run(["--config", config.path, "--socket", dir.appendingPathComponent("s").path, "--database", "none"],
                                   timeout: 20)
        #expect(started.status == 78 && started.err == "locationd: \(fromFile)\n", "\(started)")

        let fromFlag = "--replay '\(missing)': cannot open it for reading: no such file; give the path of a readable NMEA log, or - for standard input"
        let flagged = try Self.run(["--replay", missing, "--socket", dir.appendingPathComponent("s").path, "--database", "none"],
                                   timeout: 20)
        #expect(flagged.status == 64 && flagged.err == "locationd: \(fromFlag)\n", "\(flagged)")
        let flaggedCheck = try Self.run(["--check-config", "/dev/null", "--replay", missing])
        #expect(flaggedCheck.status == 64 && flaggedCheck.err == "locationd: \(fromFlag)\n", "\(flaggedCheck)")
        // --gpsd turns the file's replay off: nothing to open.
        #expect(try Self.run(["--check-config", config.path, "--gpsd", "localhost"]).status == 0)
    }

    /// A reload refuses a changed replay log that cannot be opened (it would stop the next
    /// start); the one replaying is not looked at again.
    @Test func aReloadLooksOnlyAtAChangedReplayLog() throws {
        let problem: DaemonOptions.ReplayCheck = { $0 == "gone.nmea" || $0 == "typo.nmea" ? "no such file" : nil }
        var text = "[replay]\nfile = \"gone.nmea\"\n"
        var running = try Self.load("[replay]\nfile = \"gone.nmea\"\n")
        running.arguments = ["--config", "locationd.toml"]
        let read: DaemonOptions.FileReader = { path throws(ConfigError) in path == "locationd.toml" ? text : nil }
        #expect(try running.reloaded(defaultConfigPath: "/nonexistent", readFile: read, replayProblem: problem).replayFile == "gone.nmea")
        text = "[replay]\nfile = \"typo.nmea\"\n"
        #expect(throws: DaemonOptions.Failure.config(ConfigError(file: "locationd.toml", line: 2, message: #"'replay.file' is "typo.nmea": cannot open it for reading: no such file; give the path of a readable NMEA log, or "" to read gpsd"#))) {
            try running.reloaded(defaultConfigPath: "/nonexistent", readFile: read, replayProblem: problem)
        }
    }
}

/// The approximate-location grid's secret: created once, whole, private; read back unchanged.
@Suite struct DeviceSecretTests {
    @Test func theSecretIsCreatedWholeOnceAndReadBack() throws {
        var template = Array("/tmp/ldt-secret-XXXXXX".utf8CString)
        let dir = String(cString: try #require(template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }))
        defer { _ = try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/privacy-secret"
        // A partial file left by a crash mid-write does not stand in the way.
        try "12".write(toFile: path + ".new", atomically: false, encoding: .utf8)
        let first = try DeviceSecret.load(path: path)
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(text.count == 17 && text.hasSuffix("\n") && UInt64(text.dropLast(), radix: 16) == first)
        var info = stat()
        #expect(stat(path, &info) == 0 && info.st_mode & 0o777 == 0o600)
        #expect(!FileManager.default.fileExists(atPath: path + ".new"))
        #expect(try DeviceSecret.load(path: path) == first)
        // One the group or others could read (an admin's copy, a restore) is the owner's again.
        chmod(path, 0o644)
        #expect(try DeviceSecret.load(path: path) == first)
        #expect(stat(path, &info) == 0 && info.st_mode & 0o777 == 0o600)
        // An unreadable secret names the file and the fix.
        try "".write(toFile: path, atomically: false, encoding: .utf8)
        do {
            _ = try DeviceSecret.load(path: path)
            Issue.record("an empty secret was accepted")
        } catch {
            #expect("\(error)".contains("privacy-secret") && "\(error)".contains("remove it to generate a new one"), "\(error)")
        }
        // One that cannot be created is the store's failure, restarted (exit 1) where it may
        // pass (not a config error, 75, which names only a lookup not answered). A path
        // through a file fails at the read already, for good (78). (The creation's own 78, a
        // directory the daemon may not write, needs a user other than root: `ReadOnlyDatabaseTests`
        // covers such directories for the database, which is created first.)
        do {
            _ = try DeviceSecret.load(path: dir + "/gone/privacy-secret")
            Issue.record("created a secret in a missing directory")
        } catch {
            #expect(error is StoreError && Daemon.exitStatus(for: error) == 1, "\(error)")
            #expect("\(error)".contains("\(dir)/gone/privacy-secret: cannot create the privacy secret"), "\(error)")
        }
        #expect(throws: (any Error).self) { try DeviceSecret.load(path: path + "/privacy-secret") }
        do { _ = try DeviceSecret.load(path: path + "/privacy-secret") } catch { #expect(Daemon.exitStatus(for: error) == 78, "\(error)") }
    }
}

extension ConfigTests {
    /// The port suggested for gpsd.port is one TOML and gpsd.port accept: for "gps:02947" not
    /// "port = 02947" (a leading zero, which TOML refuses), for "gps:+2947" not "port = +2947".
    @Test func aSuggestedPortIsAValidTOMLInteger() throws {
        for host in ["gps:02947", "gps:+2947", "[::1]:02947"] {
            let message = try #require(Self.error("[gpsd]\nhost = \"\(host)\"\n"), "\(host)")
            #expect(message.hasSuffix("(and port = 2947)"), "\(message)")
            // What it says to write is accepted.
            #expect(Self.error("[gpsd]\nport = 2947\n") == nil)
        }
        #expect(Self.error("[gpsd]\nport = 02947\n") != nil, "TOML refuses a leading zero")
    }
}
