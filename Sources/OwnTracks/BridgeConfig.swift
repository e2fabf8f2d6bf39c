import LocationCore
import TOMLConfig

/// Everything locationd-mqtt is told: /etc/locationd/mqtt.toml, then the command line
/// (docs/mqtt.md, "Configuration"; Config/mqtt.toml documents every key).
public struct BridgeConfig: Hashable, Sendable {
    /// What the bridge subscribes to and publishes.
    public enum Mode: String, Hashable, Sendable, CaseIterable {
        /// Every location locationd delivers through the filters (`t:"t"`): OwnTracks' move mode.
        case move
        /// Significant changes only (`t:"p"`): OwnTracks' significant mode.
        case significant
    }

    // [locationd]
    public var socket = "/run/locationd/locationd.sock"
    // [broker]
    public var host = "localhost"
    public var port = 1883
    public var clientID = ""
    public var keepalive = 60
    public var username = ""
    public var passwordFile = ""
    public var caFile = ""
    public var certFile = ""
    public var keyFile = ""
    // [owntracks]
    public var topic = ""
    public var tid = ""
    // [publish]
    public var mode = Mode.move
    public var locations = true
    public var transitions = true
    public var visits = true
    public var distanceFilter = 0.0
    public var minimumInterval = 0.0
    public var queueLimit = 10_000

    public init() {}

    public static let defaultPath = "/etc/locationd/mqtt.toml"

    /// `owntracks/USER/DEVICE`'s client id when none is set: one per device, so that the broker
    /// keeps its session (commands sent while it was away) and no two devices share one.
    public var effectiveClientID: String {
        clientID.isEmpty ? "locationd-mqtt-" + topic.split(separator: "/").suffix(2).joined(separator: "-") : clientID
    }

    /// OwnTracks' rule: the tid defaults to the last two characters of the topic.
    public var effectiveTID: String { tid.isEmpty ? String(topic.suffix(2)) : tid }

    /// TLS is on when a CA file is given.
    public var tls: Bool { !caFile.isEmpty }

    /// The subscription asked of locationd: durable, its events kept until acknowledged.
    public var subscription: SubscriptionOptions {
        var events: EventKinds = mode == .move ? .location : .significant
        if visits { events.insert(.visits) }
        if !locations { events.remove(mode == .move ? .location : .significant) }
        if events.isEmpty { events = .location }  // nothing to publish but transitions: the smallest stream
        var options = SubscriptionOptions(distanceFilter: distanceFilter, minimumInterval: minimumInterval, events: events)
        // Every event numbered and kept by locationd until the broker has it (docs/mqtt.md).
        options.durable = true
        return options
    }

    /// A path of the config relative to systemd's credentials folder (`LoadCredential=`) when
    /// it has no `/` and `$CREDENTIALS_DIRECTORY` is set.
    public static func credentialPath(_ path: String, credentialsDirectory: String?) -> String {
        guard !path.contains("/"), let dir = credentialsDirectory, !dir.isEmpty else { return path }
        return dir.hasSuffix("/") ? dir + path : dir + "/" + path
    }

    // MARK: Parsing

    struct Key: Sendable {
        let table: String
        let key: String
        let set: @Sendable (inout BridgeConfig, TOMLValue) -> String?
        var path: String { "\(table).\(key)" }
    }

    static func string(_ table: String, _ key: String, _ kp: WritableKeyPath<BridgeConfig, String> & Sendable,
                       check: (@Sendable (String) -> String?)? = nil) -> Key {
        Key(table: table, key: key) { c, v in
            guard case .string(let s) = v else { return "'\(table).\(key)' must be a string, not \(v.typeName)" }
            if let problem = check?(s) { return "'\(table).\(key)' is \(v); \(problem)" }
            c[keyPath: kp] = s
            return nil
        }
    }

    static func integer(_ table: String, _ key: String, _ kp: WritableKeyPath<BridgeConfig, Int> & Sendable, range: ClosedRange<Int>, unit: String = "") -> Key {
        Key(table: table, key: key) { c, v in
            guard case .integer(let i) = v else { return "'\(table).\(key)' must be an integer, not \(v.typeName)" }
            guard let n = Int(exactly: i), range.contains(n) else { return "'\(table).\(key)' is \(i); expected \(range.lowerBound)…\(range.upperBound)\(unit)" }
            c[keyPath: kp] = n
            return nil
        }
    }

    static func number(_ table: String, _ key: String, _ kp: WritableKeyPath<BridgeConfig, Double> & Sendable, range: ClosedRange<Double>, unit: String) -> Key {
        Key(table: table, key: key) { c, v in
            let d: Double
            switch v {
            case .float(let f): d = f
            case .integer(let i): d = Double(i)
            default: return "'\(table).\(key)' must be a number, not \(v.typeName)"
            }
            guard d.isFinite, range.contains(d) else { return "'\(table).\(key)' is \(v); expected \(numberText(range.lowerBound))…\(numberText(range.upperBound))\(unit)" }
            c[keyPath: kp] = d
            return nil
        }
    }

    static let keys: [Key] = [
        string("locationd", "socket", \.socket, check: socketProblem),
        Key(table: "broker", key: "address") { c, v in
            guard case .string(let s) = v else { return "'broker.address' must be a string, not \(v.typeName)" }
            guard let (host, port) = parseAddress(s) else { return "'broker.address' is \(v); \(addressProblem(s) ?? "")" }
            c.host = host
            c.port = port
            return nil
        },
        string("broker", "client_id", \.clientID, check: { $0.utf8.count > 65_535 ? "at most 65535 bytes" : nil }),
        integer("broker", "keepalive", \.keepalive, range: 5...65_535, unit: " seconds"),
        string("broker", "username", \.username),
        string("broker", "password_file", \.passwordFile),
        string("broker", "ca_file", \.caFile),
        string("broker", "cert_file", \.certFile),
        string("broker", "key_file", \.keyFile),
        string("owntracks", "topic", \.topic, check: topicProblem),
        string("owntracks", "tid", \.tid, check: { $0.utf8.count > 16 ? "at most 16 bytes (OwnTracks shows two characters)" : nil }),
        Key(table: "publish", key: "mode") { c, v in
            guard case .string(let s) = v, let m = Mode(rawValue: s) else {
                return "'publish.mode' is \(v); expected \"move\" or \"significant\""
            }
            c.mode = m
            return nil
        },
        Key(table: "publish", key: "events") { c, v in
            let allowed = ["location", "transition", "visit"]
            guard case .array(let items) = v else { return "'publish.events' must be an array of strings, not \(v.typeName)" }
            var names: [String] = []
            for item in items {
                guard case .string(let s) = item, allowed.contains(s) else {
                    return "'publish.events' holds \(item); expected any of \(allowed.map { "\"\($0)\"" }.joined(separator: ", "))"
                }
                names.append(s)
            }
            c.locations = names.contains("location")
            c.transitions = names.contains("transition")
            c.visits = names.contains("visit")
            return nil
        },
        number("publish", "distance_filter", \.distanceFilter, range: SubscriptionOptions.limits.distanceFilter, unit: " metres"),
        number("publish", "minimum_interval", \.minimumInterval, range: SubscriptionOptions.limits.minimumInterval, unit: " seconds"),
        integer("publish", "queue_limit", \.queueLimit, range: 1...1_000_000, unit: " messages"),
    ]

    static let tables = ["locationd", "broker", "owntracks", "publish"]

    /// Every key as `table.key`, in the shipped file's order.
    public static var keyPaths: [String] { keys.map(\.path) }

    /// Applies `text` (the file `file`) on top of `self`: unknown tables and keys, wrong types and
    /// values out of range are errors naming the file, the line and the key.
    public mutating func apply(_ text: String, file: String) throws(ConfigError) {
        let document = try TOMLDocument.parse(text, file: file)
        for header in document.tables where !Self.tables.contains(header.name) {
            throw ConfigError(file: file, line: header.line,
                              message: "unknown table [\(header.name)]; expected one of \(Self.tables.map { "[\($0)]" }.joined(separator: ", "))")
        }
        for entry in document.entries {
            guard !entry.table.isEmpty else {
                throw ConfigError(file: file, line: entry.line,
                                  message: "unknown key '\(entry.key)'; every option belongs in a table: \(Self.tables.map { "[\($0)]" }.joined(separator: ", "))")
            }
            guard let key = Self.keys.first(where: { $0.table == entry.table && $0.key == entry.key }) else {
                let expected = Self.keys.filter { $0.table == entry.table }.map(\.key)
                throw ConfigError(file: file, line: entry.line,
                                  message: "unknown key '\(entry.path)'; expected one of \(expected.joined(separator: ", "))")
            }
            if let problem = key.set(&self, entry.value) {
                throw ConfigError(file: file, line: entry.line, message: problem)
            }
        }
    }

    /// What must hold once the file and the command line are read, or why not.
    public var problem: String? {
        if topic.isEmpty { return "no topic: give --topic owntracks/USER/DEVICE or [owntracks] topic" }
        if certFile.isEmpty != keyFile.isEmpty { return "[broker] cert_file and key_file go together: give both or neither" }
        if !certFile.isEmpty && caFile.isEmpty { return "[broker] cert_file needs ca_file (TLS is on when ca_file is set)" }
        if !passwordFile.isEmpty && username.isEmpty { return "[broker] password_file needs a username" }
        if !locations && !transitions && !visits { return "[publish] events is empty: nothing would be published" }
        return nil
    }

    // MARK: Checks shared by the file and the command line

    /// `HOST:PORT`, `HOST`, `[IPv6]:PORT`: sets nothing, says what is wrong.
    public static func addressProblem(_ text: String) -> String? {
        parseAddress(text) == nil ? "expected HOST, HOST:PORT, [IPv6] or [IPv6]:PORT with a port 1…65535" : nil
    }

    public static func parseAddress(_ text: String) -> (host: String, port: Int)? {
        var host = Substring(text)
        var port = 1883
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else { return nil }
            let rest = host[host.index(after: close)...]
            host = host[host.index(after: host.startIndex)..<close]
            if !rest.isEmpty {
                guard rest.hasPrefix(":"), let p = Int(rest.dropFirst()), (1...65_535).contains(p) else { return nil }
                port = p
            }
        } else if let colon = host.lastIndex(of: ":") {
            guard host.firstIndex(of: ":") == colon, let p = Int(host[host.index(after: colon)...]), (1...65_535).contains(p) else { return nil }
            port = p
            host = host[..<colon]
        }
        guard !host.isEmpty, !host.contains(" ") else { return nil }
        return (String(host), port)
    }

    /// A publish topic: not empty, no wildcards, no NUL, at most 65,535 bytes less the longest
    /// suffix (`/waypoints`).
    public static func topicProblem(_ topic: String) -> String? {
        if topic.isEmpty { return "expected a topic such as owntracks/USER/DEVICE" }
        if topic.contains("+") || topic.contains("#") { return "a publish topic has no wildcards (+, #)" }
        if topic.utf8.contains(0) { return "a topic has no NUL" }
        if topic.hasSuffix("/") { return "the base topic does not end in /: subtopics (/event, /cmd) are added to it" }
        if topic.utf8.count > 65_000 { return "at most 65000 bytes" }
        return nil
    }

    public static func socketProblem(_ path: String) -> String? {
        if path.isEmpty { return "expected the path of locationd's socket" }
        if path.utf8.count > 107 { return "\(path.utf8.count) bytes long; at most 107 (a Unix socket address)" }
        return nil
    }
}
