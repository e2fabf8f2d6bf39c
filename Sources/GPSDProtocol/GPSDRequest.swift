import LocationProtocol

/// What a connection has asked to be sent (`?WATCH`). Only JSON is served.
public struct GPSDWatch: Sendable, Hashable {
    public var enable: Bool
    public var json: Bool
    public init(enable: Bool = false, json: Bool = false) { self.enable = enable; self.json = json }

    /// Whether `TPV` reports are due.
    public var streamsReports: Bool { enable && json }
}

/// The members a `?WATCH={…}` gave; absent ones leave the watch as it was.
public struct GPSDWatchChange: Sendable, Hashable {
    public var enable: Bool?
    public var json: Bool?
    /// NMEA or raw output was asked for: not served (the reply says `"nmea":false`).
    public var wantsOtherOutput: Bool

    public init(enable: Bool? = nil, json: Bool? = nil, wantsOtherOutput: Bool = false) {
        self.enable = enable; self.json = json; self.wantsOtherOutput = wantsOtherOutput
    }

    /// The watch after this change. As gpsd, enabling without naming an output means JSON.
    public func applied(to watch: GPSDWatch) -> GPSDWatch {
        var w = watch
        if let enable { w.enable = enable }
        if let json { w.json = json } else if enable == true && !wantsOtherOutput { w.json = true }
        return w
    }
}

/// One request of gpsd's client protocol (`gpsd_json(5)`): `?NAME;` or `?NAME={JSON};`.
public enum GPSDRequest: Sendable, Hashable {
    /// `?WATCH;` (nil: report the watch) or `?WATCH={…};`.
    case watch(GPSDWatchChange?)
    case poll
    case version
    case devices
    /// `?DEVICE;`: the device's description.
    case device
    /// Not a request locationd serves: answered with `ERROR` carrying this message.
    case invalid(String)

    /// WATCH members gpsd 3.22 knows, by JSON type.
    static let booleanMembers: Set<String> = ["enable", "json", "nmea", "scaled", "split24", "pps", "timing"]
    static let stringMembers: Set<String> = ["class", "device", "remote"]

    /// Decodes one request, its terminator (`;` or end of line) already removed.
    public static func decode(_ text: ArraySlice<UInt8>) -> GPSDRequest {
        var body = text
        while let b = body.first, isSpace(b) { body.removeFirst() }
        while let b = body.last, isSpace(b) { body.removeLast() }
        guard body.first == UInt8(ascii: "?") else { return unrecognized(body) }
        let afterMark = body.index(after: body.startIndex)
        let equals = body[afterMark...].firstIndex(of: UInt8(ascii: "="))
        let name = String(decoding: body[afterMark..<(equals ?? body.endIndex)], as: UTF8.self)
        let argument = equals.map { body[body.index(after: $0)...] }
        switch name {
        case "WATCH":
            guard let argument else { return .watch(nil) }
            return watch(argument)
        case "POLL" where argument == nil: return .poll
        case "VERSION" where argument == nil: return .version
        case "DEVICES" where argument == nil: return .devices
        case "DEVICE":
            return argument == nil ? .device : .invalid("Device configuration is not served by locationd")
        default:
            return unrecognized(body)
        }
    }

    private static func watch(_ argument: ArraySlice<UInt8>) -> GPSDRequest {
        let value: JSONValue
        do {
            value = try JSONParser(maxDepth: 2, maxBytes: GPSDRequestReader.maxRequestBytes).parse(argument)
        } catch {
            return .invalid("Invalid WATCH: \(error.reason)")
        }
        guard case .object(let members) = value else { return .invalid("Invalid WATCH: not an object") }
        var change = GPSDWatchChange()
        for (key, member) in members.sorted(by: { $0.key < $1.key }) {
            switch (key, member) {
            case ("enable", .bool(let b)): change.enable = b
            case ("json", .bool(let b)): change.json = b
            case ("nmea", .bool(let b)): change.wantsOtherOutput = change.wantsOtherOutput || b
            case ("raw", .number(let n)) where n == n.rounded() && (0...2).contains(n):
                change.wantsOtherOutput = change.wantsOtherOutput || n > 0
            case ("class", .string(let s)) where s == "WATCH": break
            case _ where booleanMembers.contains(key):
                guard case .bool = member else { return .invalid("Invalid WATCH: \(key) must be a boolean") }
            case _ where stringMembers.contains(key):
                guard case .string = member else { return .invalid("Invalid WATCH: \(key) must be a string") }
                if key == "class" { return .invalid("Invalid WATCH: class must be \"WATCH\"") }
            case ("raw", _): return .invalid("Invalid WATCH: raw must be 0, 1 or 2")
            default: return .invalid("Invalid WATCH: unknown attribute name")
            }
        }
        return .watch(change)
    }

    /// gpsd's answer to a request it does not know, quoting (printable parts of) the request.
    private static func unrecognized(_ body: ArraySlice<UInt8>) -> GPSDRequest {
        let shown = body.prefix(64).map { $0 >= 0x20 && $0 < 0x7F ? $0 : UInt8(ascii: "?") }
        return .invalid("Unrecognized request '\(String(decoding: shown, as: UTF8.self))'")
    }

    static func isSpace(_ b: UInt8) -> Bool { b == 0x20 || b == 0x09 || b == 0x0A || b == 0x0D }
}

/// Splits a connection's bytes into requests: each ends at `;` or a line end, except inside a
/// JSON string of its argument. libgps sends `?WATCH={…};` with no newline, Python's `gps`
/// module `?WATCH={…}` and a newline; both, and several requests in one read, are requests.
///
/// Bounded: a request longer than `maxRequestBytes` ends the reading (`.tooLong`, after which
/// the shell closes the connection); nothing else is buffered.
public struct GPSDRequestReader: Sendable {
    /// Longer than any request a gpsd client makes (a WATCH naming a device path).
    public static let maxRequestBytes = 1024

    public enum Item: Sendable, Hashable {
        case request(GPSDRequest)
        /// A request without its end within `maxRequestBytes`.
        case tooLong
    }

    private var pending: [UInt8] = []
    private var inArgument = false
    private var inString = false
    private var escaped = false
    private var failed = false

    public init() {}

    /// The requests completed by `bytes`, in order.
    public mutating func feed(_ bytes: some Sequence<UInt8>) -> [Item] {
        guard !failed else { return [] }
        var items: [Item] = []
        for b in bytes {
            if inString {
                if escaped { escaped = false } else if b == UInt8(ascii: "\\") { escaped = true } else if b == UInt8(ascii: "\"") { inString = false }
            } else if b == UInt8(ascii: ";") || b == 0x0A || b == 0x0D {
                if pending.contains(where: { !GPSDRequest.isSpace($0) }) {
                    items.append(.request(GPSDRequest.decode(pending[...])))
                }
                pending.removeAll(keepingCapacity: true)
                inArgument = false
                continue
            } else if b == UInt8(ascii: "=") {
                inArgument = true
            } else if b == UInt8(ascii: "\"") && inArgument {
                inString = true
            }
            pending.append(b)
            if pending.count > Self.maxRequestBytes {
                failed = true
                pending = []
                items.append(.tooLong)
                return items
            }
        }
        return items
    }
}
