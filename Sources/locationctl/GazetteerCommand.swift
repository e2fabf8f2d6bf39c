import ArgumentParser
import LocationCore
#if canImport(Glibc)
import Glibc
#endif

/// `locationctl gazetteer build DUMP`: the daemon's gazetteer index as a file next to the
/// dump (docs/places.md, "Gazetteer"), which the daemon loads instead of parsing the dump.
struct GazetteerCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gazetteer",
        abstract: "Prebuild the gazetteer index locationd loads at start.",
        subcommands: [Build.self])

    struct Build: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Index a GeoNames dump into DUMP.idx, which locationd loads instead of the dump while the dump is unchanged.",
            discussion: """
                The index names the dump by its size and modification time: after a new dump, \
                locationd reads the dump (and logs that the index is of another version) until \
                the index is built again. A malformed row is named by its line, as locationd names it.
                """)

        @Argument(help: "A GeoNames dump (cities500.txt, cities1000.txt, allCountries.txt).") var dump: String
        @Option(name: .shortAndLong, help: "The index file (default: DUMP.idx, where locationd looks for it).") var output: String?

        func run() throws {
            let before = try Self.source(of: dump)
            let bytes = try readFileBytes(dump, what: "gazetteer")
            let gazetteer: Gazetteer
            do { gazetteer = try GeoNamesReader.read(bytes) } catch { throw RuntimeError("\(dump):\(error.line): \(error.reason)") }
            guard try Self.source(of: dump) == before, bytes.count == before.size else {
                throw RuntimeError("\(dump): the file changed while it was read; run again once it is complete")
            }
            let path = output ?? dump + ".idx"
            // Written beside and renamed: a daemon starting meanwhile sees the old index or the new one.
            let temporary = path + ".tmp"
            try writeBytes(GazetteerIndex.bytes(of: gazetteer, source: before), to: temporary)
            guard rename(temporary, path) == 0 else {
                let reason = String(cString: strerror(errno))
                unlink(temporary)
                throw RuntimeError("\(path): cannot write: \(reason)")
            }
            print("\(path): \(gazetteer.count) places, index of \(dump) as it is now")
        }

        static func source(of path: String) throws -> GazetteerIndex.Source {
            var st = stat()
            guard stat(path, &st) == 0 else { throw RuntimeError("\(path): cannot open gazetteer: \(String(cString: strerror(errno)))") }
            return GazetteerIndex.Source(size: Int64(st.st_size), modified: Int64(st.st_mtim.tv_sec) * 1_000_000_000 + Int64(st.st_mtim.tv_nsec))
        }
    }
}
