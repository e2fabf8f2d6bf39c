import CMosquitto
import Glibc
import OwnTracks
import Synchronization

/// What libmosquitto's network thread reports, in order.
enum MQTTEvent: Sendable {
    /// CONNACK; `code` 0 is success, otherwise the broker's refusal.
    case connected(code: Int32)
    /// The connection ended (`code` 0: asked for); libmosquitto reconnects by itself.
    case disconnected(code: Int32)
    /// The broker acknowledged (PUBACK) the message with this id.
    case published(mid: Int32)
    case message(topic: String, payload: [UInt8])
}

struct MQTTFailure: Error, CustomStringConvertible {
    var description: String
    init(_ what: String, _ rc: Int32) {
        description = "\(what): \(String(cString: mosquitto_strerror(rc)))"
    }
    init(_ description: String) { self.description = description }
}

/// One libmosquitto client with its own network thread (`mosquitto_loop_start`), which
/// connects, reconnects after 1, 4, 9, 16 … s, at most 60 s (libmosquitto's back-off), and
/// resends unacknowledged QoS 1 messages after a reconnect. Its callbacks only hand events to `events`.
///
/// From the disconnect callback until its owner has handled that `.disconnected`
/// (`disconnectHandled()`), `publish` refuses: libmosquitto resends what was in flight only
/// after the next CONNACK, and sends a message handed to it before then at once, ahead of
/// them; the owner decides what goes first only once it knows of the disconnect.
final class MQTTClient: @unchecked Sendable {
    private let handle: OpaquePointer
    private let sink: Unmanaged<Sink>
    let events: AsyncStream<MQTTEvent>

    final class Sink: Sendable {
        let continuation: AsyncStream<MQTTEvent>.Continuation
        /// `.disconnected` events reported and not yet handled by the owner; `publish` refuses
        /// while there is one. One lock with the publish, so that a message is either handed
        /// to libmosquitto before the disconnect is reported, or refused.
        let unhandledDisconnects = Mutex(0)
        init(_ c: AsyncStream<MQTTEvent>.Continuation) { continuation = c }

        func disconnected(code: Int32) {
            unhandledDisconnects.withLock { $0 += 1 }
            continuation.yield(.disconnected(code: code))
        }
    }

    struct Options {
        var clientID: String
        var host: String
        var port: Int
        var keepalive: Int
        var username: String?
        var password: String?
        var caFile: String?
        var certFile: String?
        var keyFile: String?
        var will: OutgoingMessage
    }

    init(_ o: Options) throws {
        mosquitto_lib_init()
        let (stream, continuation) = AsyncStream<MQTTEvent>.makeStream()
        events = stream
        sink = Unmanaged.passRetained(Sink(continuation))
        // clean_session false: the broker keeps the session, so commands sent while the device
        // was away arrive when it is back (OwnTracks: "send with QoS > 0").
        guard let h = mosquitto_new(o.clientID, false, sink.toOpaque()) else {
            sink.release()
            throw MQTTFailure("mosquitto_new failed (client id \(o.clientID))")
        }
        handle = h
        var rc = mosquitto_int_option(h, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V311)
        guard rc == MOSQ_ERR_SUCCESS.rawValue else { throw MQTTFailure("protocol version", rc) }
        rc = o.will.payload.withUnsafeBytes {
            mosquitto_will_set(h, o.will.topic, Int32($0.count), $0.baseAddress, 1, o.will.retain)
        }
        guard rc == MOSQ_ERR_SUCCESS.rawValue else { throw MQTTFailure("last will", rc) }
        if let user = o.username {
            rc = mosquitto_username_pw_set(h, user, o.password)
            guard rc == MOSQ_ERR_SUCCESS.rawValue else { throw MQTTFailure("username", rc) }
        }
        if let ca = o.caFile {
            rc = mosquitto_tls_set(h, ca, nil, o.certFile, o.keyFile, nil)
            guard rc == MOSQ_ERR_SUCCESS.rawValue else { throw MQTTFailure("TLS (ca_file \(ca))", rc) }
        }
        _ = mosquitto_reconnect_delay_set(h, 1, 60, true)
        mosquitto_connect_callback_set(h) { _, user, code in
            MQTTClient.sink(user)?.continuation.yield(.connected(code: code))
        }
        mosquitto_disconnect_callback_set(h) { _, user, code in
            MQTTClient.sink(user)?.disconnected(code: code)
        }
        mosquitto_publish_callback_set(h) { _, user, mid in
            MQTTClient.sink(user)?.continuation.yield(.published(mid: mid))
        }
        mosquitto_message_callback_set(h) { _, user, message in
            guard let m = message?.pointee else { return }
            let topic = m.topic.map { String(cString: $0) } ?? ""
            let bytes = m.payload.map { Array(UnsafeRawBufferPointer(start: $0, count: Int(m.payloadlen))) } ?? []
            MQTTClient.sink(user)?.continuation.yield(.message(topic: topic, payload: bytes))
        }
        // The thread first: connect_async then only starts the connection, and the thread
        // reports a broker that is down and retries it. Started after, it would find a refused
        // connection's client reset to new and wait for a connect forever.
        rc = mosquitto_loop_start(h)
        guard rc == MOSQ_ERR_SUCCESS.rawValue else { throw MQTTFailure("loop start", rc) }
        let connect = mosquitto_connect_async(h, o.host, Int32(o.port), Int32(o.keepalive))
        if connect != MOSQ_ERR_SUCCESS.rawValue && connect != MOSQ_ERR_ERRNO.rawValue {
            throw MQTTFailure("connect \(o.host):\(o.port)", connect)
        }
        // No socket at all (the thread retries it without a callback).
        if connect == MOSQ_ERR_ERRNO.rawValue { sink.takeUnretainedValue().disconnected(code: connect) }
    }

    private static func sink(_ user: UnsafeMutableRawPointer?) -> Sink? {
        user.map { Unmanaged<Sink>.fromOpaque($0).takeUnretainedValue() }
    }

    /// Hands `m` to the client at QoS 1; returns its message id, or nil when a disconnect is
    /// not handled yet (nothing was handed: publish it again after the reconnect).
    func publish(_ m: OutgoingMessage) throws -> Int32? {
        var mid: Int32 = 0
        let rc: Int32? = sink.takeUnretainedValue().unhandledDisconnects.withLock { unhandled in
            guard unhandled == 0 else { return nil }
            return m.payload.withUnsafeBytes {
                mosquitto_publish(handle, &mid, m.topic, Int32($0.count), $0.baseAddress, 1, m.retain)
            }
        }
        guard let rc else { return nil }
        // MOSQ_ERR_NO_CONN: no socket (closed before the disconnect callback ran, or between
        // connections). libmosquitto queued the message all the same and sends it once
        // connected: it is in flight, not to be published again.
        guard rc == MOSQ_ERR_SUCCESS.rawValue || rc == MOSQ_ERR_NO_CONN.rawValue else {
            throw MQTTFailure("publish to \(m.topic)", rc)
        }
        return mid
    }

    /// The owner has handled one `.disconnected` event (what was in flight goes first after
    /// the reconnect); `publish` takes messages again once every reported one is handled.
    func disconnectHandled() {
        sink.takeUnretainedValue().unhandledDisconnects.withLock { $0 = max(0, $0 - 1) }
    }

    func subscribe(_ topic: String) throws {
        let rc = mosquitto_subscribe(handle, nil, topic, 1)
        guard rc == MOSQ_ERR_SUCCESS.rawValue else { throw MQTTFailure("subscribe \(topic)", rc) }
    }

    /// Disconnects (the broker then does not publish the last will) and stops the thread.
    func stop() {
        _ = mosquitto_disconnect(handle)
        _ = mosquitto_loop_stop(handle, false)
        sink.takeUnretainedValue().continuation.finish()
    }

    deinit {
        mosquitto_destroy(handle)
        sink.release()
    }

    static func describe(connack code: Int32) -> String { String(cString: mosquitto_connack_string(code)) }
    static func describe(error code: Int32) -> String { String(cString: mosquitto_strerror(code)) }
}
