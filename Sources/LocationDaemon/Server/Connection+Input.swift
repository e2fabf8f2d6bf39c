import LocationProtocol
import NIOCore

/// Reading: line framing, and pausing the socket while replies wait to drain or the flood
/// limit holds requests back.
extension Connection {
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !closing else { return }
        var incoming = unwrapInboundIn(data)
        input.writeBuffer(&incoming)
        if busy {
            // Read from inside one of our writes: answered once that handler has returned.
            context.eventLoop.assumeIsolated().execute { [self] in
                if !closing, let context = self.context { handleInput(context: context) }
            }
            return
        }
        handleInput(context: context)
    }

    /// Answers the complete request lines read so far. While the connection is not writable (its
    /// peer does not read its replies) it stops: the rest waits in `input`, and reading from the
    /// socket pauses until the replies drain, so a peer that sends requests and never reads
    /// holds the daemon's memory to the watermarks, not to what it asks for (docs/protocol.md,
    /// "Slow readers"). Requests held back so are then answered at the flood limit's rate
    /// rather than counted as a flood: they arrive together because the daemon held them.
    func handleInput(context: ChannelHandlerContext) {
        let max = configuration.maxLineBytes
        let wasBusy = busy
        busy = true
        defer { busy = wasBusy }
        while !closing && throttle == nil {
            guard context.channel.isWritable else {
                pauseReading(context: context)
                catchingUp = true
                break
            }
            guard let newline = input.readableBytesView.firstIndex(of: 0x0A) else { break }
            let length = newline - input.readerIndex
            guard length <= max + 1 else {  // + 1: a CR before the LF is allowed
                abort(ProtocolError(.lineTooLong, "line of \(length) bytes is longer than \(max) bytes; closing"))
                return
            }
            let blank = input.readableBytesView[input.readerIndex..<newline].allSatisfy { $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }
            if !blank && !takeToken() {
                guard catchingUp else {
                    abort(ProtocolError(.flood, "more than \(configuration.floodBurst) requests at once or \(JSONWriter.numberText(configuration.floodRate)) per second sustained; closing"))
                    return
                }
                throttleInput(context: context)
                break
            }
            var line = input.readBytes(length: length) ?? []
            input.moveReaderIndex(forwardBy: 1)
            if line.last == 0x0D { line.removeLast() }
            guard line.count <= max else {
                abort(ProtocolError(.lineTooLong, "line of \(line.count) bytes is longer than \(max) bytes; closing"))
                return
            }
            if blank { continue }  // blank lines are ignored
            handleLine(line)
        }
        // The next line, complete or not, must fit.
        let next = input.readableBytesView.firstIndex(of: 0x0A).map { $0 - input.readerIndex } ?? input.readableBytes
        if !closing && next > max + 1 {
            abort(ProtocolError(.lineTooLong, "line longer than \(max) bytes; closing"))
            return
        }
        if input.readerIndex > 4096 { input.discardReadBytes() }
        context.flush()
    }

    /// The socket has no more to read for now: if every request read is answered and reading is
    /// not paused, the connection has caught up with what a pause held back.
    func channelReadComplete(context: ChannelHandlerContext) {
        if catchingUp && !readingPaused && throttle == nil && input.readableBytesView.firstIndex(of: 0x0A) == nil {
            catchingUp = false
        }
        context.fireChannelReadComplete()
    }

    func pauseReading(context: ChannelHandlerContext) {
        guard !readingPaused else { return }
        readingPaused = true
        try? context.channel.syncOptions?.setOption(ChannelOptions.autoRead, value: false)
    }

    /// Answers what waited and reads again, unless the connection is still not writable or
    /// waits for a token. Called as a task of its own, never inside another handler's call
    /// (a write that drains the socket can make the connection writable inside the hub's
    /// delivery loop, and requests must not be handled there).
    func resumeInput() {
        guard let context, !closing, readingPaused, throttle == nil, context.channel.isWritable else { return }
        readingPaused = false
        handleInput(context: context)
        if !readingPaused && !closing {
            try? context.channel.syncOptions?.setOption(ChannelOptions.autoRead, value: true)
        }
    }
}
