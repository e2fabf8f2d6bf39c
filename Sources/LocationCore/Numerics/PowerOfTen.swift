/// 10^p for 0 ≤ p ≤ 18: the NMEA parser scales digits with it, the protocol encoder writes
/// fixed-point numbers with it (callers keep p in range: at most 18 digits are parsed, at most
/// 9 decimals written). A switch, which compiles to a constant table, instead of a global
/// array: Swift guards every global access with a lazy-initialisation check, which these
/// per-field paths should not pay.
@inlinable @inline(__always) public func powerOfTen(_ p: Int) -> Int64 {
    switch p {
    case 0: 1
    case 1: 10
    case 2: 100
    case 3: 1_000
    case 4: 10_000
    case 5: 100_000
    case 6: 1_000_000
    case 7: 10_000_000
    case 8: 100_000_000
    case 9: 1_000_000_000
    case 10: 10_000_000_000
    case 11: 100_000_000_000
    case 12: 1_000_000_000_000
    case 13: 10_000_000_000_000
    case 14: 100_000_000_000_000
    case 15: 1_000_000_000_000_000
    case 16: 10_000_000_000_000_000
    case 17: 100_000_000_000_000_000
    case 18: 1_000_000_000_000_000_000
    default: preconditionFailure("10^\(p) is out of range")
    }
}
