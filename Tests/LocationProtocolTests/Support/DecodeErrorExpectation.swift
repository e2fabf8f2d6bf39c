import LocationProtocol
import Testing

/// `line` (a request with `"id":1`) is refused with `code`, a message containing `text`, and the
/// request's id, so the client can tell which request failed.
func expectDecodeError(_ line: String, code: ErrorCode, text: String,
                       sourceLocation: SourceLocation = #_sourceLocation) {
    do {
        _ = try Request.decode(line)
        Issue.record("accepted \(line)", sourceLocation: sourceLocation)
    } catch {
        #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
        #expect(error.message.contains(text), "\(error.message)", sourceLocation: sourceLocation)
        #expect(error.id == .number(1), sourceLocation: sourceLocation)
    }
}
