@testable import LocationCore
import Simulation  // SplitMix64
import Testing

/// The visit detector's fixed-capacity buffers: a `RingBuffer` must read and change exactly as
/// an array that drops its first element would, through every wrap of its storage.
@Suite struct RingBufferTests {
    @Test(arguments: [1, 3, 64])
    func behavesAsAnArray(capacity: Int) {
        var rng = SplitMix64(seed: UInt64(capacity))
        var ring = RingBuffer<Int>(capacity: capacity)
        var model: [Int] = []
        for step in 0..<20_000 {
            switch Int.random(in: 0..<100, using: &rng) {
            case 0..<55 where model.count < capacity:
                ring.append(step); model.append(step)
            case 0..<55:  // full: the detector drops the oldest first
                ring.removeFirst(); model.removeFirst()
                ring.append(step); model.append(step)
            case 55..<85 where !model.isEmpty:
                ring.removeFirst(); model.removeFirst()
            case 85..<95 where !model.isEmpty:
                let i = Int.random(in: 0..<model.count, using: &rng)
                ring[i] = -step; model[i] = -step
            case 95..<97:
                ring.removeAll(); model.removeAll()
            default:
                break
            }
            #expect(Array(ring) == model, "step \(step)")
            #expect(ring.isFull == (model.count == capacity))
            if let i = model.indices.randomElement(using: &rng) {
                #expect(ring[i] == model[i])
                #expect(ring.lastIndex(where: { $0 <= model[i] }) == model.lastIndex(where: { $0 <= model[i] }))
                #expect(Array(ring[..<i].reversed()) == Array(model[..<i].reversed()))
            }
        }
    }

    /// Storage is allocated once: a full buffer that keeps dropping and appending stays within it.
    @Test func neverGrowsPastItsCapacity() {
        var ring = RingBuffer<Int>(capacity: 8)
        for i in 0..<1_000 {
            if ring.isFull { ring.removeFirst() }
            ring.append(i)
        }
        #expect(ring.storage.count == 8)
        #expect(Array(ring) == Array(992..<1_000))
    }
}
