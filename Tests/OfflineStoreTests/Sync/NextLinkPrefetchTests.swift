import TestSupport
import Foundation
import Remote
import Synchronization
import Testing
@testable import OfflineStore
import Samples
import Storage
import Sync

/// A full read asks for the next page while it parses the last one, the link read from the end of
/// the body (`NextLinkGuess`); the parse's own link decides which answer is read.
@Suite(.checksStores) struct NextLinkPrefetchTests {
    @Test(.runsOffThePool) func theLinkIsTheLastNextLinkMemberAtTheEndOfTheBody() {
        func guess(_ s: String) -> String? { NextLinkGuess.guess(Array(s.utf8)) }
        #expect(guess(#"{"value":[{"A":1}],"@odata.nextLink":"Set?$skiptoken=5"}"#) == "Set?$skiptoken=5")
        // V2 (Gateway): an expanded collection's own __next comes earlier; slashes escaped.
        #expect(
            guess(
                #"{"d":{"results":[{"Items":{"results":[],"__next":"inner"}}],"__next":"http:\/\/h\/S?$skiptoken=1"}}"#)
                == "http://h/S?$skiptoken=1")
        #expect(guess(#"{"value":[{"Items@odata.nextLink":"inner"}],"@odata.nextLink" : "outer"}"#) == "outer")
        #expect(guess(#"{"odata.metadata":"m","value":[],"odata.nextLink":"v40"}"#) == "v40")
        // None, or none that can be read: no guess, and the read goes on page by page.
        #expect(guess(#"{"value":[{"Items@odata.nextLink":"inner"}]}"#) == nil)
        #expect(guess(#"{"value":[{"Name":"\"@odata.nextLink\":\"fake\""}]}"#) == nil)
        #expect(guess(#"{"value":[],"@odata.nextLink":"unterminated"#) == nil)
        #expect(guess(#"{"value":[],"@odata.nextLink":42}"#) == nil)
        #expect(guess("") == nil)
    }

    /// Moves each page's next link before its entities and gives the last entity an annotation of
    /// the same name (which the reader ignores) naming a page that does not exist: every guess is
    /// wrong, and it is asked for.
    struct MisleadingBackend: WrappingBackend {
        let inner: HTTPTransport
        let asked = Log()

        final class Log: Sendable {
            let urls = Mutex<[String]>([])
        }

        func send(_ request: WireRequest) async throws -> WireResponse {
            asked.urls.withLock { $0.append(request.url) }
            var response = try await inner.send(request)
            guard request.method == "GET", response.status == 200 else { return response }
            let body = response.spooled == nil ? response.body : response.head(Int.max)
            var text = String(decoding: body, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            guard let at = text.range(of: #"],"@odata.nextLink":""#, options: .backwards), text.hasSuffix("\"}")
            else { return response }
            let link = String(text[at.upperBound..<text.index(text.endIndex, offsetBy: -2)])
            // The last entity's closing brace, then the annotation, inside it.
            text =
                String(text[..<at.lowerBound].dropLast()) + #","@odata.nextLink":"SalesOrderItems?$skiptoken=bogus"}]}"#
            text = #"{"@odata.nextLink":"\#(link)","# + text.dropFirst()
            response.body = Array(text.utf8)
            response.spooled = nil
            return response
        }
    }

    @Test func aWrongGuessIsAskedForAndDroppedAndTheReadIsWhole() async throws {
        let path = try await ServeTests.sampleStore(items: 300)
        let items = DefiningRequest(name: "Items", url: "SalesOrderItems")
        let misled = try await RefreshTests.offlineStore([items])
        let plain = try await RefreshTests.offlineStore([items])
        try await withServer(path) { _, server in
            let backend = MisleadingBackend(inner: HTTPTransport(serviceRoot: server.url, retries: 0))
            do {
                let report = try await misled.refresh(backend: backend, pageSize: 20)
                let pages = try #require(report.requests.first?.pages)
                #expect(pages > 10, "\(report)")
                let asked = backend.asked.urls.withLock { $0 }
                let bogus = asked.filter { $0.contains("bogus") }.count
                #expect(bogus == pages - 1, "\(asked)")  // every page but the last guessed wrong
                #expect(asked.count == pages + bogus, "\(asked)")  // each real page asked for once
                try await plain.refresh(serviceRoot: server.url, pageSize: 20)
                RefreshTests.expectSame(try RefreshTests.contents(misled), try RefreshTests.contents(plain), "misled")
                #expect(try misled.check().isConsistent)
            } catch {
                Issue.record("\(error)")
            }
            try await backend.inner.shutdown()
        }
    }
}
