import CGPS
import Glibc
import GPSDProtocol
import LocationCore

// The only file that touches libgps and `gps_data_t`. The socket is NIO's (GPSDSource); libgps
// decodes the JSON lines, so what a report means is exactly what it means to every other
// libgps client.

extension GPSDTPV {
    /// Copies the TPV fields locationd uses out of libgps's fix.
    init(_ fix: gps_fix_t) {
        let t = fix.time
        self.init(
            mode: fix.mode,
            time: (t.tv_sec == 0 && t.tv_nsec == 0)
                ? nil : Timestamp(seconds: Int64(t.tv_sec), nanoseconds: Int64(t.tv_nsec)),
            latitude: fix.latitude, longitude: fix.longitude,
            altHAE: fix.altHAE, altMSL: fix.altMSL,
            eph: fix.eph, epv: fix.epv,
            speed: fix.speed, track: fix.track, status: fix.status)
    }
}

extension GPSDSky {
    /// The sky view libgps decoded from a `SKY` report.
    init(_ data: gps_data_t) {
        func finite(_ x: Double) -> Double? { x.isFinite ? x : nil }
        let count = Int(max(0, min(data.satellites_visible, MAXCHANNELS)))
        let satellites = withUnsafeBytes(of: data.skyview) { raw in
            raw.bindMemory(to: satellite_t.self).prefix(count).map { s in
                Satellite(prn: Int(s.PRN), elevation: finite(s.elevation), azimuth: finite(s.azimuth),
                          signalToNoise: finite(s.ss), used: s.used, gnssid: Int(s.gnssid), svid: Int(s.svid),
                          sigid: Int(s.sigid), freqid: s.freqid >= 0 ? Int(s.freqid) : nil, health: Int(s.health))
            }
        }
        let t = data.skyview_time
        let d = data.dop
        self.init(time: t.tv_sec > 0 ? Timestamp(seconds: Int64(t.tv_sec), nanoseconds: Int64(t.tv_nsec)) : nil,
                  dop: DOP(x: finite(d.xdop), y: finite(d.ydop), vertical: finite(d.vdop), time: finite(d.tdop),
                           horizontal: finite(d.hdop), geometric: finite(d.gdop), position: finite(d.pdop)),
                  satellites: satellites)
    }
}

/// Decodes gpsd's JSON report lines with libgps (`gps_unpack`'s decoding, what `gps_read` does with
/// each line). Owns one zeroed `gps_data_t` and a line buffer, both reused for every line, so a
/// report costs no allocation. Used from one thread at a time (the source's event loop).
final class GPSDLineDecoder {
    private let data: UnsafeMutablePointer<gps_data_t>
    private var buffer: UnsafeMutablePointer<CChar>
    private var capacity: Int
    /// The `device` of the last TPV, and whether the last TPV decoded named another one than
    /// the TPV before it (compared in place: a String is made only on a change).
    private(set) var tpvDevice = ""
    private(set) var tpvDeviceChanged = false
    /// libgps's JSON error for the last TPV (0: none); its text is made only to be logged.
    private(set) var tpvError: Int32 = 0
    var tpvErrorText: String { String(cString: json_error_string(tpvError)) }

    init() {
        data = .allocate(capacity: 1)
        memset(data, 0, MemoryLayout<gps_data_t>.size)
        // gpsd's longest report is GPS_JSON_RESPONSE_MAX (10,240) bytes; longer lines grow it.
        capacity = 16 * 1024
        buffer = .allocate(capacity: capacity)
    }

    deinit {
        data.deallocate()
        buffer.deallocate()
    }

    /// Decodes one report line (without its line terminator).
    func decode(_ line: UnsafeRawBufferPointer) -> GPSDMessage {
        if GPSDMessage.hasClass("TPV", line) {
            tpvError = unpack(line)
            noteTPVDevice()
            return .tpv(GPSDTPV(data.pointee.fix))
        }
        if GPSDMessage.hasClass("SKY", line) {
            // libgps fills only the satellites and DOPs the report has: none are left over.
            data.pointee.satellites_visible = 0
            withUnsafeMutableBytes(of: &data.pointee.skyview) { _ = $0.initializeMemory(as: UInt8.self, repeating: 0) }
            data.pointee.dop = dop_t(xdop: .nan, ydop: .nan, pdop: .nan, hdop: .nan, vdop: .nan, tdop: .nan, gdop: .nan)
            data.pointee.skyview_time = timespec()
            unpack(line)
            let fromTPVDevice = withUnsafeBytes(of: &data.pointee.dev.path) { raw in
                raw.prefix { $0 != 0 }.elementsEqual(tpvDevice.utf8)
            }
            return .sky(GPSDSky(data.pointee), fromTPVDevice: fromTPVDevice)
        }
        if GPSDMessage.hasClass("VERSION", line) {
            unpack(line)
            let v = data.pointee.version
            let release = withUnsafeBytes(of: v.release) { raw in String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self) }
            return .version(GPSDVersion(release: release, protocolMajor: Int(v.proto_major), protocolMinor: Int(v.proto_minor)))
        }
        if GPSDMessage.hasClass("ERROR", line) {
            data.pointee.error.0 = 0  // shared with other reports (a union): none without a message
            unpack(line)
            let message = withUnsafeBytes(of: data.pointee.error) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            return .error(message.isEmpty ? "(no message)" : message)
        }
        if GPSDMessage.hasClass("DEVICE", line),
           let path = GPSDMessage.deactivatedDevicePath(in: String(decoding: line, as: UTF8.self)[...]) {
            return .deviceDeactivated(path: path)
        }
        return .other
    }
}

extension GPSDLineDecoder {
    /// Which receiver the TPV came from (libgps puts a report's `device` in `dev.path`; read in
    /// place, not copied, on every report).
    private func noteTPVDevice() {
        tpvDeviceChanged = withUnsafeBytes(of: &data.pointee.dev.path) { raw in
            let path = raw.prefix { $0 != 0 }
            guard !path.elementsEqual(tpvDevice.utf8) else { return false }
            tpvDevice = String(decoding: path, as: UTF8.self)
            return true
        }
    }

    /// What `gps_unpack` does with a line that starts with `{` (copied into the reused buffer,
    /// NUL-terminated): decode its objects one after another until one fails or the line ends.
    /// (Its debug trace is left out: see CGPS/shim.h.) Returns the first JSON error libgps
    /// reported (a value of a type it does not expect, an attribute it does not know), 0 if none.
    @discardableResult
    private func unpack(_ line: UnsafeRawBufferPointer) -> Int32 {
        if line.count + 1 > capacity {
            buffer.deallocate()
            capacity = line.count + 1
            buffer = .allocate(capacity: capacity)
        }
        if let base = line.baseAddress { memcpy(buffer, base, line.count) }
        buffer[line.count] = 0
        // A TPV replaces `set`, but SKY/GST only add bits: clear it for each report.
        data.pointee.set = 0
        guard buffer[0] == CChar(UInt8(ascii: "{")) else { return 0 }
        var next: UnsafePointer<CChar>? = UnsafePointer(buffer)
        var error: Int32 = 0
        while let object = next, object.pointee != 0 {
            let status = libgps_json_unpack(object, data, &next)
            if status == -1 { break }
            if error == 0 { error = status }
        }
        return error
    }
}

/// gpsd's IANA port, `DEFAULT_GPSD_PORT` from gps.h.
public let defaultGPSDPort: String = DEFAULT_GPSD_PORT
