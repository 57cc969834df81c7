import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1

/// Hummingbird's HTTP/1.1 child channel (`HTTP1Channel`), with the bounds a hostile client needs.
///
/// The pipeline is `HTTP1Channel`'s — NIO's HTTP/1 decoder and encoder, the HTTPTypes codec,
/// Hummingbird's `HTTPConnectionStateHandler` (the idle timeout, graceful shutdown) and its request
/// loop (`handleHTTP`) — with two handlers of ours: `ConnectionGuard.Bytes` before the decoder
/// notices the first byte of a request, and `ConnectionGuard` after it bounds the request's head
/// (header timeout), the whole request (request timeout) and the writing of its response (write
/// timeout), and closes the connection after the answer to a request that does not keep it alive
/// (HTTP/1.0 without `Connection: keep-alive`, or `Connection: close`).
struct GuardedHTTP1Channel: ServerChildChannel, HTTPChannelHandler {
    typealias Value = NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>

    let responder: HTTPChannelHandler.Responder
    let limits: ConnectionGuard.Limits

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            let guarding = ConnectionGuard(limits: limits, logger: logger)
            let pipeline = channel.pipeline.syncOperations
            try pipeline.addHandler(ConnectionGuard.Bytes(guarding))
            try pipeline.configureHTTPServerPipeline(
                withPipeliningAssistance: false, withErrorHandling: false, withOutboundHeaderValidation: false,
                withEncoderConfiguration: .init(), withDecoderLimitConfiguration: .init())
            try pipeline.addHandler(guarding)
            try pipeline.addHandler(HTTP1ToHTTPServerCodec(secure: false))
            try pipeline.addHandler(
                HTTPConnectionStateHandler(idleTimeout: limits.idle.map(Duration.init), logger: logger))
            return try NIOAsyncChannel(
                wrappingChannelSynchronously: channel, configuration: .init(isOutboundHalfClosureEnabled: true))
        }
    }

    func handle(value asyncChannel: Value, logger: Logger) async {
        await handleHTTP(asyncChannel: asyncChannel, logger: logger)
    }
}

/// Bounds one connection's requests and responses in time (see `GuardedHTTP1Channel`). Lives on
/// the connection's event loop: every method is called there.
final class ConnectionGuard: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    struct Limits: Sendable {
        /// From a request's first byte until its head is complete.
        var header: TimeAmount?
        /// From a request's first byte until its body is complete.
        var request: TimeAmount?
        /// From a response's head until its end is written (a slow reader holds a read snapshot).
        var write: TimeAmount?
        /// No request in progress and no byte received (Hummingbird's idle timeout).
        var idle: TimeAmount?
    }

    /// Notices the bytes of a new request before the HTTP decoder has a head to show.
    final class Bytes: ChannelInboundHandler, RemovableChannelHandler {
        typealias InboundIn = ByteBuffer
        typealias InboundOut = ByteBuffer
        let guarding: ConnectionGuard
        init(_ guarding: ConnectionGuard) { self.guarding = guarding }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guarding.bytesArrived()
            context.fireChannelRead(data)
        }
    }

    private enum Reading { case between, head, body }

    private let limits: Limits
    private let logger: Logger
    private var context: ChannelHandlerContext?
    private var reading = Reading.between
    private var responding = false
    private var keepAlive = true
    private var headerTimer: Scheduled<Void>?
    private var requestTimer: Scheduled<Void>?
    private var writeTimer: Scheduled<Void>?

    init(limits: Limits, logger: Logger) {
        self.limits = limits
        self.logger = logger
    }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func handlerRemoved(context: ChannelHandlerContext) {
        cancelTimers()
        self.context = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        cancelTimers()
        context.fireChannelInactive()
    }

    /// The first byte of a request starts its header and request clocks.
    func bytesArrived() {
        guard reading == .between else { return }
        reading = .head
        headerTimer = schedule(limits.header, "its head was not complete within the header timeout")
        requestTimer = schedule(limits.request, "it was not complete within the request timeout")
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            headerTimer?.cancel()
            headerTimer = nil
            if reading == .between {
                // Its bytes came with the end of the previous request: the clock starts now.
                requestTimer = schedule(limits.request, "it was not complete within the request timeout")
            }
            reading = .body
            keepAlive = head.isKeepAlive
        case .body:
            break
        case .end:
            requestTimer?.cancel()
            requestTimer = nil
            reading = .between
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(var head):
            responding = true
            if writeTimer == nil {
                writeTimer = schedule(limits.write, "its response was not written within the write timeout")
            }
            if !keepAlive { head.headers.replaceOrAdd(name: "Connection", value: "close") }
            context.write(wrapOutboundOut(.head(head)), promise: promise)
        case .body:
            context.write(data, promise: promise)
        case .end:
            responding = false
            writeTimer?.cancel()
            writeTimer = nil
            guard !keepAlive else {
                context.write(data, promise: promise)
                return
            }
            // HTTP/1.0 without keep-alive, or `Connection: close`: the answer, then the end.
            let done = context.eventLoop.makePromise(of: Void.self)
            done.futureResult.cascade(to: promise)
            let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
            done.futureResult.whenComplete { _ in loopBound.value.close(promise: nil) }
            context.writeAndFlush(data, promise: done)
        }
    }

    private func schedule(_ limit: TimeAmount?, _ reason: String) -> Scheduled<Void>? {
        guard let limit, let context else { return nil }
        return context.eventLoop.assumeIsolated().scheduleTask(in: limit) { [weak self] in
            self?.expire(reason)
        }
    }

    private func expire(_ reason: String) {
        guard let context, context.channel.isActive else { return }
        logger.info(
            "closing the connection from \(context.channel.remoteAddress?.description ?? "?"): \(reason)")
        cancelTimers()
        if !responding && reading != .between {
            // Nothing answered yet: say why (408), then close.
            responding = true
            var headers = HTTPHeaders()
            headers.add(name: "Connection", value: "close")
            headers.add(name: "Content-Length", value: "0")
            context.write(
                wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .requestTimeout, headers: headers))),
                promise: nil)
            let done = context.eventLoop.makePromise(of: Void.self)
            let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
            done.futureResult.whenComplete { _ in loopBound.value.close(promise: nil) }
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: done)
            // A client that reads nothing cannot keep it open: close after a second regardless.
            context.eventLoop.assumeIsolated().scheduleTask(in: .seconds(1)) {
                loopBound.value.close(promise: nil)
            }
        } else {
            context.close(promise: nil)
        }
    }

    private func cancelTimers() {
        for timer in [headerTimer, requestTimer, writeTimer] { timer?.cancel() }
        (headerTimer, requestTimer, writeTimer) = (nil, nil, nil)
    }
}
