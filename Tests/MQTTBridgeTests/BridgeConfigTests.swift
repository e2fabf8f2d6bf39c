import Foundation
import LocationCore
import OwnTracks
import TOMLConfig
import Testing

/// mqtt.toml: every key, and errors that name the file, the line and the key, as locationd.toml's.
@Suite struct BridgeConfigTests {
    func config(_ text: String) throws(ConfigError) -> BridgeConfig {
        var c = BridgeConfig()
        try c.apply(text, file: "mqtt.toml")
        return c
    }

    func error(_ text: String) -> String? {
        do { _ = try config(text); return nil } catch { return error.description }
    }

    @Test func everyKey() throws {
        let c = try config("""
            [locationd]
            socket = "/run/l.sock"
            [broker]
            address = "[::1]:8883"
            client_id = "car-7"
            keepalive = 30
            username = "alice"
            password_file = "mqtt-password"
            ca_file = "/etc/ssl/ca.pem"
            cert_file = "/etc/ssl/c.pem"
            key_file = "/etc/ssl/c.key"
            [owntracks]
            topic = "owntracks/alice/car"
            tid = "A7"
            [publish]
            mode = "significant"
            events = ["location", "visit"]
            distance_filter = 25.5
            minimum_interval = 10
            queue_limit = 500
            """)
        #expect(c.socket == "/run/l.sock")
        #expect(c.host == "::1" && c.port == 8883)
        #expect(c.effectiveClientID == "car-7" && c.keepalive == 30)
        #expect(c.username == "alice" && c.passwordFile == "mqtt-password")
        #expect(c.tls && c.certFile == "/etc/ssl/c.pem" && c.keyFile == "/etc/ssl/c.key")
        #expect(c.topic == "owntracks/alice/car" && c.effectiveTID == "A7")
        #expect(c.mode == .significant && c.locations && c.visits && !c.transitions)
        var expected = SubscriptionOptions(distanceFilter: 25.5, minimumInterval: 10, events: [.significant, .visits])
        expected.durable = true
        #expect(c.subscription == expected)
        #expect(c.queueLimit == 500)
        #expect(c.problem == nil)
    }

    @Test func defaultsFollowOwnTracks() throws {
        var c = BridgeConfig()
        c.topic = "owntracks/bob/phone"
        #expect(c.effectiveTID == "ne")  // the topic's last two characters
        #expect(c.effectiveClientID == "locationd-mqtt-bob-phone")
        #expect(!c.tls && c.port == 1883 && c.mode == .move)
        #expect(c.subscription.events == [.location, .visits])
        #expect(c.problem == nil)
    }

    @Test func errorsNameFileLineAndKey() {
        #expect(error("[broker]\naddress = \"host:0\"") == "mqtt.toml:2: 'broker.address' is \"host:0\"; expected HOST, HOST:PORT, [IPv6] or [IPv6]:PORT with a port 1…65535")
        #expect(error("\n\n[brokers]") == "mqtt.toml:3: unknown table [brokers]; expected one of [locationd], [broker], [owntracks], [publish]")
        #expect(error("[broker]\nport = 1") == "mqtt.toml:2: unknown key 'broker.port'; expected one of address, client_id, keepalive, username, password_file, ca_file, cert_file, key_file")
        #expect(error("topic = \"a\"") == "mqtt.toml:1: unknown key 'topic'; every option belongs in a table: [locationd], [broker], [owntracks], [publish]")
        #expect(error("[broker]\nkeepalive = 2") == "mqtt.toml:2: 'broker.keepalive' is 2; expected 5…65535 seconds")
        #expect(error("[broker]\nkeepalive = \"60\"") == "mqtt.toml:2: 'broker.keepalive' must be an integer, not a string")
        #expect(error("[owntracks]\ntopic = \"owntracks/+/x\"") == "mqtt.toml:2: 'owntracks.topic' is \"owntracks/+/x\"; a publish topic has no wildcards (+, #)")
        #expect(error("[publish]\nmode = \"fast\"") == "mqtt.toml:2: 'publish.mode' is \"fast\"; expected \"move\" or \"significant\"")
        #expect(error("[publish]\nevents = [\"location\", \"steps\"]") == "mqtt.toml:2: 'publish.events' holds \"steps\"; expected any of \"location\", \"transition\", \"visit\"")
        #expect(error("[publish]\ndistance_filter = -1") == "mqtt.toml:2: 'publish.distance_filter' is -1; expected 0…1000000 metres")
        #expect(error("[publish]\nqueue_limit = 0") == "mqtt.toml:2: 'publish.queue_limit' is 0; expected 1…1000000 messages")
        #expect(error("[publish]\nqueue_limit = 10 # ok\nqueue_limit = 11")?.hasPrefix("mqtt.toml:3: ") == true)  // the parser's own
    }

    @Test func whatMustHoldTogether() {
        var c = BridgeConfig()
        #expect(c.problem == "no topic: give --topic owntracks/USER/DEVICE or [owntracks] topic")
        c.topic = "owntracks/a/b"
        c.certFile = "c.pem"
        #expect(c.problem == "[broker] cert_file and key_file go together: give both or neither")
        c.keyFile = "c.key"
        #expect(c.problem == "[broker] cert_file needs ca_file (TLS is on when ca_file is set)")
        c = BridgeConfig()
        c.topic = "owntracks/a/b"
        c.passwordFile = "p"
        #expect(c.problem == "[broker] password_file needs a username")
    }

    @Test func addressesAndCredentials() {
        #expect(BridgeConfig.parseAddress("broker")! == ("broker", 1883))
        #expect(BridgeConfig.parseAddress("127.0.0.1:1884")! == ("127.0.0.1", 1884))
        #expect(BridgeConfig.parseAddress("[fe80::1]")! == ("fe80::1", 1883))
        for bad in ["", ":1883", "h:x", "h:70000", "[::1", "[::1]x", "a:b:c"] { #expect(BridgeConfig.parseAddress(bad) == nil, "\(bad)") }
        #expect(BridgeConfig.credentialPath("mqtt-password", credentialsDirectory: "/run/credentials/x") == "/run/credentials/x/mqtt-password")
        #expect(BridgeConfig.credentialPath("/etc/p", credentialsDirectory: "/run/credentials/x") == "/etc/p")
        #expect(BridgeConfig.credentialPath("p", credentialsDirectory: nil) == "p")
    }

    /// The shipped Config/mqtt.toml parses, and names every key (commented or not).
    @Test func theShippedFileNamesEveryKey() throws {
        let path = #filePath.split(separator: "/").dropLast(3).joined(separator: "/")
        let text = try String(contentsOfFile: "/" + path + "/Config/mqtt.toml", encoding: .utf8)
        var c = BridgeConfig()
        try c.apply(text, file: "Config/mqtt.toml")
        for key in BridgeConfig.keyPaths {
            let name = key.split(separator: ".").last!
            #expect(text.contains("\n\(name) =") || text.contains("\n# \(name) ="), "Config/mqtt.toml does not document \(key)")
        }
    }
}
