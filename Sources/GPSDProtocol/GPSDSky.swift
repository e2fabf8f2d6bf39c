import LocationCore

/// gpsd's sky view (`SKY`): the satellites a receiver sees and its dilutions of precision, as
/// gpsd reports them (`gpsd_json(5)`). Not a position, so not an input of the engine: the
/// daemon's gpsd source passes it through to the gpsd-protocol clients that see fixes precisely.
public struct GPSDSky: Hashable, Sendable {
    /// One satellite (or signal). Numbers are gpsd's; an unknown one is nil.
    public struct Satellite: Hashable, Sendable {
        /// gpsd's PRN (NMEA 2.x–4.0 numbering); never 0.
        public var prn: Int
        /// Degrees above the horizon and from true north.
        public var elevation: Double?
        public var azimuth: Double?
        /// Signal to noise ratio, dB-Hz.
        public var signalToNoise: Double?
        public var used: Bool
        /// u-blox GNSS id and satellite id, both unknown when `svid` is 0 (gpsd's rule).
        public var gnssid: Int
        public var svid: Int
        /// u-blox signal id (0: none given).
        public var sigid: Int
        /// GLONASS frequency slot + 7 (0–13); nil for other systems or unknown.
        public var freqid: Int?
        /// 0 unknown, 1 healthy, 2 unhealthy.
        public var health: Int

        public init(prn: Int, elevation: Double? = nil, azimuth: Double? = nil, signalToNoise: Double? = nil, used: Bool,
                    gnssid: Int = 0, svid: Int = 0, sigid: Int = 0, freqid: Int? = nil, health: Int = 0) {
            self.prn = prn; self.elevation = elevation; self.azimuth = azimuth; self.signalToNoise = signalToNoise
            self.used = used; self.gnssid = gnssid; self.svid = svid; self.sigid = sigid; self.freqid = freqid; self.health = health
        }
    }

    /// Dilutions of precision; nil when the receiver gave none and gpsd computed none.
    public struct DOP: Hashable, Sendable {
        public var x: Double?, y: Double?, vertical: Double?, time: Double?
        public var horizontal: Double?, geometric: Double?, position: Double?
        public init(x: Double? = nil, y: Double? = nil, vertical: Double? = nil, time: Double? = nil,
                    horizontal: Double? = nil, geometric: Double? = nil, position: Double? = nil) {
            self.x = x; self.y = y; self.vertical = vertical; self.time = time
            self.horizontal = horizontal; self.geometric = geometric; self.position = position
        }
    }

    /// When the receiver reported the view, if it said.
    public var time: Timestamp?
    public var dop: DOP
    public var satellites: [Satellite]

    public init(time: Timestamp? = nil, dop: DOP = DOP(), satellites: [Satellite] = []) {
        self.time = time; self.dop = dop; self.satellites = satellites
    }
}
