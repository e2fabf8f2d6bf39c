/// How much a program may do (docs/privacy.md): `denied` < `when-in-use` < `always`.
public enum Authorization: String, Hashable, Sendable, CaseIterable, Comparable {
    /// Nothing: no session can be opened.
    case denied
    /// Location while a session is open (the program is connected), nothing in the background.
    case whenInUse = "when-in-use"
    /// Also monitoring (regions, visits, significant changes) that goes on after disconnect.
    case always

    var rank: Int { switch self { case .denied: 0; case .whenInUse: 1; case .always: 2 } }
    public static func < (a: Authorization, b: Authorization) -> Bool { a.rank < b.rank }

    /// "denied, when-in-use or always", for error messages.
    public static let expected = "denied, when-in-use or always"
}

/// How exact the positions a program receives are (docs/privacy.md, "Approximate location").
public enum Accuracy: String, Hashable, Sendable, CaseIterable, Comparable {
    /// Snapped to a ~2 km cell of a secret per-device grid, rate-limited, no speed/course/altitude.
    case approximate
    /// The receiver's fixes as they are.
    case precise

    public static func < (a: Accuracy, b: Accuracy) -> Bool { a == .approximate && b == .precise }
    public static let expected = "precise or approximate"
}
