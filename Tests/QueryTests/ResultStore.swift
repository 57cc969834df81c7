import LMDB
import Foundation
import TestSupport
@testable import Query
import Storage

/// A small store over `TestSchema` for what the result writer puts around entities. `SalesOrder/Items`
/// gets a referential constraint here, so entities with a composite key can be expanded.
final class ResultStore {
    static let specialKey = "O'Neil \"x\"\\y\tz"

    let dir: String
    let store: EntityStore
    let engine: QueryEngine

    init() throws {
        dir = TestScratch.directory("os-qres")
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        var order = TestSchema.order
        order.navigationProperties = order.navigationProperties.map { nav in
            guard nav.name == "Items" else { return nav }
            return NavigationProperty(
                name: "Items", targetType: "Sales.SalesOrderItem", isCollection: true, partner: "SalesOrder",
                principalConstraints: [
                    ReferentialConstraint(property: "SalesOrderID", referencedProperty: "SalesOrderID")
                ])
        }
        var schema = TestSchema.make()
        schema.entityTypes[order.qualifiedName] = order
        store = try EntityStore(
            environment: try Environment(path: dir, durability: .noSync), schema: schema, metadata: [],
            configuration: StorageSettings())
        engine = QueryEngine(store: store)
        try insert(
            "Products",
            [
                [
                    "ProductID": .string("HT-1000"), "Name": .string("Notebook Basic 15"),
                    "Price": .decimal(EDMDecimal(956)),
                ],
                [
                    "ProductID": .string("HT-1001"), "Name": .string("Notebook Basic 17"),
                    "Price": .decimal(EDMDecimal(1249)),
                ],
                [
                    "ProductID": .string("HT-1002"), "Name": .string("Notebook Basic 18"),
                    "Price": .decimal(EDMDecimal(1570)),
                ],
                ["ProductID": .string(Self.specialKey), "Name": .string("Odd"), "Price": .decimal(EDMDecimal(1))],
            ])
        try insert(
            "BusinessPartners",
            [
                ["BusinessPartnerID": .string("0100000000"), "CompanyName": .string("SAP"), "Country": .string("DE")],
                [
                    "BusinessPartnerID": .string("0100000001"), "CompanyName": .string("Becker Berlin"),
                    "Country": .string("US"),
                ],
            ])
        try insert(
            "SalesOrders",
            [
                ["SalesOrderID": .string("0500000000"), "BusinessPartnerID": .string("0100000000")],
                ["SalesOrderID": .string("0500000001"), "BusinessPartnerID": .string("0100000001")],
            ])
        try insert(
            "SalesOrderItems",
            [
                [
                    "SalesOrderID": .string("0500000000"), "ItemPosition": .int(10), "ProductID": .string("HT-1000"),
                    "Quantity": .int(2),
                ],
                [
                    "SalesOrderID": .string("0500000000"), "ItemPosition": .int(20), "ProductID": .string("HT-1001"),
                    "Quantity": .int(3),
                ],
                [
                    "SalesOrderID": .string("0500000001"), "ItemPosition": .int(10), "ProductID": .string("HT-1002"),
                    "Quantity": .int(1),
                ],
            ])
    }

    deinit { try? FileManager.default.removeItem(atPath: dir) }

    func insert(_ set: String, _ entities: [Properties]) throws {
        let store = self.store
        try store.write { t in
            for e in entities { try store.set(set).insert(t, e) }
        }
    }

    func merge(_ set: String, key: [Value], _ changes: Properties) throws {
        let store = self.store
        try store.write { t in _ = try store.set(set).merge(t, key: key, changes) }
    }

    func delete(_ set: String, key: [Value]) throws {
        let store = self.store
        try store.write { t in _ = try store.set(set).delete(t, key: key) }
    }

    /// The response to `url` as text.
    func text(
        _ url: String, format: QueryEngine.Format = .json, pageSize: Int? = nil,
        options: ResultOptions = ResultOptions()
    ) throws -> String {
        var text = ""
        try engine.execute(url, format: format, pageSize: pageSize, options: options, write: { text += $0 })
        return text
    }

    func json(_ url: String, pageSize: Int? = nil, options: ResultOptions = ResultOptions()) throws -> JSON {
        try JSON.parse(try text(url, pageSize: pageSize, options: options))
    }

    func delta(_ url: String, _ keys: [[Value]], options: ResultOptions = ResultOptions()) throws -> String {
        var text = ""
        try engine.delta(
            url, changed: keys, options: options, writeBytes: { text += String(decoding: $0, as: UTF8.self) })
        return text
    }

    /// `EntityTag.of(row:)` of the stored row, read directly.
    func rowTag(_ set: String, _ key: [Value]) throws -> String? {
        let handle = try store.set(set)
        let keyBytes = try handle.encodeKey(key)
        return try store.read { t in try handle.row(t, key: keyBytes).map { EntityTag.of(row: $0) } }
    }
}

extension JSON {
    /// The entities of a collection response.
    var entities: [JSON] {
        if case .array(let a)? = self["value"] { return a }
        return []
    }

    /// An object's member names, in order.
    var names: [String] {
        if case .object(let pairs) = self { return pairs.map(\.0) }
        return []
    }

    var text: String? {
        if case .string(let s) = self { return s }
        return nil
    }
}
