import GPSDProtocol
import Testing

private func requests(_ chunks: [String]) -> [GPSDRequestReader.Item] {
    var reader = GPSDRequestReader()
    return chunks.flatMap { reader.feed(Array($0.utf8)) }
}

private func message(_ item: GPSDRequestReader.Item?) -> String? {
    if case .request(.invalid(let m)) = item { return m }
    return nil
}

@Suite("gpsd requests")
struct GPSDRequestTests {
    @Test("libgps's and Python's WATCH, in any split, are one enable-JSON request")
    func watchForms() {
        let enable = GPSDReaderItemWatch(enable: true, json: true)
        #expect(requests(["?WATCH={\"enable\":true,\"json\":true};"]) == [enable])
        #expect(requests(["?WATCH={\"enable\":true,\"json\":true}\n"]) == [enable])
        #expect(requests(["?WAT", "CH={\"enable\":tr", "ue,\"json\":true}", ";"]) == [enable])
        #expect(requests(["?WATCH={\"enable\":true}\r\n"]) == [GPSDReaderItemWatch(enable: true)])
    }

    @Test("Several requests in one read, and the plain ones")
    func plainRequests() {
        #expect(requests(["?VERSION;?DEVICES;\n?POLL;  ?WATCH;?DEVICE;"])
            == [.request(.version), .request(.devices), .request(.poll), .request(.watch(nil)), .request(.device)])
        #expect(requests([";;\n\r  ;"]).isEmpty)
    }

    @Test("A ';' inside a WATCH string does not end the request")
    func semicolonInString() {
        let items = requests(["?WATCH={\"enable\":true,\"device\":\"/dev/a;b\\\";c\"};"])
        #expect(items == [GPSDReaderItemWatch(enable: true)])
    }

    @Test("Enabling without naming an output means JSON; NMEA alone is not JSON")
    func watchApplied() {
        #expect(GPSDWatchChange(enable: true).applied(to: GPSDWatch()).streamsReports)
        #expect(!GPSDWatchChange(enable: true, wantsOtherOutput: true).applied(to: GPSDWatch()).streamsReports)
        #expect(!GPSDWatchChange(enable: false).applied(to: GPSDWatch(enable: true, json: true)).streamsReports)
        #expect(GPSDWatchChange(json: true).applied(to: GPSDWatch(enable: true)).streamsReports)
        if case .request(.watch(let change?)) = requests(["?WATCH={\"enable\":true,\"nmea\":true};"]).first {
            #expect(change.wantsOtherOutput && change.json == nil)
        } else {
            Issue.record("no watch")
        }
    }

    @Test("Unknown and malformed requests are gpsd's ERROR messages")
    func invalid() {
        #expect(message(requests(["?FOO;"]).first) == "Unrecognized request '?FOO'")
        #expect(message(requests(["hello\n"]).first) == "Unrecognized request 'hello'")
        #expect(message(requests(["?POLL=1;"]).first) == "Unrecognized request '?POLL=1'")
        #expect(message(requests(["?WATCH={\"enable\":1};"]).first) == "Invalid WATCH: enable must be a boolean")
        #expect(message(requests(["?WATCH={\"frob\":true};"]).first) == "Invalid WATCH: unknown attribute name")
        #expect(message(requests(["?WATCH={\"raw\":3};"]).first) == "Invalid WATCH: raw must be 0, 1 or 2")
        #expect(message(requests(["?WATCH={\"class\":\"TPV\"};"]).first) == "Invalid WATCH: class must be \"WATCH\"")
        #expect(message(requests(["?WATCH=[1];"]).first) == "Invalid WATCH: not an object")
        #expect(message(requests(["?WATCH={\"enable\":true\n"]).first)?.hasPrefix("Invalid WATCH: ") == true)
        #expect(message(requests(["?DEVICE={\"path\":\"/dev/x\"};"]).first) == "Device configuration is not served by locationd")
        #expect(message(requests(["?\u{1}\u{ff};"]).first) == "Unrecognized request '????'")
    }

    @Test("A request without an end within the bound stops the reader")
    func tooLong() {
        var reader = GPSDRequestReader()
        let head = reader.feed(Array("?VERSION;?WATCH={\"device\":\"".utf8))
        #expect(head == [.request(.version)])
        let long = reader.feed([UInt8](repeating: UInt8(ascii: ";"), count: GPSDRequestReader.maxRequestBytes))
        #expect(long == [.tooLong])
        #expect(reader.feed(Array("\"};?VERSION;".utf8)).isEmpty)
        #expect(requests([String(repeating: " ", count: GPSDRequestReader.maxRequestBytes + 1)]) == [.tooLong])
    }
}

private func GPSDReaderItemWatch(enable: Bool? = nil, json: Bool? = nil) -> GPSDRequestReader.Item {
    .request(.watch(GPSDWatchChange(enable: enable, json: json)))
}
