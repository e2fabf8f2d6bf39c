import LocationCore
import NMEA

/// How the location stream treats a scenario's fixes (docs/semantics.md, "Outliers"): the share
/// of outlier fixes and of good fixes delivered to a subscriber with default options, and how
/// long after its own time the first fix after each real jump (out of a lost-signal leg) was
/// delivered.
public struct LocationScore: Sendable, CustomStringConvertible {
    public var goodFixes = 0
    public var goodDelivered = 0
    public var outlierFixes = 0
    public var outlierDelivered = 0
    /// Per real jump: the fix time of the input that delivered its first fix minus that fix's
    /// time, seconds; nil when it was never delivered. In the scenario's order.
    public var jumpDelays: [Double?] = []

    public var goodShare: Double { goodFixes == 0 ? 1 : Double(goodDelivered) / Double(goodFixes) }
    public var outlierShare: Double { outlierFixes == 0 ? 0 : Double(outlierDelivered) / Double(outlierFixes) }
    /// The longest delay of a jump's first fix; infinity when one was never delivered.
    public var longestJumpDelay: Double? {
        jumpDelays.isEmpty ? nil : jumpDelays.map { $0 ?? .infinity }.max()
    }

    public var description: String {
        func percent(_ v: Double) -> String {
            let n = Int((v * 1000).rounded())
            return "\(n / 10).\(n % 10) %"
        }
        let jumps = jumpDelays.isEmpty ? "none" : jumpDelays.map { $0.map { DecimalText.seconds($0) } ?? "never" }.joined(separator: ", ")
        return """
            good fixes delivered     \(goodDelivered) of \(goodFixes) (\(percent(goodShare)))
            outlier fixes delivered  \(outlierDelivered) of \(outlierFixes) (\(percent(outlierShare)))
            first fix after a jump delivered after  \(jumps)
            """
    }
}

enum DecimalText {
    static func seconds(_ v: Double) -> String {
        v == v.rounded() ? "\(Int(v)) s" : "\(Double(Int((v * 10).rounded())) / 10) s"
    }
}

/// Runs the engine (one subscriber, default options: every fix the core passes on is delivered)
/// over a simulated log, decoded with `decoding`, and scores its locations against what the
/// simulator wrote (`Simulator.Output.outliers`, `jumps`, in the times that decoding reports).
public func scoreLocations(_ output: Simulator.Output, decoding: NMEADecoder.Options = .init()) -> LocationScore {
    var engine = Engine()
    var out: [Delivery] = []
    engine.handle(.subscribe(SubscriberID(1), SubscriptionOptions()), into: &out)
    let outliers = Set(output.outliers.map(decoding.reported))
    var delivered = Set<Timestamp>()
    var emittedAt: [Timestamp: Timestamp] = [:]
    var fixes = Set<Timestamp>()
    func take(_ input: EngineInput) {
        out.removeAll(keepingCapacity: true)
        engine.handle(input, into: &out)
        guard case .fix(let f) = input else { return }
        fixes.insert(f.time)
        for d in out {
            guard case .location(let l) = d.event else { continue }
            delivered.insert(l.time)
            emittedAt[l.time] = f.time
        }
    }
    var decoder = NMEADecoder(options: decoding)
    decoder.feed(output.nmea) { if let input = $0.engineInput { take(input) } }
    decoder.finish { if let input = $0.engineInput { take(input) } }
    var score = LocationScore()
    for t in fixes {
        if outliers.contains(t) {
            score.outlierFixes += 1
            if delivered.contains(t) { score.outlierDelivered += 1 }
        } else {
            score.goodFixes += 1
            if delivered.contains(t) { score.goodDelivered += 1 }
        }
    }
    score.jumpDelays = output.jumps.map(decoding.reported).map { j in emittedAt[j].map { $0 - j } }
    return score
}
