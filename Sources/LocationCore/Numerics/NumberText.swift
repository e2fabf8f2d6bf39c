/// A number in a message as JSON and TOML write it: 91, not Swift's 91.0. Integral values
/// below 10^15 are exact as an Int64; larger ones, fractions, infinities and NaN keep Swift's
/// text (1e+300, 180.5, inf, nan), which names them unambiguously.
public func numberText(_ d: Double) -> String {
    d == d.rounded() && abs(d) < 1e15 ? String(Int64(d)) : String(d)
}
