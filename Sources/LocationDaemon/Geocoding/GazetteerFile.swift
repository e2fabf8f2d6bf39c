import LocationCore
import TOMLConfig
#if canImport(Glibc)
import Glibc
#endif

/// Loads `[geocoding] gazetteer` (docs/places.md, "Gazetteer") at start. The file is mapped,
/// not read into memory: a dump is tens of MiB (`allCountries.txt` 1.5 GiB), of which the index
/// keeps a few MiB, and the mapping's pages go back to the page cache once it is built.
public enum GazetteerFile {
    /// A missing or unreadable file, or a malformed row (named by line), is a configuration
    /// error (exit 78): the administrator named the file.
    public static func load(_ path: String) throws(ConfigError) -> Gazetteer {
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
        let size = Int(st.st_size)
        if size == 0 { return Gazetteer(places: []) }
        guard let base = mmap(nil, size, PROT_READ, MAP_PRIVATE, fd, 0), base != MAP_FAILED else {
            throw ConfigError(file: path, line: 0, message: "gazetteer cannot be mapped: \(String(cString: strerror(errno)))")
        }
        defer { munmap(base, size) }
        do {
            return try GeoNamesReader.read(UnsafeRawBufferPointer(start: base, count: size))
        } catch {
            throw ConfigError(file: path, line: error.line, message: "gazetteer: \(error.reason)")
        }
    }
}
