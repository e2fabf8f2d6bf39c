/// Byte searches over a line eight bytes at a time (SWAR: one 64-bit word holds eight bytes).
///
/// Why: framing a line byte by byte takes four passes (line end, ESC, `$`, checksum up to `*`)
/// and finding each field's comma a fifth; together they cost more than parsing the fields,
/// and each loop's exit is a mispredicted branch about once a line or field. Line ends, ESC,
/// `$` and `!` are control or punctuation bytes below `%` (0x25), which NMEA text rarely
/// contains: a word without any byte below the looked-for one is skipped in a few
/// instructions, and only a word that has one is looked at exactly.
///
/// Words are loaded unaligned and only from readable memory: a tail shorter than a word is
/// read as the word ending at `end` when that starts at a readable byte, else byte by byte.
enum ByteScan {
    @inline(__always) static func word(_ p: UnsafePointer<UInt8>, _ i: Int) -> UInt64 {
        UInt64(littleEndian: UnsafeRawPointer(p + i).loadUnaligned(as: UInt64.self))
    }

    /// Whether some byte of `w` is below `n` (n ≤ 128). Exact as to whether, not as to which:
    /// a borrow can also flag a byte above a true one.
    @inline(__always) static func hasByte(below n: UInt8, in w: UInt64) -> Bool {
        (w &- 0x0101_0101_0101_0101 &* UInt64(n)) & ~w & 0x8080_8080_8080_8080 != 0
    }

    /// 0x80 in each byte of `w` equal to `c`, 0 elsewhere (exact: no carry crosses bytes).
    @inline(__always) static func equal(_ w: UInt64, _ c: UInt8) -> UInt64 {
        let x = w ^ (0x0101_0101_0101_0101 &* UInt64(c))
        let t = ((x & 0x7F7F_7F7F_7F7F_7F7F) &+ 0x7F7F_7F7F_7F7F_7F7F) | x
        return ~t & 0x8080_8080_8080_8080
    }

    /// The bytes `i..<end` (fewer than eight) in the low bytes of a word, zeros above, read
    /// as the word ending at `end` (which must start at or after a readable index).
    ///
    /// Shifts by a variable amount here and in FieldCursor are masking shifts (`&<<`, `&>>`)
    /// with amounts below 64 by construction: Swift's `<<` and `>>` also handle negative and
    /// oversized amounts, which costs a compare and select each.
    @inline(__always) static func tail(_ p: UnsafePointer<UInt8>, _ i: Int, _ end: Int) -> UInt64 {
        word(p, end - 8) &>> (UInt64(8 - (end - i)) << 3)
    }

    /// Index of the first `a` or `b` (both non-zero and below `limit`) in `from..<end`, or `end`.
    @inline(__always)
    static func first(_ a: UInt8, _ b: UInt8, below limit: UInt8, in p: UnsafePointer<UInt8>, from: Int, end: Int) -> Int {
        var i = from
        while i + 8 <= end {
            let w = word(p, i)
            if hasByte(below: limit, in: w) {
                let m = equal(w, a) | equal(w, b)
                if m != 0 { return i + m.trailingZeroBitCount >> 3 }
            }
            i += 8
        }
        if i == end { return end }
        if end - from >= 8 {
            // The last bytes as one overlapping word: no loop whose length varies line by line (its
            // exit would be mispredicted about once a line). The zeros shifted in match neither.
            let w = tail(p, i, end)
            let m = equal(w, a) | equal(w, b)
            return m != 0 ? i + m.trailingZeroBitCount >> 3 : end
        }
        while i < end {
            if p[i] == a || p[i] == b { return i }
            i += 1
        }
        return end
    }

    /// What one pass over a line finds: where it ends, whether it holds an ESC, and where its
    /// first two sentences start. Indices are the buffer's.
    struct Line {
        /// The first CR or LF, or the end of the bytes scanned.
        var end: Int
        var escape = false
        /// The first and second `$` or `!` before `end`; `end` when there is none.
        var first: Int
        var second: Int
    }

    /// Scans `from..<end` up to the first CR or LF: one pass for three searches (line end, ESC,
    /// sentence start), since all of these bytes are below `%`.
    @inline(__always) static func line(_ p: UnsafePointer<UInt8>, from: Int, end: Int) -> Line {
        var found = Line(end: end, first: -1, second: -1)
        var i = from
        while i + 8 <= end {
            let w = word(p, i)
            if hasByte(below: 0x25, in: w) && examine(w, at: i, &found) { return found.finished() }
            i += 8
        }
        if i < end {
            if end - from >= 8 {
                _ = examine(tail(p, i, end), at: i, &found)  // the zeros shifted in match nothing
            } else {
                while i < end {
                    let c = p[i]
                    if c == 0x0A || c == 0x0D { found.end = i; break }
                    if c == 0x1B { found.escape = true }
                    if c == UInt8(ascii: "$") || c == UInt8(ascii: "!") { found.start(at: i) }
                    i += 1
                }
            }
        }
        return found.finished()
    }

    /// Adds what the word at `i` holds to `found`; true when it holds the line's end.
    @inline(__always) static func examine(_ w: UInt64, at i: Int, _ found: inout Line) -> Bool {
        let ends = equal(w, 0x0A) | equal(w, 0x0D)
        // Only the bytes before the line's end belong to it.
        let mine: UInt64 = ends == 0 ? ~0 : (ends & (0 &- ends)) &- 1
        if equal(w, 0x1B) & mine != 0 { found.escape = true }
        var starts = (equal(w, UInt8(ascii: "$")) | equal(w, UInt8(ascii: "!"))) & mine
        while starts != 0 && found.second < 0 {
            found.start(at: i + starts.trailingZeroBitCount >> 3)
            starts &= starts &- 1
        }
        if ends == 0 { return false }
        found.end = i + ends.trailingZeroBitCount >> 3
        return true
    }

    /// Index of the first `$` or `!` (the start of a sentence) in `from..<end`, or `end`.
    @inline(__always) static func sentenceStart(_ p: UnsafePointer<UInt8>, from: Int, end: Int) -> Int {
        first(UInt8(ascii: "$"), UInt8(ascii: "!"), below: 0x25, in: p, from: from, end: end)
    }

    /// One bit per byte of `from..<end`, set for each `,`: bit `k & 63` of `out[k >> 6]` for
    /// the byte at `from + k`. `out` has room for `(end - from + 63) / 64` words. Memory from
    /// `floor` (≤ `from`) on is readable. Branch-free per word, which matters: a loop per comma
    /// mispredicted its exit about once a word.
    @inline(__always)
    static func commaMask(_ p: UnsafePointer<UInt8>, from: Int, end: Int, floor: Int, into out: UnsafeMutablePointer<UInt64>) {
        let comma = UInt8(ascii: ",")
        var block: UInt64 = 0
        var i = from
        while i + 8 <= end {
            block |= bits(equal(word(p, i), comma)) &<< UInt64(i - from)
            if (i - from) & 63 == 56 { out[(i - from) >> 6] = block; block = 0 }
            i += 8
        }
        if i < end {
            let w: UInt64
            if end - 8 >= floor {
                w = tail(p, i, end)  // the zeros shifted in are no comma
            } else {
                w = (0..<(end - i)).reduce(0) { $0 | UInt64(p[i + $1]) << UInt64($1 << 3) }
            }
            block |= bits(equal(w, comma)) &<< UInt64(i - from)
        }
        if (i - from) & 63 != 0 || i < end { out[(i - from) >> 6] = block }
    }

    /// The 0x80 flags of `equal` gathered into the low byte, byte k's flag as bit k.
    @inline(__always) static func bits(_ m: UInt64) -> UInt64 {
        ((m >> 7) &* 0x0102_0408_1020_4080) >> 56
    }

    /// XOR of the bytes of `from..<end` up to the first `*`, and that `*`'s index (`end` when
    /// there is none): an NMEA checksum and where its hex digits start. Memory from `floor`
    /// (≤ `from`) on is readable.
    @inline(__always)
    static func checksum(_ p: UnsafePointer<UInt8>, from: Int, end: Int, floor: Int) -> (sum: UInt8, star: Int) {
        var x: UInt64 = 0
        var i = from
        var star = end
        while i < end {
            let w: UInt64
            if i + 8 <= end {
                w = word(p, i)
            } else if end - 8 >= floor {
                w = tail(p, i, end)  // zeros above the tail: they change no XOR and are no '*'
            } else {
                while i < end {
                    if p[i] == UInt8(ascii: "*") { star = i; break }
                    x ^= UInt64(p[i])
                    i += 1
                }
                break
            }
            let m = equal(w, UInt8(ascii: "*"))
            if m != 0 {
                let k = m.trailingZeroBitCount >> 3
                x ^= w & ((1 &<< (UInt64(k) << 3)) &- 1)  // the bytes before the '*' (k < 8)
                star = i + k
                break
            }
            x ^= w
            i += 8
        }
        x ^= x >> 32
        x ^= x >> 16
        x ^= x >> 8
        return (UInt8(truncatingIfNeeded: x), star)
    }
}

extension ByteScan.Line {
    @inline(__always) mutating func start(at i: Int) {
        if first < 0 { first = i } else if second < 0 { second = i }
    }

    @inline(__always) func finished() -> Self {
        var l = self
        if l.first < 0 { l.first = end }
        if l.second < 0 { l.second = end }
        return l
    }
}
