import Foundation

/// What /bin/sh runs of `command`, the text of a shell command a message prints: each command
/// it names that is one of `programs` is a shell function here that records its arguments
/// instead of running, so nothing is changed; returns each call's arguments, the program's name
/// first. A word the message failed to quote splits or expands here as it would for its reader.
public func shellCalls(_ command: String, programs: [String]) throws -> [[String]] {
    // Unit and record separators end each argument and each call: no test word holds them.
    let functions = programs.map { "\($0)() { printf '%s\\037' \($0) \"$@\"; printf '\\036'; }; " }.joined()
    let shell = Process()
    shell.executableURL = URL(fileURLWithPath: "/bin/sh")
    shell.arguments = ["-c", functions + command]
    let out = Pipe()
    shell.standardOutput = out
    try shell.run()
    let printed = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    shell.waitUntilExit()
    guard shell.terminationStatus == 0 else {
        throw TestFailure(description: "/bin/sh -c \(command): exit status \(shell.terminationStatus)")
    }
    return printed.split(separator: "\u{1E}").map { call in
        call.split(separator: "\u{1F}", omittingEmptySubsequences: false).dropLast().map(String.init)
    }
}

/// Names and paths for a message's command to print as one shell word each: a space, quotes,
/// a backslash, characters a shell expands (`marker` is a file the shell would create if it ran
/// part of one), one starting with '-', an empty one and a plain one.
public func awkwardShellWords(marker: String) -> [String] {
    ["a b", "o'brien", "x;touch \(marker)", "$(touch \(marker))", "`touch \(marker)`", "a\\b*", "\"q\" ~", "-x", "plain_1.2-x"]
}
