import Dispatch
import Foundation
import Hummingbird
import Logging
import NIOCore
import Synchronization

/// Runs a query that writes its result through a synchronous callback, and hands the result to
/// Hummingbird.
///
/// Most responses are small: the query runs on the calling task and its output is collected, up to
/// `inlineLimit` bytes. A larger one is run again on a thread of its own, streamed in chunks
/// through a queue of at most `depth` chunks: the producer waits while the client is slow, so a
/// million-row response takes bounded memory, and the read transaction stays open only while the
/// response is being written. If the client goes away, the producer stops at its next chunk.
enum ResponseStream {
    static let inlineLimit = 1 << 20
    static let depth = 4

    struct TooLarge: Error {}
    struct ClientGone: Error {}

    /// The output of `produce`, whole if it fits in `inlineLimit` bytes, else nil (produce was
    /// abandoned at the limit). Errors `produce` throws are rethrown.
    static func inline<R>(
        _ produce: (@escaping (UnsafeRawBufferPointer) throws -> Void) throws -> R
    ) throws -> (bytes: [UInt8], result: R)? {
        var out: [UInt8] = []
        let result: R
        do {
            result = try produce { chunk in
                if out.count + chunk.count > inlineLimit { throw TooLarge() }
                out.append(contentsOf: chunk)
            }
        } catch is TooLarge {
            return nil
        }
        return (out, result)
    }

    /// A response body that runs `produce` on a new thread and streams what it writes. Its head is
    /// already sent, so an error of `produce` can only cut the response short: it is logged with
    /// `logger`, so the server's log says why a client saw its response end early.
    static func streamed<R>(
        logger: Logger,
        _ produce: @escaping @Sendable (@escaping (UnsafeRawBufferPointer) throws -> Void) throws -> R
    ) -> ResponseBody {
        ResponseBody { writer in
            let (stream, continuation) = AsyncThrowingStream<ByteBuffer, any Error>.makeStream()
            let credits = DispatchSemaphore(value: depth)
            let gone = Atomic<Bool>(false)
            continuation.onTermination = { _ in
                gone.store(true, ordering: .sequentiallyConsistent)
                for _ in 0...depth { credits.signal() }
            }
            let thread = Thread {
                do {
                    _ = try produce { chunk in
                        credits.wait()
                        if gone.load(ordering: .sequentiallyConsistent) { throw ClientGone() }
                        continuation.yield(ByteBuffer(bytes: chunk))
                    }
                    continuation.finish()
                } catch is ClientGone {
                    continuation.finish()
                } catch {
                    logger.error("a streamed response was cut short: \(error)")
                    continuation.finish(throwing: error)
                }
            }
            thread.stackSize = 4 << 20
            thread.start()
            for try await buffer in stream {
                try await writer.write(buffer)
                credits.signal()
            }
            try await writer.finish(nil)
        }
    }
}
