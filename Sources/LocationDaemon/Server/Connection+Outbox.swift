import LocationCore
import LocationProtocol
import Logging
import NIOCore

/// The bounded outbox for slow readers (docs/protocol.md, "Slow readers"): at most one location
/// and one status event held back while the connection is not writable.
extension Connection {
    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            unwritableTimer?.cancel()
            unwritableTimer = nil
            if backlog != nil {
                // Not from inside this call: it can come from a flush of `writeBacklog` itself.
                context.eventLoop.assumeIsolated().execute { [self] in writeBacklog() }
            } else {
                flushPending()
            }
            if readingPaused { context.eventLoop.assumeIsolated().execute { [self] in resumeInput() } }
        } else if unwritableTimer == nil {
            let timeout = configuration.unwritableTimeout
            unwritableTimer = context.eventLoop.assumeIsolated().scheduleTask(in: timeout) { [self] in
                logger.notice("closing a connection that has not read for \(timeout)",
                              metadata: ["skipped": "\(skippedTotal)"])
                self.context?.close(promise: nil)
            }
        }
        context.fireChannelWritabilityChanged()
    }

    // MARK: Events (HubSubscriber)

    func deliver(_ event: Event, encoded: ByteBuffer) {
        withUnsafePointer(to: event) { deliver(at: $0, line: EncodedLine(encoded)) }
    }

    /// A line the socket can take now goes out without the event being looked at (copied)
    /// beyond its kind.
    /// (The context is not taken out for the call, which would retain it: ≈ 40 instructions;
    /// nor is `self` retained by the closure that reads it, which runs within the call.)
    func deliver(at event: UnsafePointer<Event>, line: EncodedLine) {
        guard context != nil, !closing else { return }
        let wasBusy = busy
        busy = true
        defer { busy = wasBusy }
        if backlog == nil, writer.channelKnownEmpty || context?.channel.isWritable == true {
            // The count of locations dropped before this one goes with it; the line the hub
            // encoded has none, so it is written as a held one is.
            if skippedSincePending > 0, case .location(let fix) = event.pointee {
                pendingLocation = fix
                locationIsNewest = true
                flushPending()
                return
            }
            if holdsEvents { flushPending() }
            writer.write(line, context: { [unowned(unsafe) self] in self.context }, sender: self)
            return
        }
        switch event.pointee {
        case .location(let fix):
            if pendingLocation != nil {
                skippedSincePending += 1
                skippedTotal += 1
            }
            pendingLocation = fix
            locationIsNewest = true
        case .status(let state, let time):
            pendingStatus = (state, time)
            locationIsNewest = false
        case .visit, .significant, .region, .paused, .resumed:
            // Visits, significant changes, region and pause events are rare and cannot be replaced by a
            // newer one: never dropped, written behind the held-back events (order is kept), and
            // behind the backlog while it is being written.
            if backlog != nil {
                if let held = encodePending() { behindBacklog.append(held) }
                behindBacklog.append(line.buffer)
            } else {
                flushPending()
                writer.write(line, context: { [unowned(unsafe) self] in self.context }, sender: self)
            }
        }
    }

    /// Whether an event is held back (asking `pendingLocation` copies the held fix out: ≈ 30
    /// instructions per subscriber and fix).
    var holdsEvents: Bool {
        if !holdsLocation, case .none = pendingStatus { return false }
        return true
    }

    func dropPending() {
        pendingLocation = nil
        pendingStatus = nil
        skippedSincePending = 0
    }

    /// Writes the held-back events, older first; the location carries `"skipped":N`.
    func flushPending() {
        guard let context, let held = encodePending() else { return }
        writer.write(held, context: context, sender: self)
    }

    /// The held-back events, older first, as one buffer (nil: none), no longer held.
    func encodePending() -> ByteBuffer? {
        guard let context else { return nil }
        let encoder = EventEncoder()
        let location = pendingLocation
        let status = pendingStatus
        let (skipped, statusFirst) = (skippedSincePending, locationIsNewest)
        pendingLocation = nil
        pendingStatus = nil
        // Without a location written, the count waits for the next one (it must not be lost when
        // only a status goes out: after an accuracy change dropped the held location, for one).
        if location != nil { skippedSincePending = 0 }
        return registry.encoded(context.channel.allocator) { bytes in
            if let status, statusFirst { encoder.appendStatus(status.state, time: status.time, to: &bytes) }
            if let location { encoder.appendLocation(location, skipped: skipped, to: &bytes) }
            if let status, !statusFirst { encoder.appendStatus(status.state, time: status.time, to: &bytes) }
        }
    }
}
