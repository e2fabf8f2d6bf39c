import LocationCore
import LocationProtocol
import NIOCore
import Testing
@testable import LocationDaemon

@Suite("EncodedLines: one line per distinct event, buffers reused across inputs")
struct EncodedLinesTests {
    func fix(_ second: Int64, latitude: Double) -> Event {
        .location(Fix(time: Timestamp(seconds: 1_773_136_800 + second, nanoseconds: 0),
                      coordinate: Coordinate(latitude: latitude, longitude: 11.5), mode: .threeD))
    }

    /// What the encoder itself writes for `event`.
    func expected(_ event: Event) -> String {
        var bytes: [UInt8] = []
        EventEncoder().append(event, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The line's text, read both from its buffer and from where it says its bytes are (what
    /// the sends use): they must agree.
    func text(_ line: EncodedLine, sourceLocation: SourceLocation = #_sourceLocation) -> String {
        let buffered = String(buffer: line.buffer)
        #expect(String(decoding: line.bytes, as: UTF8.self) == buffered, sourceLocation: sourceLocation)
        #expect(UnsafeRawPointer(line.bytes.baseAddress) == storage(line), sourceLocation: sourceLocation)
        return buffered
    }

    func storage(_ line: EncodedLine) -> UnsafeRawPointer? {
        line.buffer.withUnsafeReadableBytes { UnsafeRawPointer($0.baseAddress) }
    }

    @Test func eachDistinctEventIsEncodedOncePerInput() {
        var lines = EncodedLines()
        let a = fix(0, latitude: 48.1), status = Event.status(.fix, time: nil)
        lines.startInput()
        let first = lines.line(for: a)
        let other = lines.line(for: status)
        let again = lines.line(for: a)
        #expect(text(first) == expected(a))
        #expect(text(other) == expected(status))
        // The same event's line is the same buffer, not a second encoding.
        #expect(storage(again) == storage(first))
        #expect(storage(other) != storage(first))
    }

    @Test func alternatingEventsEachKeepTheirOwnLine() {
        // The slot found last is tried first: a delivery with another event must still get
        // its own line, and one with an earlier event that earlier line.
        var lines = EncodedLines()
        let a = fix(0, latitude: 48.1), b = fix(0, latitude: 48.2), status = Event.status(.fix, time: nil)
        lines.startInput()
        var first: [String: UnsafeRawPointer?] = [:]
        for (name, event) in [("a", a), ("b", b), ("a", a), ("status", status), ("b", b), ("b", b), ("a", a)] {
            let line = withUnsafePointer(to: event) { lines.line(at: $0) }
            #expect(text(line) == expected(event), "\(name)")
            if let seen = first[name] {
                #expect(storage(line) == seen, "\(name) should have one line per input")
            } else {
                first[name] = storage(line)
            }
        }
        #expect(Set(first.values.map { $0.map { Int(bitPattern: $0) } }).count == 3)
        // The next input's first event is encoded afresh, not found in the last slot of this one.
        lines.startInput()
        let next = fix(1, latitude: 48.3)
        #expect(text(lines.line(for: next)) == expected(next))
    }

    @Test func aBufferNobodyHoldsIsRefilledInPlace() {
        var lines = EncodedLines()
        lines.startInput()
        let firstStorage = storage(lines.line(for: fix(0, latitude: 48.1)))
        lines.startInput()
        let next = fix(1, latitude: 48.2)
        let line = lines.line(for: next)
        #expect(text(line) == expected(next))
        #expect(storage(line) == firstStorage, "the next input's line should reuse the storage (no allocation per fix)")
    }

    @Test func aLineStillHeldForASlowReaderIsNotOverwritten() {
        var lines = EncodedLines()
        let old = fix(0, latitude: 48.1)
        lines.startInput()
        let held = lines.line(for: old)  // as NIO holds a write a slow reader has not taken yet
        lines.startInput()
        let new = fix(1, latitude: -33.9)
        let line = lines.line(for: new)
        // Where the held line says its bytes are still holds the old line.
        #expect(text(held) == expected(old))
        #expect(text(line) == expected(new))
        #expect(storage(line) != storage(held))
    }
}
