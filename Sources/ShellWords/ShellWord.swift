/// `s` as one word of a POSIX shell command, for a command a message tells its reader to run:
/// as it is when a shell takes every character of it literally, otherwise in single quotes
/// (a single quote in it written '\'').
public func shellWord(_ s: String) -> String {
    let literal = !s.isEmpty && s.unicodeScalars.allSatisfy { c in
        switch c {
        case "a"..."z", "A"..."Z", "0"..."9", "-", "_", ".", "/", "@", "%", "+", "=", ":", ",": true
        default: false
        }
    }
    if literal { return s }
    return "'" + s.split(separator: "'", omittingEmptySubsequences: false).joined(separator: "'\\''") + "'"
}

/// The operands of a command (names, paths, a mode) as shell words, after `--` when one starts
/// with '-' (the command would take it for an option).
public func shellOperands(_ operands: String...) -> String {
    let words = operands.map(shellWord).joined(separator: " ")
    return operands.contains { $0.hasPrefix("-") } ? "-- " + words : words
}
