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

    /// Writes the books the last input changed (a visit's arrival or departure). A failed
    /// write is logged and the book written whole at its next change.
    func storePlaces(_ s: State) {
        guard s.engine.placesChanged else { return }
        let changed = s.engine.takeChangedPlaces()
        guard let placeStore else { return }
        for program in changed {
            guard let book = s.engine.placeBook(of: program) else { continue }
            do { try placeStore.write(book, of: program) } catch {
                logger.warning("cannot store places", metadata: ["program": "\(program)", "error": "\(error)"])
            }
        }
    }
}
