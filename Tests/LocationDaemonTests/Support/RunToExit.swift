import Foundation

/// Runs `executable` to its exit; returns its status and what it wrote. One still running after
/// `timeout` seconds (a daemon that started instead of refusing its options, a `watch` whose
/// events never come) is terminated, so the test fails instead of hanging. `environment`
/// changes the inherited environment (nil: the variable is removed); `directory` is the
/// working directory (default: the test's).
func runToExit(_ executable: URL, _ arguments: [String], environment: [String: String?] = [:],
               directory: URL? = nil, timeout: Double = 60) throws -> (status: Int32, out: String, err: String) {
    let p = Process()
    p.executableURL = executable
    p.arguments = arguments
    if let directory { p.currentDirectoryURL = directory }
    if !environment.isEmpty {
        var env = ProcessInfo.processInfo.environment
        for (name, value) in environment { env[name] = value }
        p.environment = env
    }
    let out = Pipe(), err = Pipe()
    p.standardOutput = out
    p.standardError = err
    try p.run()
    let guardTimer = DispatchWorkItem { if p.isRunning { p.terminate() } }
    DispatchQueue.global().asyncAfter(deadline: .now() + timeout, execute: guardTimer)
    defer { guardTimer.cancel() }
    let o = out.fileHandleForReading.readDataToEndOfFile(), e = err.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    return (p.terminationStatus, String(decoding: o, as: UTF8.self), String(decoding: e, as: UTF8.self))
}
