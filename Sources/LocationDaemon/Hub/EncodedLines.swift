import Glibc
import LocationCore
import LocationProtocol
import NIOCore

/// The protocol lines of one input's distinct events: each event is encoded once and its line is
/// shared by every subscriber receiving it.
///
/// The buffers outlive the input on purpose. A line written straight to the sockets
/// (`SocketWriter`) is not kept, and NIO lets go of one once it has written it: the buffer is
/// uniquely referenced again, and the next input clears and refills it in place — so a fix delivered to subscribers that keep up costs no allocation (the per-fix path
/// is hot; docs/benchmarks.md, "Allocations"). A line still queued for a slow reader stays with
/// that reader, and `ByteBuffer.clear` gives this slot fresh storage. Each line carries where its
/// bytes are (`EncodedLine`), taken once when it is encoded.
///
/// Used on the hub's loop only.
struct EncodedLines {
    private var events: [Event] = []
    private var lines: [EncodedLine] = []
    /// Slots in use for the current input; the rest keep their storage for later inputs.
    private var used = 0
    /// The slot last found or filled: the next delivery nearly always has its event.
    private var last = 0
    private var scratch: [UInt8] = []
    private let encoder: EventEncoder

    init(encoder: EventEncoder = EventEncoder()) { self.encoder = encoder }

    /// Forgets the previous input's events (their buffers are kept for reuse).
    mutating func startInput() { used = 0 }

    /// `event`'s line, encoded on first use within the current input.
    mutating func line(for event: Event) -> EncodedLine {
        withUnsafePointer(to: event) { line(at: $0) }
    }

    /// The same for the event at `event` (a delivery's, read in place: a copy of each would cost
    /// more than finding its line; docs/benchmarks.md, "Fan-out"). Nearly every delivery has the
    /// event of the one before: that slot's bytes are compared in the caller's loop (inlined),
    /// any other slot's in `searchedLine`.
    @inline(__always)
    mutating func line(at event: UnsafePointer<Event>) -> EncodedLine {
        if last < used, events.withUnsafeBufferPointer({ sameBytes($0.baseAddress! + last, event) }) { return lines[last] }
        return searchedLine(at: event)
    }

    private mutating func searchedLine(at event: UnsafePointer<Event>) -> EncodedLine {
        if let slot = slotHolding(bytesOf: event) ?? slotEqual(to: event.pointee) {
            last = slot
            return lines[slot]
        }
        scratch.removeAll(keepingCapacity: true)
        encoder.append(event.pointee, to: &scratch)
        if used == lines.count {
            events.append(event.pointee)
            lines.append(EncodedLine(ByteBuffer()))
        } else {
            events[used] = event.pointee
        }
        lines[used].refill(with: scratch)
        last = used
        used += 1
        return lines[last]
    }

    /// The slot of this input whose event has `event`'s very bytes: nearly every subscriber gets
    /// the same event, a copy of one value, found so with a `memcmp` instead of `==` (field by
    /// field, ≈ 450 instructions per subscriber and fix).
    /// The same bytes are the same event, so the same line; an equal event with other bytes
    /// (padding) is found by `slotEqual`.
    private func slotHolding(bytesOf event: UnsafePointer<Event>) -> Int? {
        events.withUnsafeBufferPointer { held in (0..<used).first { sameBytes(held.baseAddress! + $0, event) } }
    }

    private func sameBytes(_ a: UnsafePointer<Event>, _ b: UnsafePointer<Event>) -> Bool {
        memcmp(a, b, MemoryLayout<Event>.size) == 0
    }

    private func slotEqual(to event: Event) -> Int? {
        (0..<used).first { events[$0] == event }
    }
}
