import Foundation
import Hummingbird
import OfflineStore

/// The HTTP routes: reads answered from the local store, a price change queued for the next flush.
struct Routes: Sendable {
    let store: OfflineStore
    let products: EntityCollection<Product>
    let prices: EntityCollection<ProductPrice>
    let sync: SyncService

    func add(to router: Router<BasicRequestContext>) {
        // GET /products, or with OData options: /products?filter=Price gt 1000&orderby=Price desc&top=5
        router.get("products") { request, _ in
            let options = ["filter", "orderby", "top", "skip"].compactMap { name in
                request.uri.queryParameters[Substring(name)].map { "$\(name)=\($0)" }
            }
            let found = try options.isEmpty ? products.findAll() : products.query(options.joined(separator: "&"))
            return try json(found)
        }
        router.get("products/:id") { _, context in
            let id = try context.parameters.require("id")
            guard let product = try products.find(key: id) else {
                throw HTTPError(.notFound, message: "no product \(id)")
            }
            return try json(product)
        }
        // POST /products/:id/price {"price": "1234.50"}: a typed update, queued; the background flush sends it.
        router.post("products/:id/price") { request, context in
            let id = try context.parameters.require("id")
            let body = try await request.body.collect(upTo: 64 << 10)
            let change: PriceChange
            do { change = try JSONDecoder().decode(PriceChange.self, from: Data(body.readableBytesView)) } catch {
                throw HTTPError(.badRequest, message: #"expected {"price": "<decimal>"}: \#(error)"#)
            }
            guard try prices.find(key: id) != nil else { throw HTTPError(.notFound, message: "no product \(id)") }
            let receipt: OfflineStore.ChangeReceipt
            do { receipt = try await prices.update(ProductPrice(ProductID: id, Price: change.price)) } catch {
                // out of the schema's range or scale: nothing changed
                throw HTTPError(.badRequest, message: "\(error)")
            }
            return try json(Queued(product: try products.find(key: id), requestID: receipt.requestID))
        }
        router.get("status") { _, _ in
            let s = sync.status
            let events = try store.entities("EventLog?$orderby=EventID desc&$top=5").map { e in
                try JSONSerialization.jsonObject(with: Data(try store.json(set: "EventLog", entity: e).utf8))
            }
            let status: [String: Any] = [
                "state": store.lifecycle.current.state.rawValue,
                "lifecycle": store.lifecycle.current.description,
                "pendingRequests": try store.pendingRequestCount(),
                "rounds": s.rounds,
                "failures": s.failures,
                "lastRefresh": s.lastRefresh.map { "\($0)" } ?? NSNull(),
                "lastFlush": s.lastFlush.map { "\($0)" } ?? NSNull(),
                "lastError": s.lastError ?? NSNull(),
                "events": events,
            ]
            return response(try JSONSerialization.data(withJSONObject: status, options: [.sortedKeys]))
        }
    }
}

/// The body of `POST /products/:id/price`: the price as a JSON string (exact) or number.
struct PriceChange: Decodable {
    var price: Decimal
    enum CodingKeys: CodingKey { case price }
    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        if let text = try? c.decode(String.self, forKey: .price) {
            guard let value = Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")), "\(value)" != "NaN"
            else {
                throw DecodingError.dataCorruptedError(
                    forKey: .price, in: c, debugDescription: "'\(text)' is not a decimal")
            }
            price = value
        } else {
            price = try c.decode(Decimal.self, forKey: .price)
        }
    }
}

struct Queued: Encodable {
    var product: Product?
    var requestID: Int64?
}

func json(_ value: some Encodable) throws -> Response {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys]
    return response(try encoder.encode(value))
}

func response(_ data: Data) -> Response {
    Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: data)))
}
