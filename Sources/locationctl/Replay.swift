import ArgumentParser
import LocationCore
import LocationProtocol
import NMEA

/// `locationctl replay LOG`: the daemon's engine, in-process, over a recorded log; prints as
/// NDJSON exactly the events one subscriber with these options would have been sent.
struct Replay: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the events a subscriber would receive from an NMEA log (NDJSON), without a daemon.",
        discussion: """
            The log is decoded by the same parser and run through the same engine as the daemon's
            replay source: the output is what a subscriber connected before the log began would
            have been sent. Use - to read standard input.
            """)

    enum EventKind: String, ExpressibleByArgument, CaseIterable { case location, status, visits, significant }

    @Argument(help: "NMEA 0183 log file, or - for standard input.") var log: String
    @OptionGroup var subscription: SubscriptionFlags
    @Option(help: "Event types to print, comma-separated: location, status, visits, significant.", transform: Replay.parseKinds)
    var events: Set<EventKind> = [.location, .status]

    static func parseKinds(_ text: String) throws -> Set<EventKind> {
        var kinds = Set<EventKind>()
        for part in text.split(separator: ",") {
            guard let k = EventKind(rawValue: String(part)) else {
                throw ValidationError("--events: unknown event type '\(part)'; expected location, status, visits or significant")
            }
            kinds.insert(k)
        }
        return kinds
    }

    func run() throws {
        var engine = Engine()
        let subscriber = SubscriberID(1)
        let encoder = EventEncoder()
        var deliveries: [Delivery] = []
        var out = StandardOutput()
        let printLocations = events.contains(.location), printStatus = events.contains(.status)
        var options = subscription.options
        options.events = Replay.subscribedKinds(events)
        engine.handle(.subscribe(subscriber, options), into: &deliveries)
        func emit() {
            for d in deliveries {
                switch d.event {
                case .location: if printLocations { encoder.append(d.event, to: &out.buffer) }
                case .status: if printStatus { encoder.append(d.event, to: &out.buffer) }
                default: encoder.append(d.event, to: &out.buffer)  // only subscribed kinds are delivered
                }
            }
            deliveries.removeAll(keepingCapacity: true)
            out.flushIfFull()
        }
        emit()
        do {
            try NMEAReplay.inputs(fromFile: log) { input in
                engine.handle(input, into: &deliveries)
                emit()
            }
        } catch let failure as NMEAReplay.Failure {
            out.flush()
            throw ValidationError(failure.description)
        }
        out.flush()
    }

    /// The engine's event kinds for the printed ones (status needs no subscription kind); at
    /// least `location`, as a subscriber that names none gets.
    static func subscribedKinds(_ kinds: Set<EventKind>) -> EventKinds {
        var k: EventKinds = []
        if kinds.contains(.location) { k.insert(.location) }
        if kinds.contains(.visits) { k.insert(.visits) }
        if kinds.contains(.significant) { k.insert(.significant) }
        return k.isEmpty ? .location : k
    }
}
