import Glibc

/// A file's device and inode (`lstat`): which file a path names now (the socket file the server
/// made, the database's companions).
struct FileIdentity: Hashable, Sendable {
    var device: UInt64
    var inode: UInt64

    init?(path: String) {
        var st = stat()
        guard lstat(path, &st) == 0 else { return nil }
        device = UInt64(st.st_dev); inode = UInt64(st.st_ino)
    }
}
