/// An error talking to gpsd: a failed connection, a lost one, or gpsd closing it.
public struct GPSDError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The `errno` of the socket failure, or 0 when gpsd closed the connection or broke the
    /// protocol.
    public var code: Int32
    public var message: String
    public init(code: Int32, message: String) { self.code = code; self.message = message }
    public var description: String { "\(message) (\(code))" }
}
