import Storage

/// A small hand-built sales model: BusinessPartners, SalesOrders, SalesOrderItems and Products,
/// a complex `Address` (with a nested complex `Coordinates`), a plain enum and a flags enum.
enum TestSchema {
    static let status = EnumType(
        name: "Status", qualifiedName: "Sales.Status",
        members: [("New", 0), ("Open", 1), ("Closed", 2)])
    static let flags = EnumType(
        name: "Flags", qualifiedName: "Sales.Flags", isFlags: true,
        members: [("Red", 1), ("Green", 2), ("Blue", 4)])

    static let coordinates = ComplexType(
        name: "Coordinates", qualifiedName: "Sales.Coordinates",
        properties: [
            Property(name: "Lat", type: .primitive(.double)),
            Property(name: "Lon", type: .primitive(.double)),
        ])
    static let address = ComplexType(
        name: "Address", qualifiedName: "Sales.Address",
        properties: [
            Property(name: "Street", type: .primitive(.string)),
            Property(name: "City", type: .primitive(.string)),
            Property(name: "PostalCode", type: .primitive(.string)),
            Property(name: "Location", type: .complex("Sales.Coordinates")),
        ])

    static let partner = EntityType(
        name: "BusinessPartner", qualifiedName: "Sales.BusinessPartner", key: ["BusinessPartnerID"],
        properties: [
            Property(name: "BusinessPartnerID", type: .primitive(.string), nullable: false),
            Property(name: "CompanyName", type: .primitive(.string)),
            Property(name: "Country", type: .primitive(.string)),
            Property(name: "Rating", type: .primitive(.int32)),
            Property(name: "CreditLimit", type: .primitive(.decimal)),
            Property(name: "Address", type: .complex("Sales.Address")),
            Property(name: "Addresses", type: .collection(.complex("Sales.Address"))),
            Property(name: "Emails", type: .collection(.primitive(.string))),
            Property(name: "CreatedAt", type: .primitive(.dateTimeOffset)),
            Property(name: "Status", type: .enumeration("Sales.Status")),
            Property(name: "Flags", type: .enumeration("Sales.Flags")),
            Property(name: "Active", type: .primitive(.boolean)),
        ],
        navigationProperties: [
            NavigationProperty(
                name: "SalesOrders", targetType: "Sales.SalesOrder", isCollection: true, partner: "BusinessPartner",
                principalConstraints: [
                    ReferentialConstraint(property: "BusinessPartnerID", referencedProperty: "BusinessPartnerID")
                ])
        ])

    static let order = EntityType(
        name: "SalesOrder", qualifiedName: "Sales.SalesOrder", key: ["SalesOrderID"],
        properties: [
            Property(name: "SalesOrderID", type: .primitive(.string), nullable: false),
            Property(name: "BusinessPartnerID", type: .primitive(.string)),
            Property(name: "GrossAmount", type: .primitive(.decimal)),
            Property(name: "Currency", type: .primitive(.string)),
            Property(name: "CreatedAt", type: .primitive(.dateTime)),
            Property(name: "DeliveryDate", type: .primitive(.date)),
            Property(name: "Status", type: .enumeration("Sales.Status")),
        ],
        navigationProperties: [
            NavigationProperty(
                name: "BusinessPartner", targetType: "Sales.BusinessPartner", isCollection: false,
                partner: "SalesOrders",
                dependentConstraints: [
                    ReferentialConstraint(property: "BusinessPartnerID", referencedProperty: "BusinessPartnerID")
                ]),
            NavigationProperty(
                name: "Items", targetType: "Sales.SalesOrderItem", isCollection: true, partner: "SalesOrder"),
        ])

    static let item = EntityType(
        name: "SalesOrderItem", qualifiedName: "Sales.SalesOrderItem", key: ["SalesOrderID", "ItemPosition"],
        properties: [
            Property(name: "SalesOrderID", type: .primitive(.string), nullable: false),
            Property(name: "ItemPosition", type: .primitive(.int32), nullable: false),
            Property(name: "ProductID", type: .primitive(.string)),
            Property(name: "Quantity", type: .primitive(.int32)),
            Property(name: "NetAmount", type: .primitive(.decimal)),
            Property(name: "Weight", type: .primitive(.double)),
            Property(name: "DeliveryTime", type: .primitive(.timeOfDay)),
        ],
        navigationProperties: [
            NavigationProperty(
                name: "SalesOrder", targetType: "Sales.SalesOrder", isCollection: false, partner: "Items"),
            NavigationProperty(name: "Product", targetType: "Sales.Product", isCollection: false),
        ])

    static let product = EntityType(
        name: "Product", qualifiedName: "Sales.Product", key: ["ProductID"],
        properties: [
            Property(name: "ProductID", type: .primitive(.string), nullable: false),
            Property(name: "Name", type: .primitive(.string)),
            Property(name: "Price", type: .primitive(.decimal)),
            Property(name: "Stock", type: .primitive(.int64)),
            Property(name: "Rank", type: .primitive(.int16)),
            Property(name: "Level", type: .primitive(.byte)),
            Property(name: "Width", type: .primitive(.single)),
            Property(name: "Guid", type: .primitive(.guid)),
            Property(name: "Picture", type: .primitive(.binary)),
            Property(name: "ShelfLife", type: .primitive(.duration)),
            Property(name: "OpensAt", type: .primitive(.time)),
            Property(name: "Location", type: .primitive(.json)),
        ],
        navigationProperties: [
            NavigationProperty(name: "Supplier", targetType: "Sales.BusinessPartner", isCollection: false)
        ])

    static func make(version: ODataVersion = .v4) -> Schema {
        Schema(
            version: version,
            entityTypes: [
                partner.qualifiedName: partner, order.qualifiedName: order, item.qualifiedName: item,
                product.qualifiedName: product,
            ],
            complexTypes: [address.qualifiedName: address, coordinates.qualifiedName: coordinates],
            enumTypes: [status.qualifiedName: status, flags.qualifiedName: flags],
            entitySets: [
                EntitySet(name: "BusinessPartners", entityType: "Sales.BusinessPartner"),
                EntitySet(name: "SalesOrders", entityType: "Sales.SalesOrder"),
                EntitySet(name: "SalesOrderItems", entityType: "Sales.SalesOrderItem"),
                EntitySet(name: "Products", entityType: "Sales.Product"),
                EntitySet(name: "Me", entityType: "Sales.BusinessPartner", isSingleton: true),
            ])
    }

    static let v4 = make()
    static let v2 = make(version: .v2)
}
