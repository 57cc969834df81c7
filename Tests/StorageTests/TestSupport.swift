import LMDB
import Foundation
@_exported import TestSupport
@testable import Storage

/// A fresh temporary directory, removed when the test process exits (`TestScratch`).
func temporaryDirectory() -> String { TestScratch.directory("offline-store-test") }

/// A hand-built EPM-like schema: business partners, sales orders, items (composite key), products.
enum Fixtures {
    static let ns = "EPM"
    static var schema: Schema {
        let address = ComplexType(
            name: "Address", qualifiedName: "EPM.Address",
            properties: [
                Property(name: "City", type: .primitive(.string), maxLength: 40),
                Property(name: "Country", type: .primitive(.string), maxLength: 3),
            ])
        let status = EnumType(
            name: "Status", qualifiedName: "EPM.Status", members: [("New", 0), ("Paid", 1), ("Shipped", 2)])
        let partner = EntityType(
            name: "BusinessPartner", qualifiedName: "EPM.BusinessPartner", key: ["PartnerID"],
            properties: [
                Property(name: "PartnerID", type: .primitive(.string), nullable: false, maxLength: 10),
                Property(name: "CompanyName", type: .primitive(.string), nullable: false, maxLength: 80),
                Property(name: "Country", type: .primitive(.string), maxLength: 3),
                Property(name: "Address", type: .complex("EPM.Address")),
                Property(name: "Emails", type: .collection(.primitive(.string))),
            ],
            navigationProperties: [
                NavigationProperty(
                    name: "SalesOrders", targetType: "EPM.SalesOrder", isCollection: true, partner: "Partner",
                    principalConstraints: [
                        ReferentialConstraint(property: "PartnerID", referencedProperty: "PartnerID")
                    ])
            ])
        let order = EntityType(
            name: "SalesOrder", qualifiedName: "EPM.SalesOrder", key: ["SalesOrderID"],
            properties: [
                Property(name: "SalesOrderID", type: .primitive(.string), nullable: false, maxLength: 10),
                Property(name: "PartnerID", type: .primitive(.string), maxLength: 10),
                Property(name: "GrossAmount", type: .primitive(.decimal), precision: 15, scale: 3),
                Property(name: "CreatedAt", type: .primitive(.dateTimeOffset)),
                Property(name: "Status", type: .enumeration("EPM.Status")),
            ],
            navigationProperties: [
                NavigationProperty(
                    name: "Partner", targetType: "EPM.BusinessPartner", isCollection: false, partner: "SalesOrders",
                    dependentConstraints: [
                        ReferentialConstraint(property: "PartnerID", referencedProperty: "PartnerID")
                    ]),
                NavigationProperty(
                    name: "Items", targetType: "EPM.SalesOrderItem", isCollection: true, partner: "SalesOrder",
                    principalConstraints: [
                        ReferentialConstraint(property: "SalesOrderID", referencedProperty: "SalesOrderID")
                    ]),
            ])
        let item = EntityType(
            name: "SalesOrderItem", qualifiedName: "EPM.SalesOrderItem", key: ["SalesOrderID", "ItemPosition"],
            properties: [
                Property(name: "SalesOrderID", type: .primitive(.string), nullable: false, maxLength: 10),
                Property(name: "ItemPosition", type: .primitive(.int32), nullable: false),
                Property(name: "ProductID", type: .primitive(.string), maxLength: 10),
                Property(name: "Quantity", type: .primitive(.int32)),
                Property(name: "NetAmount", type: .primitive(.decimal), precision: 15, scale: 3),
                Property(name: "DeliveryDate", type: .primitive(.date)),
                Property(name: "Weight", type: .primitive(.double)),
                Property(name: "Note", type: .primitive(.string)),
            ],
            navigationProperties: [
                NavigationProperty(
                    name: "SalesOrder", targetType: "EPM.SalesOrder", isCollection: false, partner: "Items",
                    dependentConstraints: [
                        ReferentialConstraint(property: "SalesOrderID", referencedProperty: "SalesOrderID")
                    ])
            ])
        return Schema(
            version: .v4,
            entityTypes: [partner.qualifiedName: partner, order.qualifiedName: order, item.qualifiedName: item],
            complexTypes: [address.qualifiedName: address], enumTypes: [status.qualifiedName: status],
            entitySets: [
                EntitySet(
                    name: "BusinessPartners", entityType: "EPM.BusinessPartner",
                    navigationBindings: ["SalesOrders": "SalesOrders"]),
                EntitySet(
                    name: "SalesOrders", entityType: "EPM.SalesOrder",
                    navigationBindings: ["Partner": "BusinessPartners", "Items": "SalesOrderItems"]),
                EntitySet(
                    name: "SalesOrderItems", entityType: "EPM.SalesOrderItem",
                    navigationBindings: ["SalesOrder": "SalesOrders"]),
            ])
    }

    static func openStore(
        _ dir: String, indexes: [String: [String]] = [:], mapSize: Int = 1 << 26
    ) throws -> EntityStore {
        let env = try Environment(path: dir, durability: .noSync, mapSize: mapSize)
        return try EntityStore(
            environment: env, schema: schema, metadata: [], configuration: StorageSettings(indexes: indexes))
    }
}

/// Runs the integrity check; every test that writes ends with it.
func expectConsistent(_ store: EntityStore) throws -> IntegrityReport {
    let report = try store.check()
    if !report.isConsistent { Issue.record("integrity check failed:\n\(report)") }
    return report
}

import Testing
