import Dispatch
import Glibc
import LocationCore
import LocationProtocol
import Logging
import SystemdLogging

/// The bridge's state for `locationd-mqtt --status`: a small JSON file, replaced whole
/// (write, then rename) when a connection changes, and at the bridge's tick when anything did.
final class StatusFile {
    let path: String
    var brokerConnected = false
    var locationdConnected = false
    var queued = 0
    var inFlight = 0
    var acknowledged: UInt64 = 0
    var received: UInt64 = 0
    var published: UInt64 = 0
    var lost: UInt64 = 0
    var lastConnect: Int64?
    var lastPuback: Int64?
    private var written: [UInt8] = []
    private var writtenConnections = (false, false)

    init(path: String) { self.path = path }

    func render() -> [UInt8] {
        var out: [UInt8] = []
        JSONWriter.appendASCII("{\"broker\":", to: &out)
        JSONWriter.appendASCII(brokerConnected ? "\"connected\"" : "\"disconnected\"", to: &out)
        JSONWriter.appendASCII(",\"locationd\":", to: &out)
        JSONWriter.appendASCII(locationdConnected ? "\"connected\"" : "\"disconnected\"", to: &out)
        for (key, value) in [("queued", UInt64(queued)), ("inFlight", UInt64(inFlight)), ("published", published),
                             ("receivedSeq", received), ("acknowledgedSeq", acknowledged), ("lost", lost)] {
            out.append(UInt8(ascii: ","))
            JSONWriter.appendString(key, to: &out)
            out.append(UInt8(ascii: ":"))
            DecimalFormat.appendInteger(Int64(clamping: value), to: &out)
        }
        for (key, value) in [("lastConnect", lastConnect), ("lastPuback", lastPuback)] {
            out.append(UInt8(ascii: ","))
            JSONWriter.appendString(key, to: &out)
            out.append(UInt8(ascii: ":"))
            if let value {
                EventEncoder.appendTime(Timestamp(seconds: value), to: &out)
            } else {
                JSONWriter.appendASCII("null", to: &out)
            }
        }
        JSONWriter.appendASCII("}\n", to: &out)
        return out
    }

    /// Writes when a connection changed, or (`force`) when anything did.
    func write(force: Bool = false) {
        guard !path.isEmpty else { return }
        let connections = (brokerConnected, locationdConnected)
        guard force || connections != writtenConnections else { return }
        let text = render()
        guard text != written else { return }
        let temporary = path + ".new"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { return }
        let ok = text.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) == $0.count }
        close(fd)
        guard ok, rename(temporary, path) == 0 else { unlink(temporary); return }
        written = text
        writtenConnections = connections
    }
}

/// SIGTERM and SIGINT end the bridge at once, removing the status file (`--status` then says
/// it is not running); the broker publishes the last will. Keep the returned sources alive.
func stopOnSignals(removing statusPath: String, log: Logger) -> [any DispatchSourceSignal] {
    [SIGTERM, SIGINT].map { sig in
        signal(sig, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
        source.setEventHandler {
            unlink(statusPath)
            log.notice("stopped", metadata: ["signal": "\(sig == SIGTERM ? "SIGTERM" : "SIGINT")"])
            LogBackend.flush()
            _exit(0)
        }
        source.resume()
        return source
    }
}
