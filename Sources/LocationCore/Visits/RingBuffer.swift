/// A first-in first-out buffer of at most `capacity` elements in storage allocated once:
/// `append` and `removeFirst` are O(1) and never allocate once it has filled. Indices run
/// `0..<count`, oldest first, like an array's.
///
/// Why not an array: the visit detector drops the oldest of 64 recent fixes every few seconds
/// in each of its subscriptions, and `Array.removeFirst` moves the other 63 (a tenth of the
/// pipeline's instructions with 100 subscriptions).
struct RingBuffer<Element>: RandomAccessCollection, MutableCollection {
    /// The elements, `storage[head]` the oldest, wrapping round at `capacity`; it grows to
    /// `capacity` and then is only overwritten.
    private(set) var storage: [Element] = []
    private(set) var head = 0
    private(set) var count = 0
    let capacity: Int

    init(capacity: Int) {
        precondition(capacity > 0, "RingBuffer: capacity must be positive")
        self.capacity = capacity
        storage.reserveCapacity(capacity)
    }

    var startIndex: Int { 0 }
    var endIndex: Int { count }
    var isFull: Bool { count == capacity }

    /// The storage position of the element at `i`.
    func position(_ i: Int) -> Int {
        let p = head + i
        return p >= capacity ? p - capacity : p
    }

    subscript(i: Int) -> Element {
        get {
            precondition(i >= 0 && i < count, "RingBuffer: index out of range")
            return storage[position(i)]
        }
        set {
            precondition(i >= 0 && i < count, "RingBuffer: index out of range")
            storage[position(i)] = newValue
        }
    }

    /// Appends `element`; the buffer must not be full.
    mutating func append(_ element: Element) {
        precondition(count < capacity, "RingBuffer: full")
        let p = position(count)
        if p == storage.count { storage.append(element) } else { storage[p] = element }
        count += 1
    }

    mutating func removeFirst() {
        precondition(count > 0, "RingBuffer: empty")
        head = position(1)
        count -= 1
    }

    /// Empties the buffer, keeping its storage.
    mutating func removeAll() {
        head = 0
        count = 0
    }
}

extension RingBuffer: Sendable where Element: Sendable {}
