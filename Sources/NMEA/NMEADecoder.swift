import LocationCore

/// One assembled NMEA epoch: every sentence that carried the same UTC time of day.
///
/// `time` is nil when the epoch's date is unknown (no RMC/ZDA seen yet and no
/// `Options.assumedDate`); `fix` is nil for a no-fix epoch and for an undated one.
public struct NMEAEpoch: Sendable, Equatable {
    public var time: Timestamp?
    public var fix: Fix?
    /// UTC time of day in nanoseconds (an epoch is keyed by it).
    public var timeOfDay: Int64
    /// A valid position whose epoch could not be dated (so `fix` is nil). Lets a caller that
    /// knows the date by other means still use GLL/GGA-only logs.
    public var undatedCoordinate: Coordinate?

    public init(time: Timestamp?, fix: Fix?, timeOfDay: Int64 = 0, undatedCoordinate: Coordinate? = nil) {
        self.time = time; self.fix = fix
        self.timeOfDay = timeOfDay; self.undatedCoordinate = undatedCoordinate
    }
}

extension NMEAEpoch {
    /// `.fix`, or `.noFix(time)`; nil for a valid position that could not be dated. Such an
    /// epoch is not "no fix": reported as one, a GGA/GLL-only log would tell its subscribers the
    /// receiver had no fix at every position (gpsd's source likewise drops a TPV with a position
    /// but no time, `GPSDTPV.engineInput`). `Options.assumedDate` dates them instead.
    public var engineInput: EngineInput? {
        if let fix { return .fix(fix) }
        if undatedCoordinate != nil { return nil }
        return .noFix(time)
    }
}

public struct NMEAStatistics: Sendable, Equatable {
    /// Sentence candidates seen (each `$` that starts one), whatever became of them.
    public var sentences = 0
    /// Dropped: `*HH` present but wrong.
    public var checksumFailures = 0
    /// Accepted without a checksum (gpsd does the same); dropped instead when
    /// `Options.requireChecksum` is set.
    public var missingChecksum = 0
    /// Dropped: truncated checksum, unparseable field, too few fields, overlong line.
    public var malformed = 0
    /// Well-formed but not used: GSV, proprietary `$P…`, other types, AIS `!…`.
    public var skipped = 0
    /// Lines that held no sentence at all (not counting blank lines and `#` comments).
    public var junkLines = 0
    /// Epochs reported to `onEpoch`.
    public var epochs = 0
    /// Epochs reported with a `Fix`.
    public var fixes = 0
    /// Epochs with a valid position but no date (reported with `fix == nil`).
    public var undatedFixes = 0

    public init() {}
}

public struct NMEADecoder: Sendable {
    /// The years a date can have: no GPS date precedes 1980, and a `Timestamp` (Int64
    /// nanoseconds since 1970) ends in 2262. A ZDA year outside is malformed.
    public static let datableYears = 1980...2261

    public struct Options: Sendable, Equatable {
        /// Date for epochs before the stream has told us one (GGA/GLL-only receivers).
        /// nil: such epochs are reported with `time == nil` and no `fix`.
        /// Only year/month/day are used; the date then advances across midnight as usual.
        public var assumedDate: CivilTime?
        /// Drop sentences without `*HH` instead of accepting them (gpsd accepts them).
        public var requireChecksum = false
        /// Repeat gpsd 3.20–3.22's GPS week rollover guess: any date before 2017-01-01 is
        /// moved forward 1024 weeks. Off by default: real old logs carry real old dates.
        public var gpsdWeekRolloverCompatibility = false
        /// Take accuracy as gpsd 3.22 reports it: from the DOPs alone (`eph` = HDOP × 19 m,
        /// `epv` = VDOP × 23 m), a GST's σ ignored. Off by default: a GST is the receiver's
        /// own estimate, better than the DOP model.
        public var gpsdAccuracy = false
        /// Decode a log as the daemon sees it through gpsd 3.20–3.22 where the decoder
        /// otherwise differs on purpose (`--as-gpsd` of `locationd --replay` and of locationctl's
        /// `replay`, `map` and `evaluate`): its week-rollover date shift and its DOP-only
        /// accuracy. Other differences remain (docs/gpsd.md).
        public var asGPSD: Bool {
            get { gpsdWeekRolloverCompatibility && gpsdAccuracy }
            set { gpsdWeekRolloverCompatibility = newValue; gpsdAccuracy = newValue }
        }
        /// Two-digit RMC years below this are 20yy, the others 19yy. 80 because no GPS
        /// receiver can report a date before 1980 (the GPS epoch).
        public var twoDigitYearPivot = 80

        /// A replay's options: the log's date for its undated positions, and whether to decode
        /// it as gpsd does (`asGPSD`). Every command that replays a log builds them here.
        public init(assumedDate: CivilTime? = nil, asGPSD: Bool = false) {
            self.assumedDate = assumedDate
            self.asGPSD = asGPSD
        }

        /// A time in the log's own dates as this decoder reports it: with
        /// `gpsdWeekRolloverCompatibility`, one before 2017-01-01 moved forward 1024 weeks.
        /// What else is timed by the log (a simulation's truth) is moved with it.
        public func reported(_ time: Timestamp) -> Timestamp {
            guard gpsdWeekRolloverCompatibility, time.nanoseconds < Self.gpsdRolloverBefore else { return time }
            return Timestamp(nanoseconds: time.nanoseconds + Self.weeks1024)
        }

        /// 2017-01-01T00:00:00Z: gpsd 3.20–3.22 takes an earlier date for a rolled-over one.
        static let gpsdRolloverBefore: Int64 = 17_167 * 86_400_000_000_000
        static let weeks1024: Int64 = 619_315_200 * 1_000_000_000
    }

    public let options: Options
    public private(set) var statistics: NMEAStatistics {
        get { asm.stats }
        set { asm.stats = newValue }
    }

    private var asm: Assembler
    /// Bytes of a line that began in an earlier `feed` call.
    private var pending: [UInt8] = []
    private var pendingOverflow = false
    /// ESC-stripped copy of a line (rare path).
    private var scratch: [UInt8] = []

    /// Longest line we keep. NMEA allows 82 bytes; real receivers exceed it, so be generous.
    static let maxLine = 1024

    public init(options: Options = .init()) {
        self.options = options
        self.asm = Assembler(options: options)
        pending.reserveCapacity(Self.maxLine)
    }

    public mutating func feed(_ bytes: [UInt8], onEpoch: (NMEAEpoch) -> Void) {
        bytes.withUnsafeBytes { feed($0, onEpoch: onEpoch) }
    }

    public mutating func feed(_ bytes: UnsafeRawBufferPointer, onEpoch: (NMEAEpoch) -> Void) {
        let n = bytes.count
        guard n > 0, let base = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return }
        var start = 0
        while true {
            let l = ByteScan.line(base, from: start, end: n)
            if l.end == n { break }
            if !pending.isEmpty || pendingOverflow {
                append(UnsafeBufferPointer(start: base + start, count: l.end - start))
                flushPending(onEpoch)
            } else if l.end > start {  // the empty line between CR and LF holds nothing
                line(UnsafeBufferPointer(start: base + start, count: l.end - start),
                     escape: l.escape, first: l.first - start, second: l.second - start, onEpoch)
            }
            start = l.end + 1
        }
        if start < n { append(UnsafeBufferPointer(start: base + start, count: n - start)) }
    }

    public mutating func finish(onEpoch: (NMEAEpoch) -> Void) {
        flushPending(onEpoch)
        asm.completeEpoch(onEpoch)
    }

    private mutating func append(_ p: UnsafeBufferPointer<UInt8>) {
        if pendingOverflow || p.isEmpty { return }
        if pending.count + p.count > Self.maxLine {
            pendingOverflow = true
            pending.removeAll(keepingCapacity: true)
            return
        }
        pending.append(contentsOf: p)
    }

    private mutating func flushPending(_ onEpoch: (NMEAEpoch) -> Void) {
        if pendingOverflow {
            asm.stats.malformed += 1
            pendingOverflow = false
        } else if !pending.isEmpty {
            pending.withUnsafeBufferPointer { line($0, onEpoch) }
        }
        pending.removeAll(keepingCapacity: true)
    }

    /// A line whose scan is still to be done (it was gathered in `pending`).
    private mutating func line(_ p: UnsafeBufferPointer<UInt8>, _ onEpoch: (NMEAEpoch) -> Void) {
        guard let base = p.baseAddress else { return }
        let l = ByteScan.line(base, from: 0, end: p.count)
        line(p, escape: l.escape, first: l.first, second: l.second, onEpoch)
    }

    /// A line without CR/LF; `first` and `second` are where its first two sentences start
    /// (`p.count` when absent), as `ByteScan.line` found them.
    private mutating func line(_ p: UnsafeBufferPointer<UInt8>, escape: Bool, first: Int, second: Int,
                               _ onEpoch: (NMEAEpoch) -> Void) {
        if p.count > Self.maxLine { asm.stats.malformed += 1; return }
        if !escape { asm.line(p, first: first, second: second, onEpoch); return }
        // A terminal's escape sequences (CSI: ESC [ params final) got interleaved with the
        // sentence by whatever captured the log; drop them and let the checksum judge.
        scratch.removeAll(keepingCapacity: true)
        var i = 0
        while i < p.count {
            if p[i] == 0x1B {
                i += 1
                if i < p.count && p[i] == UInt8(ascii: "[") {
                    i += 1
                    while i < p.count && !(0x40...0x7E).contains(p[i]) { i += 1 }
                }
                i += 1
                continue
            }
            scratch.append(p[i]); i += 1
        }
        scratch.withUnsafeBufferPointer { s in
            guard let base = s.baseAddress else { return }
            let l = ByteScan.line(base, from: 0, end: s.count)
            asm.line(s, first: l.first, second: l.second, onEpoch)
        }
    }
}
