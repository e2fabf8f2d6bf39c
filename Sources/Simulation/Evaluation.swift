import LocationCore
import NMEA

/// A visit as the engine reported it, with the fix times its events were emitted at.
public struct DetectedVisit: Hashable, Sendable {
    public var arrival: Timestamp
    public var departure: Timestamp?
    public var coordinate: Coordinate
    /// Fix time of the input that produced the arrival event.
    public var arrivalEmitted: Timestamp

    public init(arrival: Timestamp, departure: Timestamp?, coordinate: Coordinate, arrivalEmitted: Timestamp) {
        self.arrival = arrival; self.departure = departure; self.coordinate = coordinate; self.arrivalEmitted = arrivalEmitted
    }
}

/// Runs the engine (one subscriber asking for visits) over an NMEA log, decoded with
/// `decoding`, and collects visits.
public func detectVisits(nmea: [UInt8], parameters: VisitDetector.Parameters = .init(),
                         decoding: NMEADecoder.Options = .init()) -> [DetectedVisit] {
    var engine = Engine()
    var options = SubscriptionOptions(events: .visits)
    options.visitParameters = parameters
    var out: [Delivery] = []
    engine.handle(.subscribe(SubscriberID(1), options), into: &out)
    var visits: [DetectedVisit] = []
    var now = Timestamp(nanoseconds: 0)
    func take(_ input: EngineInput) {
        if case .fix(let f) = input { now = f.time }
        out.removeAll(keepingCapacity: true)
        engine.handle(input, into: &out)
        for d in out {
            guard case .visit(let v) = d.event else { continue }
            switch v.kind {
            case .arrival:
                visits.append(DetectedVisit(arrival: v.arrival, departure: nil, coordinate: v.coordinate, arrivalEmitted: now))
            case .departure:
                if let i = visits.lastIndex(where: { $0.arrival == v.arrival && $0.departure == nil }) {
                    visits[i].departure = v.departure
                    visits[i].coordinate = v.coordinate
                } else {
                    // A departure without its arrival would be a bug; score it as a visit anyway.
                    visits.append(DetectedVisit(arrival: v.arrival, departure: v.departure, coordinate: v.coordinate, arrivalEmitted: now))
                }
            }
        }
    }
    var decoder = NMEADecoder(options: decoding)
    decoder.feed(nmea) { if let input = $0.engineInput { take(input) } }
    decoder.finish { if let input = $0.engineInput { take(input) } }
    return visits
}

/// Per-stay scores of detected visits against the truth (docs/visits.md, "Evaluation").
public struct VisitScore: Sendable, CustomStringConvertible {
    public var truthCount: Int
    public var detectedCount: Int
    public var matched: Int
    public var precision: Double { detectedCount == 0 ? (truthCount == 0 ? 1 : 0) : Double(matched) / Double(detectedCount) }
    public var recall: Double { truthCount == 0 ? 1 : Double(matched) / Double(truthCount) }
    public var f1: Double { precision + recall == 0 ? 0 : 2 * precision * recall / (precision + recall) }
    /// Absolute errors of matched pairs, seconds, sorted.
    public var arrivalErrors: [Double]
    public var departureErrors: [Double]
    /// Emission time of the arrival event minus the true arrival, seconds, sorted.
    public var emissionDelays: [Double]

    /// No visits, none detected: the start of a sum.
    public static let none = VisitScore(truthCount: 0, detectedCount: 0, matched: 0, arrivalErrors: [], departureErrors: [], emissionDelays: [])

    /// Adds another log's score (its visits were matched within that log).
    public mutating func add(_ other: VisitScore) {
        truthCount += other.truthCount; detectedCount += other.detectedCount; matched += other.matched
        arrivalErrors = (arrivalErrors + other.arrivalErrors).sorted()
        departureErrors = (departureErrors + other.departureErrors).sorted()
        emissionDelays = (emissionDelays + other.emissionDelays).sorted()
    }

    public static func quantile(_ sorted: [Double], _ q: Double) -> Double? {
        guard !sorted.isEmpty else { return nil }
        // Nearest rank.
        let rank = max(1, Int((q * Double(sorted.count)).rounded(.up)))
        return sorted[min(sorted.count, rank) - 1]
    }

    public var description: String {
        func s(_ v: Double?) -> String { v.map { String(Int($0.rounded())) + " s" } ?? "–" }
        return """
            true visits \(truthCount), detected \(detectedCount), matched \(matched)
            precision \(fmt(precision))  recall \(fmt(recall))  F1 \(fmt(f1))
            arrival error    median \(s(Self.quantile(arrivalErrors, 0.5)))  p90 \(s(Self.quantile(arrivalErrors, 0.9)))  max \(s(arrivalErrors.last))
            departure error  median \(s(Self.quantile(departureErrors, 0.5)))  p90 \(s(Self.quantile(departureErrors, 0.9)))  max \(s(departureErrors.last))
            arrival emitted after true arrival  median \(s(Self.quantile(emissionDelays, 0.5)))  p90 \(s(Self.quantile(emissionDelays, 0.9)))  max \(s(emissionDelays.last))
            """
    }

    func fmt(_ v: Double) -> String {
        let n = Int((v * 1000).rounded())
        return "\(n / 1000)." + String(n % 1000).leftPadded(3, "0")
    }
}

extension TrueVisit {
    /// This visit in the times a decoder with `options` gives the log's fixes (gpsd's week
    /// rollover moves both), so that it is scored against what that decoding detects.
    public func timed(by options: NMEADecoder.Options) -> TrueVisit {
        var visit = self
        visit.arrival = options.reported(arrival)
        visit.departure = departure.map(options.reported)
        return visit
    }
}

extension String {
    func leftPadded(_ n: Int, _ c: Character = " ") -> String {
        count >= n ? self : String(repeating: c, count: n - count) + self
    }
}

/// Time-overlap matching: each detected visit is an interval [arrival, departure or `end`],
/// each true one [arrival, departure or `end`]; pairs overlapping in time are matched one to
/// one, largest overlap first. Unmatched detections are false positives, unmatched truths
/// misses.
public func scoreVisits(detected: [DetectedVisit], truth: [TrueVisit], end: Timestamp) -> VisitScore {
    var pairs: [(overlap: Double, d: Int, t: Int)] = []
    for (di, d) in detected.enumerated() {
        let dEnd = d.departure ?? end
        for (ti, t) in truth.enumerated() {
            let tEnd = t.departure ?? end
            let overlap = min(dEnd, tEnd) - max(d.arrival, t.arrival)
            if overlap > 0 { pairs.append((overlap, di, ti)) }
        }
    }
    pairs.sort { $0.overlap > $1.overlap }
    var usedD = Set<Int>(), usedT = Set<Int>()
    var score = VisitScore(truthCount: truth.count, detectedCount: detected.count, matched: 0,
                           arrivalErrors: [], departureErrors: [], emissionDelays: [])
    for p in pairs where !usedD.contains(p.d) && !usedT.contains(p.t) {
        usedD.insert(p.d); usedT.insert(p.t)
        score.matched += 1
        let d = detected[p.d], t = truth[p.t]
        score.arrivalErrors.append(abs(d.arrival - t.arrival))
        if let dd = d.departure, let td = t.departure { score.departureErrors.append(abs(dd - td)) }
        score.emissionDelays.append(d.arrivalEmitted - t.arrival)
    }
    score.arrivalErrors.sort(); score.departureErrors.sort(); score.emissionDelays.sort()
    return score
}

/// The time of the last fix in a log, decoded with `decoding` (the end of open intervals when
/// scoring).
public func lastFixTime(_ nmea: [UInt8], decoding: NMEADecoder.Options = .init()) -> Timestamp? {
    var decoder = NMEADecoder(options: decoding)
    var last: Timestamp?
    decoder.feed(nmea) { if let f = $0.fix { last = f.time } }
    decoder.finish { if let f = $0.fix { last = f.time } }
    return last
}
