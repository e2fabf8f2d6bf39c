import LocationCore
import ShellWords
import TOMLConfig
#if canImport(Glibc)
import Glibc
#endif

/// Loads `[geocoding] gazetteer` (docs/places.md, "Gazetteer") at start: from `PATH.idx`
/// (`locationctl gazetteer build PATH`) when that index was built from the dump as it is now
/// (its size and modification time), else from the dump. Files are mapped, not read into
/// memory: a dump is tens of MiB (`allCountries.txt` 1.5 GiB), of which the index keeps a few
/// MiB, and the mapping's pages go back to the page cache once it is built.
public enum GazetteerFile {
    public struct Loaded {
        public var gazetteer: Gazetteer
        /// The index file it came from, if one was used.
        public var index: String?
        /// Why `PATH.idx`, which exists, was not used (the dump was read instead).
        public var indexNotUsed: String?
    }

    /// A missing or unreadable dump, or a malformed row (named by line), is a configuration
    /// error (exit 78): the administrator named the file. An index that cannot be used is
    /// passed over, with the reason: the dump says the same.
    public static func load(_ path: String) throws(ConfigError) -> Loaded {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            let code = errno
            // Under the shipped unit a home directory or /tmp is not what the administrator sees.
            if code == ENOENT || code == EACCES, let hidden = DaemonOptions.hiddenByTheUnit(path, unitHides: DaemonOptions.unitHides) {
                throw ConfigError(file: path, line: 0, message: "gazetteer cannot be opened: \(code == ENOENT ? "no such file" : "permission denied"), as the daemon sees it: \(hidden); move it to /var/lib/locationd (the unit's state directory) and name that")
            }
            throw ConfigError(file: path, line: 0, message: "gazetteer cannot be opened: \(String(cString: strerror(code)))")
        }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw ConfigError(file: path, line: 0, message: "gazetteer: \(String(cString: strerror(errno)))") }
        guard st.st_mode & S_IFMT == S_IFREG else { throw ConfigError(file: path, line: 0, message: "gazetteer is not a regular file") }
        let source = GazetteerIndex.Source(size: Int64(st.st_size), modified: Int64(st.st_mtim.tv_sec) * 1_000_000_000 + Int64(st.st_mtim.tv_nsec))
        let indexPath = path + ".idx"
        var notUsed: String?
        do {
            if let g = try fromIndex(indexPath, of: source) { return Loaded(gazetteer: g, index: indexPath) }
        } catch {
            notUsed = "\(indexPath): \(error.reason); the dump was read instead (rebuild the index: locationctl gazetteer build \(shellOperands(path)))"
        }
        let size = Int(st.st_size)
        if size == 0 { return Loaded(gazetteer: Gazetteer(places: []), indexNotUsed: notUsed) }
        guard let base = mmap(nil, size, PROT_READ, MAP_PRIVATE, fd, 0), base != MAP_FAILED else {
            throw ConfigError(file: path, line: 0, message: "gazetteer cannot be mapped: \(String(cString: strerror(errno)))")
        }
        defer { munmap(base, size) }
        do {
            return Loaded(gazetteer: try GeoNamesReader.read(UnsafeRawBufferPointer(start: base, count: size)), indexNotUsed: notUsed)
        } catch {
            throw ConfigError(file: path, line: error.line, message: "gazetteer: \(error.reason)")
        }
    }

    /// The index at `path` if it was built from `source`; nil when there is none.
    static func fromIndex(_ path: String, of source: GazetteerIndex.Source) throws(GazetteerIndex.Problem) -> Gazetteer? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            if errno == ENOENT { return nil }
            throw GazetteerIndex.Problem(reason: "cannot be opened: \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG else { throw GazetteerIndex.Problem(reason: "is not a regular file") }
        let size = Int(st.st_size)
        guard size > 0, let base = mmap(nil, size, PROT_READ, MAP_PRIVATE, fd, 0), base != MAP_FAILED else {
            throw GazetteerIndex.Problem(reason: size == 0 ? "is empty" : "cannot be mapped: \(String(cString: strerror(errno)))")
        }
        defer { munmap(base, size) }
        return try GazetteerIndex.gazetteer(from: UnsafeRawBufferPointer(start: base, count: size), builtFrom: source)
    }
}
