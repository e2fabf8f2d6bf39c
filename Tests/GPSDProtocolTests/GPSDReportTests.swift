import Foundation
import GPSDProtocol
import LocationCore
import Testing

/// The line as a JSON object (Foundation's decoder: nothing of ours checks ours).
private func object(_ line: [UInt8]) throws -> [String: Any] {
    #expect(line.suffix(2) == [0x0D, 0x0A], "gpsd ends every line in CR LF")
    return try #require(JSONSerialization.jsonObject(with: Data(line.dropLast(2))) as? [String: Any])
}

private func text(_ line: [UInt8]) -> String { String(decoding: line, as: UTF8.self) }

/// libgps drops a line with a space after ':' or ',' outside a string: none may have one.
private func isCompact(_ line: [UInt8]) -> Bool {
    var inString = false, escaped = false, previous: UInt8 = 0
    for b in line {
        if inString {
            if escaped { escaped = false } else if b == 0x5C { escaped = true } else if b == 0x22 { inString = false }
        } else if b == 0x22 {
            inString = true
        } else if b == 0x20 && (previous == UInt8(ascii: ":") || previous == UInt8(ascii: ",")) {
            return false
        }
        previous = b
    }
    return true
}

private let moving = Fix(
    time: CivilTime(year: 2024, month: 3, day: 5, hour: 10, minute: 0, second: 1, nanosecond: 987_654_321).timestamp,
    coordinate: Coordinate(latitude: 52.520008, longitude: -13.404954), mode: .threeD,
    altitudeHAE: 81.25, altitudeMSL: 34.5, horizontalAccuracy: 6.1, verticalAccuracy: 9.75, speed: 12.3456, course: 271.5)

@Suite("gpsd reports")
struct GPSDReportTests {
    @Test("A precise TPV has gpsd's fields, order and decimals")
    func preciseTPV() throws {
        let line = GPSDReport.tpv(moving, device: "/dev/ttyUSB0")
        #expect(text(line) == "{\"class\":\"TPV\",\"device\":\"/dev/ttyUSB0\",\"mode\":3,\"time\":\"2024-03-05T10:00:01.987Z\","
            + "\"lat\":52.520008000,\"lon\":-13.404954000,\"altHAE\":81.2500,\"altMSL\":34.5000,\"alt\":34.5000,"
            + "\"epv\":9.750,\"track\":271.5000,\"speed\":12.346,\"eph\":6.100}\r\n")
        let o = try object(line)
        #expect(o["lat"] as? Double == 52.520008)
        #expect(isCompact(line))
    }

    @Test("Unknown values are left out, as gpsd leaves them out")
    func absentFields() throws {
        let bare = Fix(time: moving.time, coordinate: moving.coordinate)
        let o = try object(GPSDReport.tpv(bare, device: "d"))
        #expect(Set(o.keys) == ["class", "device", "mode", "time", "lat", "lon"])
        #expect(o["mode"] as? Int == 2)
    }

    @Test("An approximate TPV is mode 2 with position and radius only")
    func approximateTPV() throws {
        let o = try object(GPSDReport.tpv(moving, device: "d", detail: .approximate))
        #expect(Set(o.keys) == ["class", "device", "mode", "time", "lat", "lon", "eph"])
        #expect(o["mode"] as? Int == 2)
    }

    @Test("A lost fix is a mode 1 TPV, with the time when known")
    func noFix() throws {
        #expect(Set(try object(GPSDReport.noFix(at: moving.time, device: "d")).keys) == ["class", "device", "mode", "time"])
        let o = try object(GPSDReport.noFix(at: nil, device: "d"))
        #expect(o["mode"] as? Int == 1 && o["time"] == nil)
    }

    @Test("Negative values and rounding as printf writes them")
    func fixedDecimals() throws {
        var f = moving
        f.coordinate = Coordinate(latitude: -0.0000000001, longitude: -179.9999999996)
        f.altitudeMSL = -30.4
        let o = text(GPSDReport.tpv(f, device: "d"))
        #expect(o.contains("\"lat\":0.000000000,"))
        #expect(o.contains("\"lon\":-180.000000000,"))
        #expect(o.contains("\"altMSL\":-30.4000,"))
    }

    @Test("VERSION, DEVICES, DEVICE, WATCH, POLL and ERROR decode as gpsd's")
    func otherClasses() throws {
        let v = try object(GPSDReport.version(rev: "locationd 1.0"))
        #expect(v["class"] as? String == "VERSION" && v["release"] as? String == "3.22")
        #expect(v["proto_major"] as? Int == 3 && v["proto_minor"] as? Int == 14)

        let device = GPSDReport.Device(path: "gpsd:/dev/ttyACM0", activated: moving.time)
        let ds = try object(GPSDReport.devices([device]))
        let list = try #require(ds["devices"] as? [[String: Any]])
        #expect(list.count == 1 && list[0]["class"] as? String == "DEVICE" && list[0]["path"] as? String == "gpsd:/dev/ttyACM0")
        #expect(list[0]["activated"] as? String == "2024-03-05T10:00:01.987Z" && list[0]["flags"] as? Int == 1)
        let one = try object(GPSDReport.device(GPSDReport.Device(path: "p", activated: nil)))
        #expect(one["class"] as? String == "DEVICE" && one["activated"] == nil)

        let w = try object(GPSDReport.watch(GPSDWatch(enable: true, json: true)))
        #expect(w["class"] as? String == "WATCH" && w["enable"] as? Bool == true && w["json"] as? Bool == true)
        #expect(w["nmea"] as? Bool == false)

        let tpv = GPSDReport.tpv(moving, device: "d")
        let p = try object(GPSDReport.poll(at: moving.time, last: tpv))
        #expect(p["active"] as? Int == 1 && (p["tpv"] as? [[String: Any]])?.first?["lat"] as? Double == 52.520008)
        let empty = try object(GPSDReport.poll(at: moving.time, last: nil))
        #expect(empty["active"] as? Int == 0 && (empty["tpv"] as? [Any])?.isEmpty == true)

        let e = try object(GPSDReport.error("Unrecognized request '?FOO'"))
        #expect(e["class"] as? String == "ERROR" && e["message"] as? String == "Unrecognized request '?FOO'")
    }

    @Test("Every line stays within 1536 bytes and compact, whatever the strings")
    func bounded() throws {
        let long = String(repeating: "\u{7}ä\"x: y, ", count: 400)
        var f = moving
        f.coordinate = Coordinate(latitude: -89.999999999, longitude: -179.999999999)
        f.altitudeHAE = -1e300; f.altitudeMSL = 1e300; f.speed = .infinity
        for line in [GPSDReport.error(long), GPSDReport.version(release: long, rev: long), GPSDReport.tpv(f, device: long),
                     GPSDReport.devices([GPSDReport.Device(path: long, activated: f.time)]),
                     GPSDReport.poll(at: f.time, last: GPSDReport.tpv(f, device: long))] {
            #expect(line.count <= GPSDReport.maxLineBytes, "\(line.count) bytes")
            #expect(isCompact(line), "\(text(line))")
            _ = try object(line)
        }
    }

    @Test("A SKY has gpsd's fields, order, decimals and presence rules")
    func sky() throws {
        let view = GPSDSky(
            time: moving.time, dop: GPSDSky.DOP(x: 0.5, y: 0.591, horizontal: 0.6, position: 1.1),
            satellites: [
                GPSDSky.Satellite(prn: 7, elevation: 10, azimuth: 333, signalToNoise: 39, used: true, gnssid: 0, svid: 7),
                // Out of range elevation and azimuth, no signal: left out, as gpsd does.
                GPSDSky.Satellite(prn: 70, elevation: 91, azimuth: 360, used: false, gnssid: 6, svid: 6, sigid: 2, freqid: 3, health: 1),
                // No svid: no gnssid either; a freqid outside GLONASS is not written.
                GPSDSky.Satellite(prn: 131, used: false, gnssid: 1, freqid: 4),
                // PRN 0 is no satellite.
                GPSDSky.Satellite(prn: 0, used: true),
            ])
        let line = GPSDReport.sky(view, device: "/dev/ttyACM0")
        #expect(text(line) == "{\"class\":\"SKY\",\"device\":\"/dev/ttyACM0\",\"time\":\"2024-03-05T10:00:01.987Z\","
            + "\"xdop\":0.50,\"ydop\":0.59,\"hdop\":0.60,\"pdop\":1.10,\"nSat\":3,\"uSat\":1,\"satellites\":["
            + "{\"PRN\":7,\"el\":10.0,\"az\":333.0,\"ss\":39.0,\"used\":true,\"gnssid\":0,\"svid\":7},"
            + "{\"PRN\":70,\"used\":false,\"gnssid\":6,\"svid\":6,\"sigid\":2,\"freqid\":3,\"health\":1},"
            + "{\"PRN\":131,\"used\":false}]}\r\n")
        #expect(isCompact(line))
        _ = try object(line)
        // gpsd: `device` only when known, no `satellites` when there are none.
        #expect(text(GPSDReport.sky(GPSDSky(), device: "")) == "{\"class\":\"SKY\",\"nSat\":0,\"uSat\":0}\r\n")

        let p = try object(GPSDReport.poll(at: moving.time, last: GPSDReport.tpv(moving, device: "d"), sky: line))
        #expect((p["sky"] as? [[String: Any]])?.first?["nSat"] as? Int == 3)
        #expect((try object(GPSDReport.poll(at: moving.time, last: nil))["sky"] as? [Any])?.isEmpty == true)
    }
}
