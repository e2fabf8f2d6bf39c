import Dispatch
#if canImport(Glibc)
import Glibc
#endif

/// The signals the daemon acts on (SIGTERM/SIGINT: stop, SIGHUP: reload, the test hook's),
/// each handed to `handler` on one serial queue. libdispatch's signal sources: the signal's
/// disposition is set to "ignore" first, so its default action (terminating the process) never
/// runs, and the source still sees every delivery. Several deliveries of one signal before the
/// handler runs may arrive as one, as with any signal. (A handful of lines of our own instead of
/// swift-service-lifecycle, whose AsyncAlgorithms and collections cost 0.5 MiB of idle memory:
/// docs/benchmarks.md, "Footprint".)
final class ProcessSignals: @unchecked Sendable {
    // @unchecked: `sources` is written once, in init; sources are thread-safe objects.
    private let sources: [any DispatchSourceSignal]

    init(_ signals: [Int32], handler: @escaping @Sendable (Int32) -> Void) {
        let queue = DispatchQueue(label: "locationd.signals")
        sources = signals.map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            source.setEventHandler { handler(number) }
            source.resume()
            return source
        }
    }

    /// No more handler calls. The signals stay ignored: a late SIGTERM during the last steps of
    /// a shutdown must not kill the process halfway.
    func cancel() {
        for source in sources { source.cancel() }
    }
}
