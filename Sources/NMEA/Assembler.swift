import LocationCore

/// gpsd 3.22's UERE constants (gpsd.h, used by `gpsd_error_model`): eph = HDOP × P_UERE and
/// epv = VDOP × V_UERE, both already at 95 % confidence. The corpus confirms them: every
/// `.chk` eph/HDOP is 19.0 (4.75 with DGPS) and epv/VDOP 23.0 (5.75 with DGPS).
enum UERE {
    static let horizontal = 19.0
    static let horizontalDGPS = 4.75
    static let vertical = 23.0
    static let verticalDGPS = 5.75
    /// 95 % radius of a circular 2-D normal in units of σ: sqrt(-2 ln 0.05).
    static let gst95Horizontal = 2.4477
    /// 95 % half-interval of a 1-D normal in units of σ.
    static let gst95Vertical = 1.96
}

/// Everything one epoch has gathered so far. Plain values, reset per epoch.
struct EpochData {
    var hasTime = false
    var tod: Int64 = 0
    var dateDays: Int?
    var valid = false
    var lat = 0.0, lon = 0.0
    var hasPosition = false
    var dgps = false
    var ggaQuality = -1
    var altMSL: Double?
    var geoidSep: Double?
    var ggaHDOP: Double?
    var gsaFixType = 0
    var gsaHDOP: Double?
    var gsaVDOP: Double?
    var speed: Double?
    var course: Double?
    var gstLat: Double?, gstLon: Double?, gstAlt: Double?
    var any = false
    /// A sentence of the epoch says whether there is a fix (RMC, GGA, GNS, GLL status or
    /// quality; GSA's type). An epoch of ZDA, GST or VTG alone says nothing of the kind.
    var stated = false
    /// `dateDays` is a status-A (or D) RMC's: a ZDA does not override it.
    var fixDated = false
}

/// The sentence types we read (docs/nmea.md); every other one is skipped.
enum SentenceKind { case rmc, gga, gns, gll, gsa, gst, vtg, zda }

struct Assembler: Sendable {
    let options: NMEADecoder.Options
    var stats = NMEAStatistics()
    var cur = EpochData()
    /// Date (days since 1970) of the last dated epoch and that epoch's time of day, for
    /// carrying the date forward and across midnight.
    var lastDays: Int?
    var lastTod: Int64 = 0
    /// False until an epoch was dated (an assumed date has no time of day to compare with).
    var lastTodKnown = false
    /// The time of day of the last epoch completed, whatever it was (`completeEpoch`).
    var previousTod: Int64?
    /// Whether a sentence of the log has dated an epoch (not only `Options.assumedDate`).
    var logDated = false
    /// Dimension of the last fix, for epochs that say nothing about it (RMC/GLL only).
    var lastMode: FixMode?
    /// The date of the last ZDA if it went back (not taken), for the next ZDA to confirm.
    var zdaBack: (days: Int, tod: Int64)?

    init(options: NMEADecoder.Options) {
        self.options = options
        if let d = options.assumedDate {
            lastDays = CivilTime.daysFromCivil(year: d.year, month: d.month, day: d.day)
        }
    }

    // MARK: Lines and framing

    /// A line without CR/LF whose first two sentences start at `first` and `second` (the
    /// line's length when absent; `ByteScan.line` finds them).
    mutating func line(_ p: UnsafeBufferPointer<UInt8>, first: Int, second: Int, _ onEpoch: (NMEAEpoch) -> Void) {
        guard let base = p.baseAddress else { return }
        let n = p.count
        var i = 0
        while i < n && (base[i] == 0x20 || base[i] == 0x09 || base[i] == 0) { i += 1 }
        if i == n { return }
        if base[i] == UInt8(ascii: "#") { return }
        // Several sentences can be glued on one line when a receiver drops a CR/LF, and junk can
        // precede one; every '$' or '!' starts a candidate that runs to the next one.
        if first == n { stats.junkLines += 1; return }
        var s = first, next = second
        while s < n {
            sentence(base, s, next, onEpoch)
            s = next
            if s < n { next = ByteScan.sentenceStart(base, from: s + 1, end: n) }
        }
    }

    mutating func sentence(_ b: UnsafePointer<UInt8>, _ start: Int, _ endIn: Int, _ onEpoch: (NMEAEpoch) -> Void) {
        stats.sentences += 1
        var end = endIn
        while end > start && (b[end - 1] <= 0x20) { end -= 1 }
        let (x, i) = ByteScan.checksum(b, from: start + 1, end: end, floor: 0)
        let bodyEnd = i
        if i < end {
            guard i + 2 < end,
                  let h = hex(b[i + 1]), let l = hex(b[i + 2]) else { stats.malformed += 1; return }
            if h << 4 | l != x { stats.checksumFailures += 1; return }
        } else {
            stats.missingChecksum += 1
            if options.requireChecksum { stats.malformed += 1; return }
        }
        if b[start] == UInt8(ascii: "!") { stats.skipped += 1; return }
        // Address: talker (2) + type (3). The talker is ignored: GP/GN/GL/GA/GB/BD/QZ/IN/II…
        // all mean the same to us. '$P…' is proprietary.
        var a = start + 1
        while a < bodyEnd && b[a] != UInt8(ascii: ",") { a += 1 }
        guard a - (start + 1) == 5, b[start + 1] != UInt8(ascii: "P") else { stats.skipped += 1; return }
        let t = UInt32(b[start + 3]) << 16 | UInt32(b[start + 4]) << 8 | UInt32(b[start + 5])
        let kind: SentenceKind
        switch t {
        case tag("RMC"): kind = .rmc
        case tag("GGA"): kind = .gga
        case tag("GNS"): kind = .gns
        case tag("GLL"): kind = .gll
        case tag("GSA"): kind = .gsa
        case tag("GST"): kind = .gst
        case tag("VTG"): kind = .vtg
        case tag("ZDA"): kind = .zda
        default: stats.skipped += 1; return
        }
        let unchecked = bodyEnd == end
        let ok = withUnsafeTemporaryAllocation(of: UInt64.self, capacity: FieldCursor.maskWords(bodyEnd - a - 1) + 1) { scratch in
            var f = FieldCursor(base: b, start: a + 1, end: bodyEnd, floor: 0, scratch: scratch.baseAddress!)
            if a >= bodyEnd { f.pos = bodyEnd + 1 }
            switch kind {
            case .rmc: return rmc(&f, unchecked, onEpoch)
            case .gga: return gga(&f, unchecked, onEpoch)
            case .gns: return gns(&f, unchecked, onEpoch)
            case .gll: return gll(&f, unchecked, onEpoch)
            case .gsa: return gsa(&f, unchecked, onEpoch)
            case .gst: return gst(&f, unchecked, onEpoch)
            case .vtg: return vtg(&f, unchecked, onEpoch)
            case .zda: return zda(&f, unchecked, onEpoch)
            }
        }
        if !ok { stats.malformed += 1 }
    }

    // MARK: Sentences
    // Each parser reads every field it needs first and commits to the epoch only when the
    // whole sentence parsed, so a garbled sentence changes nothing.
    // Without a checksum a truncated line is indistinguishable from a short one, so such
    // sentences must have the full field count of their type.

    mutating func rmc(_ f: inout FieldCursor, _ unchecked: Bool, _ onEpoch: (NMEAEpoch) -> Void) -> Bool {
        if unchecked && f.remainingFields < 11 { return false }
        let tod = f.timeOfDay(f.next())
        let status = f.char(f.next())
        let latR = f.next(), ns = f.next(), lonR = f.next(), ew = f.next()
        let lat = f.angle(latR, ns, negative: UInt8(ascii: "S"), positive: UInt8(ascii: "N"), limit: 90)
        let lon = f.angle(lonR, ew, negative: UInt8(ascii: "W"), positive: UInt8(ascii: "E"), limit: 180)
        let knots = f.double(f.next())
        let course = f.double(f.next())
        let dateR = f.next()
        var days: Int?
        if dateR.count == 6, let v = f.int(dateR) {
            let d = v / 10000, m = v / 100 % 100, yy = v % 100
            let y = yy < options.twoDigitYearPivot ? 2000 + yy : 1900 + yy
            days = validDays(y, m, d)
            if days == nil { f.bad = true }
        } else if !dateR.isEmpty { f.bad = true }
        f.skip(2)  // magnetic variation
        let modeInd = f.char(f.next())
        if f.bad { return false }
        guard begin(tod, onEpoch) else { return true }
        cur.stated = true
        // A status-V RMC's date does not take the log's date back: receivers write garbage there
        // after a reset (gp-320fw's cold boot: 2006-12-16 in a 2019 log), which stamped the
        // noFix status with it and moved the replay's pacing and the publication epochs. gpsd
        // takes no date from a V RMC at all; but one that goes on from the log's date (the same
        // day, or later: a log appended to after days) is most often right (a receiver keeping
        // time indoors), and a dated no-fix epoch is worth having. Nor does it override a date
        // this epoch already has (a ZDA's).
        if let days {
            let valid = status == UInt8(ascii: "A") || status == UInt8(ascii: "D")
            if valid {
                cur.dateDays = days
                cur.fixDated = true
            } else if cur.dateDays == nil, !logDated || days >= (cur.hasTime ? carriedDays(at: cur.tod) : lastDays) ?? days {
                cur.dateDays = days
            }
        }
        // The NMEA 2.3 mode indicator overrides a status 'A' (`isMeasured`).
        if status == UInt8(ascii: "A") && Self.isMeasured(modeInd), let lat, let lon {
            setPosition(lat, lon)
            if let knots { cur.speed = knots * (1852.0 / 3600.0) }
            if let course { cur.course = normalizedCourse(course) }
            if modeInd == UInt8(ascii: "D") { cur.dgps = true }
        }
        return true
    }

    /// Whether an NMEA 2.3+ mode indicator (RMC, GLL, GNS; nil when the sentence predates it)
    /// stands for a measured position: not N (not valid), E (estimated: dead reckoning),
    /// M (manual input) or S (simulator), the same rule as GGA's quality 6–8.
    static func isMeasured(_ mode: UInt8?) -> Bool {
        switch mode {
        case UInt8(ascii: "N")?, UInt8(ascii: "E")?, UInt8(ascii: "M")?, UInt8(ascii: "S")?: false
        default: true
        }
    }

    mutating func gga(_ f: inout FieldCursor, _ unchecked: Bool, _ onEpoch: (NMEAEpoch) -> Void) -> Bool {
        if unchecked && f.remainingFields < 14 { return false }
        let tod = f.timeOfDay(f.next())
        let latR = f.next(), ns = f.next(), lonR = f.next(), ew = f.next()
        let lat = f.angle(latR, ns, negative: UInt8(ascii: "S"), positive: UInt8(ascii: "N"), limit: 90)
        let lon = f.angle(lonR, ew, negative: UInt8(ascii: "W"), positive: UInt8(ascii: "E"), limit: 180)
        let quality = f.int(f.next()) ?? 0
        f.skip(1)  // satellites used
        let hdop = f.double(f.next())
        let alt = f.double(f.next())
        f.skip(1)
        let sep = f.double(f.next())
        if f.bad { return false }
        guard begin(tod, onEpoch) else { return true }
        cur.stated = true
        // Quality 1–5 are measured solutions (GPS, DGPS, PPS, RTK fixed, RTK float), and so is
        // 9, NovAtel's WAAS/SBAS solution (their receivers' default with SBAS on; gpsd takes it
        // as a fix); 6 is dead reckoning ("estimated"), 7 manual input, 8 simulator: none is a
        // position fix.
        if (1...5).contains(quality) || quality == 9, let lat, let lon {
            setPosition(lat, lon)
            cur.ggaQuality = quality
            if quality == 2 { cur.dgps = true }
            if let alt { cur.altMSL = alt }
            if let sep { cur.geoidSep = sep }
            if let hdop, hdop > 0 { cur.ggaHDOP = hdop }
        }
        return true
    }

    mutating func gns(_ f: inout FieldCursor, _ unchecked: Bool, _ onEpoch: (NMEAEpoch) -> Void) -> Bool {
        if unchecked && f.remainingFields < 12 { return false }
        let tod = f.timeOfDay(f.next())
        let latR = f.next(), ns = f.next(), lonR = f.next(), ew = f.next()
        let lat = f.angle(latR, ns, negative: UInt8(ascii: "S"), positive: UInt8(ascii: "N"), limit: 90)
        let lon = f.angle(lonR, ew, negative: UInt8(ascii: "W"), positive: UInt8(ascii: "E"), limit: 180)
        // One mode character per constellation; valid when any of them is a measurement.
        let modeR = f.next()
        var valid = false, dgps = false
        for i in modeR {
            let c = f.base[i]
            if Self.isMeasured(c) { valid = true }
            if c == UInt8(ascii: "D") { dgps = true }
        }
        f.skip(1)
        let hdop = f.double(f.next())
        let alt = f.double(f.next())
        let sep = f.double(f.next())
        if f.bad { return false }
        guard begin(tod, onEpoch) else { return true }
        cur.stated = true
        if valid, let lat, let lon {
            setPosition(lat, lon)
            cur.ggaQuality = max(cur.ggaQuality, 1)
            if dgps { cur.dgps = true }
            if let alt { cur.altMSL = alt }
            if let sep { cur.geoidSep = sep }
            if let hdop, hdop > 0 { cur.ggaHDOP = hdop }
        }
        return true
    }

    mutating func gll(_ f: inout FieldCursor, _ unchecked: Bool, _ onEpoch: (NMEAEpoch) -> Void) -> Bool {
        if unchecked && f.remainingFields < 6 { return false }
        let latR = f.next(), ns = f.next(), lonR = f.next(), ew = f.next()
        let lat = f.angle(latR, ns, negative: UInt8(ascii: "S"), positive: UInt8(ascii: "N"), limit: 90)
        let lon = f.angle(lonR, ew, negative: UInt8(ascii: "W"), positive: UInt8(ascii: "E"), limit: 180)
        let tod = f.timeOfDay(f.next())
        let status = f.char(f.next())
        let modeInd = f.char(f.next())
        if f.bad { return false }
        guard begin(tod, onEpoch) else { return true }
        cur.stated = true
        if status == UInt8(ascii: "A") && Self.isMeasured(modeInd), let lat, let lon {
            setPosition(lat, lon)
        }
        return true
    }

    mutating func gsa(_ f: inout FieldCursor, _ unchecked: Bool, _ onEpoch: (NMEAEpoch) -> Void) -> Bool {
        if unchecked && f.remainingFields < 17 { return false }
        f.skip(1)
        let type = f.int(f.next()) ?? 0
        f.skip(12)
        f.skip(1)  // PDOP
        let hdop = f.double(f.next())
        let vdop = f.double(f.next())
        if f.bad { return false }
        // GSA carries no time: it belongs to the epoch in progress.
        cur.any = true
        cur.stated = true
        // Multi-constellation receivers send one GSA per system; the best dimension wins.
        if type > cur.gsaFixType { cur.gsaFixType = type }
        if type >= 2 {
            if let hdop, hdop > 0 { cur.gsaHDOP = hdop }
            if let vdop, vdop > 0 { cur.gsaVDOP = vdop }
        }
        return true
    }

    mutating func gst(_ f: inout FieldCursor, _ unchecked: Bool, _ onEpoch: (NMEAEpoch) -> Void) -> Bool {
        if unchecked && f.remainingFields < 8 { return false }
        let tod = f.timeOfDay(f.next())
        f.skip(4)  // rms, ellipse semi-major, semi-minor, orientation
        let sLat = f.double(f.next())
        let sLon = f.double(f.next())
        let sAlt = f.double(f.next())
        if f.bad { return false }
        guard begin(tod, onEpoch) else { return true }
        // A σ of 0 is no measurement (receivers that do not compute a field write 0 there):
        // taken, it would make an accuracy of 0 m that passes every accuracy gate. Such a field is
        // absent, and the DOPs give the accuracy, as they do when GST is missing.
        if let sLat, let sLon, sLat > 0, sLon > 0 { cur.gstLat = sLat; cur.gstLon = sLon }
        if let sAlt, sAlt > 0 { cur.gstAlt = sAlt }
        return true
    }

    mutating func vtg(_ f: inout FieldCursor, _ unchecked: Bool, _ onEpoch: (NMEAEpoch) -> Void) -> Bool {
        if unchecked && f.remainingFields < 4 { return false }
        let c1 = f.next(), u1 = f.next()
        var course: Double?, knots: Double?, mode: UInt8?
        if f.char(u1) == UInt8(ascii: "T") {
            // NMEA 2.x: course,T,magnetic,M,knots,N,km/h,K[,mode]
            course = f.double(c1)
            f.skip(2)
            knots = f.double(f.next())
            f.skip(3)
            mode = f.char(f.next())
        } else {
            // NMEA 1.x: course true, course magnetic, knots, km/h (no unit letters)
            course = f.double(c1)
            knots = f.double(f.next())
        }
        if f.bad { return false }
        cur.any = true
        if !Self.isMeasured(mode) { return true }
        if let course { cur.course = normalizedCourse(course) }
        if let knots { cur.speed = knots * (1852.0 / 3600.0) }
        return true
    }

    mutating func zda(_ f: inout FieldCursor, _ unchecked: Bool, _ onEpoch: (NMEAEpoch) -> Void) -> Bool {
        if unchecked && f.remainingFields < 4 { return false }
        let tod = f.timeOfDay(f.next())
        let d = f.int(f.next()), m = f.int(f.next()), y = f.int(f.next())
        if f.bad { return false }
        guard let tod else { return true }
        var days: Int?
        if let d, let m, let y {
            guard NMEADecoder.datableYears.contains(y), let v = validDays(y, m, d) else { return false }
            days = v
        }
        guard begin(tod, onEpoch) else { return true }
        guard let days, !cur.fixDated else { return true }
        // A ZDA has no status, and some say a stale or garbage date: the old day for a second
        // after midnight, which dated that second's fix a day back (a clock jump of a day), or
        // a reset's rollover date. One that takes the log's date back is taken only when a ZDA
        // at least 1 s later goes back to it too (a log spliced from an older one; at 10 Hz the
        // stale second's own ZDAs confirmed it); nor does one override a status-A RMC's date in
        // its epoch (docs/nmea.md, "Dates and time").
        if logDated, let carried = carriedDays(at: tod), days < carried {
            guard let back = zdaBack, days == back.days || days == back.days + 1 else {
                zdaBack = (days, tod)
                return true
            }
            guard Self.forward(from: back.tod, to: tod) >= 1_000_000_000 else { return true }
        } else {
            zdaBack = nil
        }
        cur.dateDays = days
        return true
    }

    // MARK: Epochs

    /// Times of day less than this apart belong to one epoch: some receivers print the same
    /// instant with different precision in different sentences (eXplorist210 and magellan315:
    /// GLL `200620.303`, GGA/RMC `200620.30`). gpsd 3.22 uses 10 ms too (`nmea_parse`: a cycle starts
    /// when the time moves by more than 0.01 s); sl869's real epochs 10 ms apart (…43.990,
    /// …44.000) stay apart in both.
    static let sameEpochTolerance: Int64 = 10_000_000

    /// Route a sentence with time of day `tod` (nil: untimed) to its epoch, completing the
    /// one in progress when the time differs by `sameEpochTolerance` or more.
    /// Returns false if the sentence must be ignored.
    @inline(__always)
    mutating func begin(_ tod: Int64?, _ onEpoch: (NMEAEpoch) -> Void) -> Bool {
        if let tod {
            if cur.hasTime {
                let d = tod - cur.tod
                if d >= Self.sameEpochTolerance || d <= -Self.sameEpochTolerance {
                    completeEpoch(onEpoch)
                }
                // Within the tolerance the epoch takes the later sentence's time, as gpsd does.
                cur.hasTime = true; cur.tod = tod
            } else {
                // Untimed sentences seen before the first timed one join its epoch.
                cur.hasTime = true; cur.tod = tod
            }
        }
        cur.any = true
        return true
    }

    /// Sentences of one epoch usually agree to their printed precision; when they do not
    /// (bundg_zeus_9's RMC and GGA come from different devices on a boat's bus) the last one
    /// wins, which matches gpsd 3.22 on more epochs than ranking RMC first.
    @inline(__always)
    mutating func setPosition(_ lat: Double, _ lon: Double) {
        cur.lat = lat; cur.lon = lon; cur.hasPosition = true; cur.valid = true
    }

    /// The date an epoch at `tod` without a date of its own gets: the last one, carried across
    /// midnight when the time of day jumps back by more than half a day (a small step back is a
    /// receiver glitch), back a day when it jumps forward by more.
    func carriedDays(at tod: Int64) -> Int? {
        guard var d = lastDays else { return nil }
        let half = Self.day / 2
        if lastTodKnown {
            if tod < lastTod - half { d += 1 } else if tod > lastTod + half { d -= 1 }
        }
        return d
    }

    /// A day in nanoseconds: times of day run from 0 to this.
    static let day: Int64 = 86_400 * 1_000_000_000

    /// How far `tod` is after `earlier`, going forward through midnight (0 ..< a day).
    static func forward(from earlier: Int64, to tod: Int64) -> Int64 { ((tod - earlier) % day + day) % day }

    mutating func completeEpoch(_ onEpoch: (NMEAEpoch) -> Void) {
        defer { cur = EpochData() }
        guard cur.hasTime else { return }
        let tod = cur.tod
        let days = cur.dateDays ?? carriedDays(at: tod)
        // An epoch without a fix or a date of its own carries its date on only when its time
        // goes on from the epoch before (later by less than an hour, across midnight too): after
        // a reset, status-V RMCs tell a garbage time (gp-320fw: 00:03:46, 23:59:48, 19:35:15, …),
        // and each jump of less than 12 h would move the carried date on, until it dated a fix a
        // day off. Dated from the last epoch that was, each is within 12 h of it.
        let goesOn = previousTod.map { (1..<Self.day / 24).contains(Self.forward(from: $0, to: tod)) } ?? false
        previousTod = tod
        if let days, cur.dateDays != nil || (cur.valid && cur.hasPosition) || goesOn || !lastTodKnown {
            lastDays = days; lastTod = tod; lastTodKnown = true
        }
        if cur.dateDays != nil { logDated = true }
        // Only its date counts: some receivers time ZDA apart from their fixes (ac12's runs
        // 2 s ahead), and it is no report of a lost fix.
        guard cur.stated else { return }

        var time: Timestamp?
        if let days { time = options.reported(Timestamp(nanoseconds: Int64(days) * 86_400_000_000_000 + tod)) }
        var epoch = NMEAEpoch(time: time, fix: nil, timeOfDay: tod)
        if cur.valid && cur.hasPosition {
            let coord = Coordinate(latitude: cur.lat, longitude: cur.lon)
            if let time {
                epoch.fix = makeFix(time, coord)
                stats.fixes += 1
            } else {
                epoch.undatedCoordinate = coord
                stats.undatedFixes += 1
            }
        }
        if epoch.fix == nil && epoch.undatedCoordinate == nil { lastMode = nil }
        stats.epochs += 1
        onEpoch(epoch)
    }

    mutating func makeFix(_ time: Timestamp, _ coord: Coordinate) -> Fix {
        let c = cur
        // GSA's fix type when the epoch had one; otherwise a GGA/GNS altitude implies the
        // receiver solved for height (3D), and RMC/GLL alone give 2D — gpsd's rule too.
        // An epoch without GSA or GGA/GNS (RMC/GLL only, or a GSA sent before the epoch's
        // first timed sentence) keeps the previous fix's dimension, as gpsd does.
        let mode: FixMode
        if c.gsaFixType == 3 { mode = .threeD }
        else if c.gsaFixType == 2 { mode = .twoD }
        else if c.ggaQuality > 0 { mode = c.altMSL != nil ? .threeD : .twoD }
        else { mode = lastMode ?? .twoD }

        var fix = Fix(time: time, coordinate: coord, mode: mode)
        if mode == .threeD {
            fix.altitudeMSL = c.altMSL
            if let a = c.altMSL, let s = c.geoidSep { fix.altitudeHAE = a + s }
        }
        fix.speed = c.speed
        fix.course = c.course
        // gpsd's error model ignores GST (`Options.gpsdAccuracy`).
        let gst = !options.gpsdAccuracy
        if gst, let sLat = c.gstLat, let sLon = c.gstLon {
            fix.horizontalAccuracy = UERE.gst95Horizontal * max(sLat, sLon)
        } else if let hdop = c.gsaHDOP ?? c.ggaHDOP {
            fix.horizontalAccuracy = hdop * (c.dgps ? UERE.horizontalDGPS : UERE.horizontal)
        }
        if mode == .threeD {
            if gst, let sAlt = c.gstAlt {
                fix.verticalAccuracy = UERE.gst95Vertical * sAlt
            } else if let vdop = c.gsaVDOP {
                fix.verticalAccuracy = vdop * (c.dgps ? UERE.verticalDGPS : UERE.vertical)
            }
        }
        lastMode = mode
        return fix
    }
}

@inline(__always) private func hex(_ c: UInt8) -> UInt8? {
    switch c {
    case 48...57: return c - 48
    case 65...70: return c - 55
    case 97...102: return c - 87
    default: return nil
    }
}

@inline(__always) private func tag(_ s: StaticString) -> UInt32 {
    let p = s.utf8Start
    return UInt32(p[0]) << 16 | UInt32(p[1]) << 8 | UInt32(p[2])
}

@inline(__always) private func normalizedCourse(_ c: Double) -> Double {
    let r = c.truncatingRemainder(dividingBy: 360)
    return r < 0 ? r + 360 : r
}

/// Days since 1970-01-01 of a valid civil date, nil for one that does not exist.
func validDays(_ y: Int, _ m: Int, _ d: Int) -> Int? {
    guard (1...12).contains(m), d >= 1 else { return nil }
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
    let dim = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][m - 1]
    guard d <= dim else { return nil }
    return CivilTime.daysFromCivil(year: y, month: m, day: d)
}
