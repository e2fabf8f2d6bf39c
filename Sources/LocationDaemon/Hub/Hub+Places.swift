import LocationCore

/// Places (on the loop; docs/places.md): the engine builds them, the store keeps them.
extension Hub {
    /// `program`'s places, ascending id, each with the locality of its centre when there is a
    /// gazetteer (docs/places.md, "Locality").
    public func places(of program: ProgramID) -> [Place] {
        let places = box.value.engine.places(of: program)
        guard let gazetteer else { return places }
        return places.map { p in
            var p = p
            p.locality = gazetteer.nearest(p.centre)
            return p
        }
    }

    /// The books the store kept, and the bound of every book (`[store] max_places`), before
    /// anything is served.
    public func restorePlaces(_ books: [ProgramID: PlaceBook], limit: Int) {
        box.value.engine.placeLimit = limit
        for (program, book) in books { box.value.engine.restorePlaces(book, for: program) }
    }

    /// `program`'s recent visits, oldest first (docs/places.md, "Recent visits").
    public func recentVisits(of program: ProgramID) -> [Visit] { box.value.engine.recentVisits(of: program) }

    /// The recent visits the store kept, and the bound of every history (`[store] max_visits`),
    /// before anything is served.
    public func restoreVisits(_ histories: [ProgramID: VisitHistory], limit: Int) {
        box.value.engine.visitLimit = limit
        for (program, history) in histories { box.value.engine.restoreVisits(history, for: program) }
    }

    /// Writes the books and recent visits the last input changed (a visit's arrival or departure). A failed
    /// write is logged and the book written whole at its next change.
    func storePlaces(_ s: State) {
        guard s.engine.placesChanged else { return }
        let changed = s.engine.takeChangedPlaces()
        for program in changed {
            if let placeStore, let book = s.engine.placeBook(of: program) {
                do { try placeStore.write(book, of: program) } catch {
                    logger.warning("cannot store places", metadata: ["program": "\(program)", "error": "\(error)"])
                }
            }
            if let visitStore, let history = s.engine.visitHistory(of: program) {
                do { try visitStore.write(history, of: program) } catch {
                    logger.warning("cannot store recent visits", metadata: ["program": "\(program)", "error": "\(error)"])
                }
            }
        }
    }
}
