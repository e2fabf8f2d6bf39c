import LocationCore
import LocationProtocol
import NIOCore

/// A subscriber whose subscription is durable (docs/protocol.md, "Durable subscriptions"): its
/// events reach it through its program's queue, not directly.
public protocol DurableSubscriber: HubSubscriber {
    /// The program's queue grew (or what it held became written): write what is new.
    func durableQueueGrew()
}

/// Durable subscriptions (docs/protocol.md, "Durable subscriptions"): every event the engine
/// delivers to one (after its filters; its `status` events excepted) is numbered in its
/// program's queue, in the fix's transaction, instead of being written to the connection; the
/// connection writes it from the queue, as it writes a backlog. One store, one numbering, one
/// acknowledgement for everything the program is sent.
extension Hub {
    /// Makes `id` (subscribed, of `program`) durable, or says why not: a program has at most one
    /// durable subscription (two would each be written the other's events).
    public func makeDurable(_ id: SubscriberID, of program: ProgramID) -> String? {
        let s = box.value
        if let why = durableRefusal(id, of: program) { return why }
        s.durablePrograms[program] = id
        s.durableSubscribers[id] = program
        return nil
    }

    /// Why `id` may not hold `program`'s durable subscription, or nil.
    public func durableRefusal(_ id: SubscriberID, of program: ProgramID) -> String? {
        guard let other = box.value.durablePrograms[program], other != id else { return nil }
        return "another connection of this program (\(program.rawValue)) holds its durable subscription; close it first, or subscribe without durable"
    }

    /// `id`'s subscription is no longer durable (ended, or resubscribed without); unless it goes
    /// on away (`keepingAway`: a hand-over), a restart does not start it again either.
    public func endDurable(_ id: SubscriberID, keepingAway: Bool = false) {
        let s = box.value
        guard let program = s.durableSubscribers[id] else { return }
        if !keepingAway { rememberAway(id, of: program, always: nil) }
        s.durableSubscribers[id] = nil
        if s.durablePrograms[program] == id { s.durablePrograms[program] = nil }
    }

    /// Moves the events the engine delivered to durable subscriptions into `durableEvents`, to
    /// be queued with the fix's other writes (`persist`); they leave `deliveries` after it.
    func divertDurable(_ s: State) -> Bool {
        guard !s.durableSubscribers.isEmpty else { return false }
        for d in s.deliveries {
            guard let program = s.durableSubscribers[d.subscriber] else { continue }
            if case .status = d.event { continue }  // a state, not an event to keep: written live
            s.durableEvents.append(ProgramEvent(program: program, event: d.event))
        }
        return !s.durableEvents.isEmpty
    }

    /// After `persist`: the diverted deliveries are dropped (they are in the queue, or held to
    /// be written with the next fix).
    func dropDiverted(_ s: State) {
        s.deliveries.removeAll { d in
            guard s.durableSubscribers[d.subscriber] != nil else { return false }
            if case .status = d.event { return false }
            return true
        }
    }

    /// Every durable subscriber writes what its program's queue holds that it has not written
    /// (a held write that succeeded now included).
    func notifyDurable(_ s: State) {
        for (id, _) in s.durableSubscribers {
            (s.subscribers[id] as? any DurableSubscriber)?.durableQueueGrew()
        }
    }
}
