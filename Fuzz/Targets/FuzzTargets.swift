import Query
import Samples
import Server
import Storage

/// The inputs a hostile peer controls, each behind one function that must never crash, trap or
/// hang: it may only return (an error is a result). `offline-store-fuzz` runs them under
/// libFuzzer (`scripts/fuzz.sh`); `FuzzCorpusTests` runs the committed corpus through them in
/// every `swift test`.
public enum FuzzTargets {
    public static let names = ["url", "row", "json", "csdl", "batch"]

    /// Runs target `name` on `data`. Unknown names do nothing.
    public static func run(_ name: String, _ data: UnsafeRawBufferPointer) {
        switch name {
        case "url": url(data)
        case "row": row(data)
        case "json": json(data)
        case "csdl": csdl(data)
        case "batch": batch(data)
        default: break
        }
    }

    static let schema: Schema = {
        do { return try CSDL.parse(Array(SampleData.metadata.utf8)).withSystemSets() } catch { fatalError("the sample $metadata does not parse: \(error)") }
    }()

    /// An OData request URL (resource path and every query option), parsed and bound against the
    /// sample schema.
    static func url(_ data: UnsafeRawBufferPointer) {
        let text = String(decoding: data, as: UTF8.self)
        _ = try? Binder(schema: schema).bind(text)
        _ = try? Binder(schema: schema).bind(text, serviceRoot: "http://127.0.0.1:8080/")
    }

    /// Stored row bytes (a damaged or hostile `data.mdb` value), decoded as each entity type.
    static func row(_ data: UnsafeRawBufferPointer) {
        for name in ["Products", "SalesOrderItems", "BusinessPartners", "RequestQueue"] {
            guard let type = schema.entityType(ofSet: name) else { continue }
            _ = try? RowCodec(schema: schema, entityType: type).decode(data)
        }
    }

    /// A request or load body: JSON parsed, then read as an entity of a set and as a PATCH body.
    static func json(_ data: UnsafeRawBufferPointer) {
        guard let json = try? JSON.parse(Array(data)) else { return }
        let values = ValueJSON(schema: schema)
        for name in ["Products", "SalesOrderItems", "BusinessPartners"] {
            guard let type = schema.entityType(ofSet: name) else { continue }
            let navigation = Set(type.navigationProperties.map(\.name))
            _ = try? values.properties(from: json, properties: type.properties, navigation: navigation, owner: name)
            if case .array(let items)? = json["value"] {
                for item in items.prefix(64) {
                    _ = try? values.properties(from: item, properties: type.properties, navigation: navigation, owner: name)
                }
            }
        }
    }

    /// A `$metadata` document (CSDL XML).
    static func csdl(_ data: UnsafeRawBufferPointer) {
        guard let schema = try? CSDL.parse(Array(data)) else { return }
        _ = try? schema.checkStorable(indexCount: 0)
        _ = try? schema.withSystemSets()
    }

    /// A JSON `$batch` document, as `serve` reads it before running anything.
    static func batch(_ data: UnsafeRawBufferPointer) {
        _ = try? BatchDocument.parse(Array(data))
    }
}
