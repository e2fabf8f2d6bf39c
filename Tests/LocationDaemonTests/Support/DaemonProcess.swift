import Foundation
import LocationClient
import LocationCore
import LocationProtocol

/// The real `locationd` executable as a child process, for end-to-end tests. It is built with
/// the tests (same build folder as the test bundle); its socket lives in a fresh temp folder.
/// Its stderr goes to a file there (a pipe nobody drains would block a daemon logging at debug
/// level once 64 KiB are written), readable while it runs; `stop()` removes the folder.
final class DaemonProcess: @unchecked Sendable {
    struct Failure: Error, CustomStringConvertible { var description: String }

    let directory: URL
    var socketPath: String { directory.appendingPathComponent("locationd.sock").path }
    private let process = Process()
    private let stderrURL: URL

    static var executable: URL {
        URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
            .deletingLastPathComponent().appendingPathComponent("locationd")
    }

    /// `database`: the region store's path (default: a fresh file in the temp folder).
    /// `launcher`: a command the daemon runs under (e.g. setpriv, to run it as another user,
    /// who then needs to create its socket in the temp folder).
    init(arguments: [String], database: String? = nil, directory reuse: URL? = nil, launcher: [String] = []) throws {
        guard FileManager.default.isExecutableFile(atPath: Self.executable.path) else {
            throw Failure(description: "locationd not built at \(Self.executable.path); run swift build first")
        }
        directory = reuse ?? FileManager.default.temporaryDirectory
            .appendingPathComponent("locationd-test-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let daemonArguments = ["--socket", directory.appendingPathComponent("locationd.sock").path, "--log-level", "debug",
                               "--database", database ?? directory.appendingPathComponent("locationd.db").path] + arguments
        if let command = launcher.first {
            chmod(directory.path, 0o777)
            process.executableURL = URL(fileURLWithPath: command)
            process.arguments = launcher.dropFirst() + [Self.executable.path] + daemonArguments
        } else {
            process.executableURL = Self.executable
            process.arguments = daemonArguments
        }
        // Its own name: a reused folder may hold an earlier daemon's log.
        stderrURL = directory.appendingPathComponent("stderr-\(UUID().uuidString.prefix(8)).log")
        guard FileManager.default.createFile(atPath: stderrURL.path, contents: nil),
              let stderrFile = try? FileHandle(forWritingTo: stderrURL) else {
            throw Failure(description: "cannot create \(stderrURL.path)")
        }
        defer { try? stderrFile.close() }  // the child has its own copy
        process.standardError = stderrFile
        process.standardOutput = FileHandle.nullDevice
        try process.run()
    }

    deinit { stop() }

    /// Connects a client, retrying while the daemon creates its socket.
    func connect(timeout: Double = 10) async throws -> LocationClient {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            do { return try await LocationClient.connect(path: socketPath) } catch {
                guard process.isRunning, Date() < deadline else {
                    throw Failure(description: "cannot connect to \(socketPath): \(error); stderr: \(stderrText())")
                }
                try await Task.sleep(for: .milliseconds(20))  // polling for startup, not synchronisation
            }
        }
    }

    var isRunning: Bool { process.isRunning }

    /// The daemon's pid while it runs (for /proc readings).
    var pid: Int32? { process.isRunning ? process.processIdentifier : nil }

    func signal(_ sig: Int32) { if process.isRunning { kill(process.processIdentifier, sig) } }

    /// Waits for exit (after a signal); returns the termination status.
    func waitForExit(timeout: Double = 10) -> Int32? {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        return process.isRunning ? nil : process.terminationStatus
    }

    /// What the daemon wrote to stderr so far ("" once `stop()` removed its folder).
    func stderrText() -> String {
        (try? String(contentsOf: stderrURL, encoding: .utf8)) ?? ""
    }

    func stop() {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(at: directory)
    }
}

/// Reads a client's messages with a deadline that only guards against a hang (a failure), never
/// paces the test: on timeout a watchdog closes the client, which ends the stream.
struct MessageReader {
    let client: LocationClient
    var iterator: AsyncThrowingStream<ServerMessage, any Error>.AsyncIterator

    init(_ client: LocationClient) {
        self.client = client
        iterator = client.messages.makeAsyncIterator()
    }

    /// A watchdog that closes the client (ending the stream) once `timeout` seconds have passed;
    /// cancel it when done. Its value is nil when it was cancelled first.
    private func closing(after timeout: Double) -> Task<Void, any Error> {
        let client = self.client
        return Task {
            try await Task.sleep(for: .milliseconds(Int(timeout * 1000)))
            client.close()
        }
    }

    /// Reads messages until `done` returns true for the list so far; throws on timeout or end.
    mutating func read(timeout: Double = 20, until done: ([ServerMessage]) -> Bool) async throws -> [ServerMessage] {
        var seen: [ServerMessage] = []
        let watchdog = closing(after: timeout)
        defer { watchdog.cancel() }
        while !done(seen) {
            guard let message = try await iterator.next() else {
                throw DaemonProcess.Failure(description: "stream ended (timeout \(timeout) s or closed) after \(seen.count) messages: \(seen.suffix(5))")
            }
            seen.append(message)
        }
        return seen
    }

    /// Reads messages until the stream ends; whether the daemon closed the connection or the
    /// deadline passed first (the watchdog closed it).
    mutating func readToEnd(timeout: Double = 20) async throws -> (messages: [ServerMessage], end: StreamEnd) {
        var seen: [ServerMessage] = []
        let watchdog = closing(after: timeout)
        defer { watchdog.cancel() }
        while let message = try await iterator.next() { seen.append(message) }
        watchdog.cancel()
        // Cancelled while it slept: the stream ended before the deadline.
        let fired = (try? await watchdog.value) != nil
        return (seen, fired ? .timedOut : .closed)
    }
}

extension Array where Element == ServerMessage {
    var fixes: [Fix] { compactMap { if case .location(let f, _) = $0 { f } else { nil } } }
    var states: [SourceState] { compactMap { if case .status(let s, _) = $0 { s } else { nil } } }
}
