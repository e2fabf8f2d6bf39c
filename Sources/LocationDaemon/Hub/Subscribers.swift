import LocationCore

/// The hub's subscribers by id: two arrays sorted by id, so a delivery's subscriber is found
/// without hashing. An input's deliveries come in the engine's order of its subscribers, the
/// same from one input to the next, so each lookup first tries the slot after the previous
/// one found, then a binary search.
///
/// Why: the dictionary lookup (SipHash of the id) was ≈ 210 instructions per subscriber and
/// fix (docs/benchmarks.md, "Fan-out").
struct Subscribers {
    private var ids: [SubscriberID] = []
    private var handles: [any HubSubscriber] = []
    /// The slot after the last one `lookUp` found.
    private var next = 0

    /// `id`'s subscriber; setting nil removes it.
    subscript(id: SubscriberID) -> (any HubSubscriber)? {
        get { slot(of: id).map { handles[$0] } }
        set {
            let at = insertionPoint(of: id)
            let present = at < ids.count && ids[at] == id
            switch (newValue, present) {
            case (let subscriber?, true): handles[at] = subscriber
            case (let subscriber?, false):
                ids.insert(id, at: at)
                handles.insert(subscriber, at: at)
            case (nil, true):
                ids.remove(at: at)
                handles.remove(at: at)
            case (nil, false): break
            }
        }
    }

    /// Removes `id`'s subscriber and returns it (nil: none).
    mutating func removeValue(forKey id: SubscriberID) -> (any HubSubscriber)? {
        guard let subscriber = self[id] else { return nil }
        self[id] = nil
        return subscriber
    }

    /// `id`'s subscriber, found from where the previous lookup ended (the hub's fan-out).
    mutating func lookUp(_ id: SubscriberID) -> (any HubSubscriber)? {
        let at = next < ids.count && ids[next] == id ? next : slot(of: id)
        guard let at else { return nil }
        next = at + 1
        return handles[at]
    }

    private func slot(of id: SubscriberID) -> Int? {
        let at = insertionPoint(of: id)
        return at < ids.count && ids[at] == id ? at : nil
    }

    /// The first slot whose id is not below `id`.
    private func insertionPoint(of id: SubscriberID) -> Int {
        var low = 0, high = ids.count
        while low < high {
            let middle = (low + high) / 2
            if ids[middle] < id { low = middle + 1 } else { high = middle }
        }
        return low
    }
}
