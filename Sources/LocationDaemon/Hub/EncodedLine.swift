import NIOCore

/// A protocol line and where its bytes are, taken once. The hub hands one line to every
/// subscriber of an event, and each look at a `ByteBuffer`'s bytes makes a run-time exclusivity
/// check (≈ 115 instructions per subscriber and fix; docs/benchmarks.md, "Fan-out").
///
/// `bytes` stays valid as long as the value lives: it holds the buffer, whose storage moves
/// only when it is written to, and a `ByteBuffer` whose storage is shared copies it first.
public struct EncodedLine {
    public private(set) var buffer: ByteBuffer
    /// The first readable byte (its count is the buffer's, read without touching the storage).
    private var base: UnsafeRawPointer?

    public init(_ buffer: ByteBuffer) {
        self.buffer = buffer
        base = buffer.withUnsafeReadableBytes { $0.baseAddress }
    }

    var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: buffer.readableBytes) }

    /// Replaces the line with `line`, in the same storage when nothing else holds it.
    mutating func refill(with line: [UInt8]) {
        buffer.clear(minimumCapacity: line.count)
        buffer.writeBytes(line)
        base = buffer.withUnsafeReadableBytes { $0.baseAddress }
    }
}
