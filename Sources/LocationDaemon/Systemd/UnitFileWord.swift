/// `path` as one word of a unit file's path list (`ReadWritePaths=`), for a drop-in a message
/// tells its reader to write: systemd expands `%` specifiers, so `%` is doubled, and splits the
/// value at spaces, unquoting, so a path with a space, quote or backslash goes in double quotes
/// with `\` and `"` escaped.
func unitFileWord(_ path: String) -> String {
    var word = ""
    var quoted = false
    for c in path.unicodeScalars {
        switch c {
        case "%": word += "%%"
        case "\\", "\"": word += "\\" + String(c); quoted = true
        case " ", "\t", "'": word.unicodeScalars.append(c); quoted = true
        default: word.unicodeScalars.append(c)
        }
    }
    return quoted ? "\"" + word + "\"" : word
}
