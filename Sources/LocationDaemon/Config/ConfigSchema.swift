import LocationCore
import TOMLConfig

/// Every option of locationd.toml: its table, key, type, range, default (the value in a fresh
/// `DaemonOptions`) and whether a reload (SIGHUP) can apply it live. Config/locationd.toml and
/// docs/configuration.md document the same list; a test checks the shipped file names every key.
public struct ConfigKey: Sendable {
    public let table: String
    public let key: String
    /// A reload applies it without a restart.
    public let live: Bool
    let set: @Sendable (inout DaemonOptions, TOMLValue) -> String?
    let get: @Sendable (DaemonOptions) -> TOMLValue

    public var path: String { "\(table).\(key)" }
}

extension ConfigKey {
    static func string(_ table: String, _ key: String, live: Bool = false, _ kp: WritableKeyPath<DaemonOptions, String> & Sendable,
                       oneOf allowed: [String]? = nil, nonEmpty: Bool = false, maxBytes: Int? = nil, why: String = "",
                       check: (@Sendable (String) -> String?)? = nil) -> ConfigKey {
        ConfigKey(table: table, key: key, live: live, set: { options, value in
            guard case .string(let s) = value else { return "'\(table).\(key)' must be a string, not \(value.typeName)" }
            if let allowed, !allowed.contains(s) {
                return "'\(table).\(key)' is \(TOMLValue.string(s)); expected one of \(allowed.joined(separator: ", "))"
            }
            if nonEmpty, s.isEmpty { return "'\(table).\(key)' must not be empty" }
            if let maxBytes, s.utf8.count > maxBytes {
                return "'\(table).\(key)' is \(s.utf8.count) bytes long; at most \(maxBytes)\(why)"
            }
            if let problem = check?(s) { return "'\(table).\(key)' is \(TOMLValue.string(s)); \(problem)" }
            options[keyPath: kp] = s
            return nil
        }, get: { .string($0[keyPath: kp]) })
    }

    static func integer(_ table: String, _ key: String, live: Bool = false, _ kp: WritableKeyPath<DaemonOptions, Int> & Sendable,
                        range: ClosedRange<Int>) -> ConfigKey {
        ConfigKey(table: table, key: key, live: live, set: { options, value in
            guard case .integer(let i) = value else { return "'\(table).\(key)' must be an integer, not \(value.typeName)" }
            guard let n = Int(exactly: i), range.contains(n) else {
                return "'\(table).\(key)' is \(i); expected \(range.lowerBound)…\(range.upperBound)"
            }
            options[keyPath: kp] = n
            return nil
        }, get: { .integer(Int64($0[keyPath: kp])) })
    }

    /// A number (an integer is accepted too); `range` is inclusive.
    static func number(_ table: String, _ key: String, live: Bool = false, _ kp: WritableKeyPath<DaemonOptions, Double> & Sendable,
                       range: ClosedRange<Double>, unit: String = "") -> ConfigKey {
        ConfigKey(table: table, key: key, live: live, set: { options, value in
            let d: Double
            switch value {
            case .float(let f): d = f
            case .integer(let i): d = Double(i)
            default: return "'\(table).\(key)' must be a number, not \(value.typeName)"
            }
            guard d.isFinite, range.contains(d) else {
                return "'\(table).\(key)' is \(value); expected \(numberText(range.lowerBound))…\(numberText(range.upperBound))\(unit)"
            }
            options[keyPath: kp] = d
            return nil
        }, get: { .float($0[keyPath: kp]) })
    }

    static func boolean(_ table: String, _ key: String, live: Bool = false, _ kp: WritableKeyPath<DaemonOptions, Bool> & Sendable) -> ConfigKey {
        ConfigKey(table: table, key: key, live: live, set: { options, value in
            guard case .boolean(let b) = value else { return "'\(table).\(key)' must be true or false, not \(value.typeName)" }
            options[keyPath: kp] = b
            return nil
        }, get: { .boolean($0[keyPath: kp]) })
    }
}

public enum ConfigSchema {
    /// `sun_path` is 108 bytes, NUL included.
    public static let socketPathMaxBytes = 107
    /// The most `[regions] max_registered` (and a rule's `max_regions`) can be.
    public static let maxRegisteredLimit = 1_000_000

    public static let keys: [ConfigKey] = [
        .string("socket", "path", \.socketPath, nonEmpty: true, maxBytes: socketPathMaxBytes,
                why: " (a Unix socket address holds 108 bytes with its terminating NUL): choose a shorter path"),
        .integer("socket", "flood_burst", \.floodBurst, range: 1...1_000_000),
        .number("socket", "flood_rate", \.floodRate, range: 0.001...1_000_000, unit: " requests/s"),
        .number("socket", "unwritable_timeout", \.unwritableTimeout, range: 0.1...86_400, unit: " s"),
        .integer("socket", "max_connections_per_user", \.maxConnectionsPerUser, range: 1...1_000_000),
        .string("gpsd", "host", \.gpsdHost, nonEmpty: true, check: DaemonOptions.hostProblem),
        .integer("gpsd", "port", \.gpsdPort, range: 1...65535),
        .string("gpsd", "device", \.gpsdDevice, maxBytes: 127,
                why: " (gpsd's device paths hold 128 bytes with the terminating NUL)"),
        .string("replay", "file", \.replayFile),
        .number("replay", "speed", \.replaySpeed, range: 0...1_000_000),
        .boolean("replay", "loop", \.replayLoop),
        .string("replay", "date", \.replayDate, check: DaemonOptions.replayDateProblem),
        .boolean("replay", "as_gpsd", \.replayAsGPSD),
        .string("log", "level", live: true, \.logLevel, oneOf: DaemonOptions.logLevels),
        .boolean("log", "precise_coordinates", live: true, \.preciseCoordinates),
        .integer("regions", "max_active", \.regionsMaxActive, range: 0...1_000_000),
        .integer("regions", "max_registered", \.regionsMaxRegistered, range: 1...maxRegisteredLimit),
        .integer("regions", "max_registered_per_user", \.regionsMaxRegisteredPerUser, range: 1...10_000_000),
        .string("store", "database", \.database),
        .integer("store", "queue_limit", \.queueLimit, range: 1...10_000_000),
        .integer("store", "max_places", \.maxPlaces, range: 1...1_000_000),
        .integer("store", "max_visits", \.maxVisits, range: 1...100_000),
        .integer("store", "max_background_programs_per_user", \.maxBackgroundProgramsPerUser, range: 1...1_000_000),
        .string("gpsd_server", "listen", \.gpsdServerListen, check: ListenAddress.problem),
        .boolean("gpsd_server", "allow_non_loopback", \.gpsdServerAllowNonLoopback),
        .string("nmea_server", "socket", \.nmeaServerSocket, maxBytes: socketPathMaxBytes,
                why: " (a Unix socket address holds 108 bytes with its terminating NUL): choose a shorter path"),
        .string("geocoding", "gazetteer", \.gazetteer),
        .number("daemon", "shutdown_timeout", \.shutdownTimeout, range: 0.1...300, unit: " s"),
        .boolean("systemd", "watchdog", \.watchdog),
    ]

    /// Table names in the order of the shipped file.
    public static var tables: [String] {
        var seen: [String] = []
        for k in keys where !seen.contains(k.table) { seen.append(k.table) }
        return seen
    }

    /// Applies a parsed document on top of `options`; unknown tables and keys, wrong types and
    /// values out of range are errors naming the key and its line.
    public static func apply(_ document: TOMLDocument, file: String, to options: inout DaemonOptions,
                             users: (String) throws(Policy.LookupFailure) -> UInt32? = Policy.lookUpUser,
                             groups: (String) throws(Policy.LookupFailure) -> UInt32? = Policy.lookUpGroup) throws(ConfigError) {
        let tableNames = tables
        for header in document.tables where !tableNames.contains(header.name) && !header.name.hasPrefix("policy.") {
            if header.name == "policy" {
                throw ConfigError(file: file, line: header.line,
                                  message: "[policy] needs a rule name: [policy.NAME] (e.g. [policy.navit]), or [policy.default] for everyone no rule matches")
            }
            throw ConfigError(file: file, line: header.line,
                              message: "unknown table [\(header.name)]; expected one of \(tableNames.joined(separator: ", "))")
        }
        for entry in document.entries where !entry.table.hasPrefix("policy.") {
            guard !entry.table.isEmpty else {
                throw ConfigError(file: file, line: entry.line,
                                  message: "unknown key '\(entry.key)'; every option belongs in a table: \(tableNames.map { "[\($0)]" }.joined(separator: ", "))")
            }
            guard let key = keys.first(where: { $0.table == entry.table && $0.key == entry.key }) else {
                let expected = keys.filter { $0.table == entry.table }.map(\.key)
                // A rule's key under the table after it (a header in between): the rule then
                // had "no authorization", and this line was not named.
                let misplaced = Policy.keys.contains(entry.key)
                    ? " ('\(entry.key)' is a key of [policy.NAME] rules: move it into the [policy.NAME] rule it belongs to: a rule's keys come before the next table's header)" : ""
                throw ConfigError(file: file, line: entry.line,
                                  message: "unknown key '\(entry.path)'; expected one of \(expected.joined(separator: ", "))\(misplaced)")
            }
            if let problem = key.set(&options, entry.value) {
                throw ConfigError(file: file, line: entry.line, message: problem)
            }
        }
        // The rules after the other tables: a key misplaced under one of those (a rule's
        // `authorization` below the next header) is the mistake to name, not the rule it left
        // without one. A user or group lookup that was not answered (exit 75, restarted) is
        // thrown by the parse only if the rules are otherwise right, and so, being last here,
        // only if the whole file is: a mistake in it is for good (78), whatever the lookup.
        var warnings: [ConfigError] = []
        options.policy = try Policy.parse(document, file: file, users: users, groups: groups) { warnings.append($0) }
        options.warnings += warnings
    }

    /// The effective configuration as a TOML document (what `--check-config` prints).
    public static func render(_ options: DaemonOptions) -> String {
        var out = ""
        for table in tables {
            out += out.isEmpty ? "[\(table)]\n" : "\n[\(table)]\n"
            for key in keys where key.table == table {
                out += "\(key.key) = \(key.get(options))\n"
            }
        }
        for rule in options.policy.rules + [options.policy.defaultRule] {
            out += "\n[policy.\(rule.name)]\n"
            if let u = rule.user { out += "user = \(u)\n" }
            if let g = rule.group { out += "group = \(g)\n" }
            if let e = rule.executable { out += "executable = \(TOMLValue.string(e))\n" }
            out += "authorization = \"\(rule.authorization.rawValue)\"\naccuracy = \"\(rule.accuracy.rawValue)\"\n"
            out += "purposes = \(TOMLValue.array(rule.purposes.map(TOMLValue.string)))\nmax_regions = \(rule.maxRegions)\n"
        }
        return out
    }

    /// What differs between two configurations, key by key.
    public static func changes(from old: DaemonOptions, to new: DaemonOptions) -> [(key: ConfigKey, old: TOMLValue, new: TOMLValue)] {
        keys.compactMap { key in
            let a = key.get(old), b = key.get(new)
            return a == b ? nil : (key, a, b)
        }
    }
}
