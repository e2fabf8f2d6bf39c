/// The engine's places part: one `PlaceBook` per program, fed the precise visits its bound
/// subscribers and its background detectors are sent; each such visit event then names its
/// place (docs/places.md, "Places").
public struct PlacePrograms: Sendable {
    var books: [ProgramID: PlaceBook] = [:]
    /// Programs whose background visits name places: those the shell bound as precise
    /// (`Engine.bind`) or restored places of. (A program never bound is none of the shell's.)
    var keeping: Set<ProgramID> = []
    /// Programs whose books changed since the shell last took them (`takeChangedPlaces`).
    var changed: Set<ProgramID> = []
    /// Places per program (the daemon's configuration).
    public var limit = PlaceBook.defaultLimit
    /// Each program's recent visits, from the same visits as its places.
    var histories: [ProgramID: VisitHistory] = [:]
    /// Recent visits per program (the daemon's configuration).
    public var visitLimit = VisitHistory.defaultLimit

    public init() {}

    mutating func record(_ visit: inout Visit, for program: ProgramID) {
        visit.place = books[program, default: PlaceBook(limit: limit)].record(visit)
        histories[program, default: VisitHistory(limit: visitLimit)].record(visit)
        changed.insert(program)
    }
}

extension Engine {
    /// The places of `program`, ascending id (none for a program that never had a precise visit).
    public func places(of program: ProgramID) -> [Place] { placePrograms.books[program]?.places ?? [] }

    /// The book of `program`, as the store keeps it.
    public func placeBook(of program: ProgramID) -> PlaceBook? { placePrograms.books[program] }

    /// A program's book as the store kept it (at start).
    public mutating func restorePlaces(_ book: PlaceBook, for program: ProgramID) {
        placePrograms.books[program] = book
        placePrograms.keeping.insert(program)
    }

    /// The recent visits of `program`, oldest first (none for a program that never had a
    /// precise visit).
    public func recentVisits(of program: ProgramID) -> [Visit] { placePrograms.histories[program]?.visits ?? [] }

    /// The recent visits of `program`, as the store keeps them.
    public func visitHistory(of program: ProgramID) -> VisitHistory? { placePrograms.histories[program] }

    /// A program's recent visits as the store kept them (at start).
    public mutating func restoreVisits(_ history: VisitHistory, for program: ProgramID) {
        placePrograms.histories[program] = history
    }

    /// Recent visits per program for histories made from now on.
    public var visitLimit: Int {
        get { placePrograms.visitLimit }
        set { placePrograms.visitLimit = newValue }
    }

    /// Places per program for books made from now on.
    public var placeLimit: Int {
        get { placePrograms.limit }
        set { placePrograms.limit = newValue }
    }

    /// Whether a visit changed a program's places (and recent visits) since `takeChangedPlaces`.
    public var placesChanged: Bool { !placePrograms.changed.isEmpty }

    /// Programs whose places changed since the last call (for the store).
    public mutating func takeChangedPlaces() -> Set<ProgramID> {
        defer { placePrograms.changed.removeAll(keepingCapacity: true) }
        return placePrograms.changed
    }

    /// Names the place of every precise visit among `out[start...]` and the program events from
    /// `programStart`: a subscriber's visit when it is bound to its program (a precise session;
    /// docs/regions.md) and not approximate, a background visit when its program's detectors
    /// are precise and it was bound before.
    mutating func recordPlaces(_ out: inout [Delivery], from start: Int, programEventsFrom programStart: Int) {
        var next = start
        while let k = Self.firstVisit(in: out, from: next) {
            next = k + 1
            guard case .visit(var visit) = out[k].event, visit.place == nil,
                  let program = regionPrograms.programOf[out[k].subscriber],
                  let i = indexByID[out[k].subscriber], !subscriptions[i].approximate else { continue }
            placePrograms.record(&visit, for: program)
            out[k].event = .visit(visit)
        }
        guard programStart < programEvents.count else { return }
        for k in programStart..<programEvents.count {
            guard case .visit(var visit) = programEvents[k].event, visit.place == nil,
                  placePrograms.keeping.contains(programEvents[k].program),
                  background.monitors[programEvents[k].program]?.extras.approximate == false else { continue }
            placePrograms.record(&visit, for: programEvents[k].program)
            programEvents[k].event = .visit(visit)
        }
    }

    /// The index of the first visit among `out[start...]`, found without copying the
    /// deliveries out of the array (a copy of each was ≈ 50 instructions per subscriber and fix).
    static func firstVisit(in out: [Delivery], from start: Int) -> Int? {
        out.withUnsafeBufferPointer { all in (start..<all.count).first { all[$0].event.isVisit } }
    }
}
