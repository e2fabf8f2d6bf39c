/// `s` as one word of a POSIX shell command, for a command a message tells its reader to run:
/// as it is when a shell takes every character of it literally, otherwise in single quotes
/// (a single quote in it written '\'').
func shellWord(_ s: String) -> String {
    let literal = !s.isEmpty && s.unicodeScalars.allSatisfy { c in
        switch c {
        case "a"..."z", "A"..."Z", "0"..."9", "-", "_", ".", "/", "@", "%", "+", "=", ":", ",": true
        default: false
        }
    }
    if literal { return s }
    return "'" + s.split(separator: "'", omittingEmptySubsequences: false).joined(separator: "'\\''") + "'"
}
