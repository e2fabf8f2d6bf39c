import LocationCore
import LocationProtocol
import Logging
import NIOCore

/// The `always` program's backlog (docs/protocol.md, "Background delivery"): written a page
/// at a time while the connection is writable, before anything newer.
extension Connection {
    /// Queued events read from the store per page of the backlog.
    static let backlogPage = 128

    /// An `always` program subscribed: its background detectors carry over to this
    /// subscription, and what waited in its queue is written now, before any newer event.
    func takeBackground() {
        guard context != nil, let queue = hub.queue else { return hub.takeBack(program, into: id) }
        hub.writeUnwritten()
        if backlog == nil { flushPending() }
        // From the start again on a new subscribe: until acknowledged, every subscribe gets all
        // of it (docs/protocol.md, "Background delivery").
        backlog = (0, queue.lastSeq(of: program))
        // After the backlog is set: visits the background monitor held for a publication, which
        // the take-back sends at once, are newer than what is queued and wait behind it.
        hub.takeBack(program, into: id)
        writeBacklog()
    }

    /// Writes pages of the backlog while the connection is writable; when it is not, the rest
    /// waits in the store until it is (`channelWritabilityChanged`). Newer events wait behind it.
    func writeBacklog() {
        guard let context, !closing, var progress = backlog, let queue = hub.queue else { return }
        var lines: [[UInt8]] = []
        while context.channel.isWritable {
            lines.removeAll(keepingCapacity: true)
            let next = queue.backlogPage(of: program, after: progress.after, through: progress.through,
                                         limit: Self.backlogPage, into: &lines)
            for line in lines {
                writer.writeThroughChannel(context.channel.allocator.buffer(bytes: line), context: context)
            }
            guard let next else {
                if progress.through > 0 && durableWritten == nil {
                    logger.info("background queue delivered", metadata: ["through": "\(progress.through)"])
                }
                if durableWritten != nil { durableWritten = progress.through }
                stopBacklog()
                if pendingLocation != nil || pendingStatus != nil { flushPending() } else { context.flush() }
                return
            }
            progress.after = next
            backlog = progress
            context.flush()
        }
    }

    /// A durable subscription's queue grew: what is new is written from it, after whatever of
    /// the backlog is still being written (docs/protocol.md, "Durable subscriptions").
    func durableQueueGrew() {
        guard let written = durableWritten, let queue = hub.queue, context != nil else { return }
        let last = queue.lastSeq(of: program)
        if var progress = backlog {
            progress.through = max(progress.through, last)
            backlog = progress
        } else if last > written {
            if pendingLocation != nil || pendingStatus != nil { flushPending() }
            backlog = (written, last)
            writeBacklog()
        }
    }

    /// Ends the backlog: written through, or cut short because the subscription ended or its
    /// accuracy changed (the rest stays queued for the next subscribe). What came live meanwhile
    /// is written now, as it would have been without the backlog (before the reply or the
    /// `changed` event that follows). Not flushed here: a flush that drains the socket would
    /// write the held-back location too (`channelWritabilityChanged`), which those callers drop.
    func stopBacklog() {
        guard backlog != nil else { return }
        backlog = nil
        guard let context else { return behindBacklog.removeAll() }
        for buffer in behindBacklog { writer.writeThroughChannel(buffer, context: context) }
        behindBacklog.removeAll()
    }

    func acknowledge(_ seq: UInt64, id rid: RequestID?) {
        guard let session else { return send(.error(notAuthorized(rid)), flush: false) }
        guard session.grant.authorization == .always else {
            return send(.error(ProtocolError(.insufficientAuthorization, "only always sessions have a background queue; this one is \(session.grant.authorization.rawValue)", id: rid)), flush: false)
        }
        guard let queue = hub.queue else {
            return send(.error(ProtocolError(.outOfRange, "seq \(seq): this daemon keeps no background queue", id: rid)), flush: false)
        }
        do {
            let remaining = try queue.acknowledge(seq, for: program)
            send(.acked(id: rid, seq: seq, queued: remaining), flush: false)
        } catch where error.code == .storeFailed {
            logger.error("cannot record an acknowledgement", metadata: ["program": "\(program)", "seq": "\(seq)", "error": "\(error)"])
            send(.error(ProtocolError(.storeFailed, "the daemon could not record the acknowledgement in its database, so nothing was forgotten; acknowledge again later (the daemon's log says why)", id: rid)), flush: false)
        } catch {
            send(.error(ProtocolError(error.code, error.description, id: rid)), flush: false)
        }
    }
}
