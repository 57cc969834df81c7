import Testing
@testable import Storage

@Suite(.runsOffThePool) struct CSDLTests {
    // MARK: V4

    /// Issue 38: which sets the `$metadata` gives concurrency control — V4
    /// `Core.OptimisticConcurrency` inside the set or targeting it, V2 `ConcurrencyMode="Fixed"`
    /// on a property — and which it does not (their updates are last-writer-wins).
    @Test func concurrencyControlIsRead() throws {
        let v4 = try CSDL.parse(CSDLFixtures.v4)
        #expect(v4.declaresConcurrencyControl(ofSet: "Customers"))
        #expect(v4.declaresConcurrencyControl(ofSet: "Orders"))
        #expect(!v4.declaresConcurrencyControl(ofSet: "OrderItems"))
        #expect(!v4.declaresConcurrencyControl(ofSet: "Nope"))
        let v2 = try CSDL.parse(CSDLFixtures.gwsample)
        #expect(v2.entityType(ofSet: "BusinessPartnerSet")?.property("ChangedAt")?.concurrencyToken == true)
        #expect(v2.declaresConcurrencyControl(ofSet: "BusinessPartnerSet"))
        #expect(!v2.declaresConcurrencyControl(ofSet: "SalesOrderSet"))
    }

    @Test func v4TypesAndInheritance() throws {
        let schema = try CSDL.parse(CSDLFixtures.v4)
        #expect(schema.version == .v4)
        #expect(
            Set(schema.entityTypes.keys) == [
                "Demo.Model.Party", "Demo.Model.Customer", "Demo.Model.Order",
                "Demo.Model.OrderItem",
            ])

        let color = try #require(schema.enumTypes["Demo.Types.Color"])
        #expect(color.members.map(\.name) == ["Red", "Green", "Blue", "Black"])
        #expect(color.members.map(\.value) == [0, 1, 10, 11])
        #expect(color.underlying == .int32 && !color.isFlags)
        let access = try #require(schema.enumTypes["Demo.Types.Access"])
        #expect(access.underlying == .byte && access.isFlags && access.value(of: "Write") == 2)

        let geo = try #require(schema.complexTypes["Demo.Types.GeoAddress"])
        #expect(geo.properties.map(\.name) == ["Street", "City", "Position"])
        #expect(geo.property("Position")?.type == .primitive(.json))
        #expect(geo.property("City")?.nullable == false && geo.property("City")?.maxLength == 40)

        let party = try #require(schema.entityTypes["Demo.Model.Party"])
        #expect(party.isAbstract && party.key == ["ID"] && party.baseType == nil)
        #expect(party.property("Name")?.maxLength == nil)
        #expect(party.property("Addresses")?.type == .collection(.complex("Demo.Types.Address")))

        let customer = try #require(schema.entityTypes["Demo.Model.Customer"])
        #expect(customer.name == "Customer" && customer.baseType == "Demo.Model.Party")
        #expect(!customer.isAbstract && customer.isOpen)
        #expect(customer.key == ["ID"])
        #expect(customer.properties.map(\.name) == ["ID", "Name", "Addresses", "Emails", "Favorite", "Rights", "Home"])
        #expect(customer.property("Emails")?.type == .collection(.primitive(.string)))
        #expect(customer.property("Emails")?.nullable == false)
        #expect(customer.property("Favorite")?.type == .enumeration("Demo.Types.Color"))
        #expect(customer.property("Rights")?.type == .enumeration("Demo.Types.Access"))
        #expect(customer.property("Home")?.type == .complex("Demo.Types.GeoAddress"))
        #expect(customer.navigationProperties.map(\.name) == ["Orders"])

        let order = try #require(schema.entityTypes["Demo.Model.Order"])
        #expect(order.property("Total")?.type == .primitive(.decimal))
        #expect(order.property("Total")?.precision == 15 && order.property("Total")?.scale == nil)
        #expect(order.property("Placed")?.precision == 3)
        #expect(order.property("Area")?.type == .primitive(.json))

        let item = try #require(schema.entityTypes["Demo.Model.OrderItem"])
        #expect(item.key == ["OrderID", "Line"])
        #expect(item.property("Amount")?.precision == 12 && item.property("Amount")?.scale == 2)
    }

    @Test func v4NavigationAndConstraints() throws {
        let schema = try CSDL.parse(CSDLFixtures.v4)
        let order = try #require(schema.entityTypes["Demo.Model.Order"])
        let toCustomer = try #require(order.navigationProperty("Customer"))
        #expect(toCustomer.targetType == "Demo.Model.Party" && !toCustomer.isCollection && !toCustomer.nullable)
        #expect(toCustomer.partner == "Orders")
        #expect(
            toCustomer.dependentConstraints == [ReferentialConstraint(property: "CustomerID", referencedProperty: "ID")]
        )
        #expect(toCustomer.principalConstraints.isEmpty)

        let expected = [ReferentialConstraint(property: "CustomerID", referencedProperty: "ID")]
        for typeName in ["Demo.Model.Party", "Demo.Model.Customer"] {
            let orders = try #require(schema.entityTypes[typeName]?.navigationProperty("Orders"))
            #expect(orders.isCollection && orders.targetType == "Demo.Model.Order" && orders.partner == "Customer")
            #expect(orders.principalConstraints == expected)
            #expect(orders.dependentConstraints.isEmpty)
        }

        let items = try #require(order.navigationProperty("Items"))
        #expect(
            items.principalConstraints == [ReferentialConstraint(property: "OrderID", referencedProperty: "OrderID")])
    }

    @Test func v4Containers() throws {
        let schema = try CSDL.parse(CSDLFixtures.v4)
        #expect(schema.entitySetNames == ["Parties", "Customers", "Orders", "OrderItems", "Boss"])
        #expect(schema.entitySets["Customers"]?.navigationBindings == ["Orders": "Orders"])
        #expect(schema.entitySets["Orders"]?.navigationBindings == ["Customer": "Customers", "Items": "OrderItems"])
        let boss = try #require(schema.entitySets["Boss"])
        #expect(boss.isSingleton && boss.entityType == "Demo.Model.Customer")
        #expect(schema.entitySets["Customers"]?.isSingleton == false)
        #expect(schema.entityType(ofSet: "OrderItems")?.name == "OrderItem")
        #expect(schema.entitySets["Parties"]?.entityType == "Demo.Model.Party")
    }

    @Test func stringAndBytesAgree() throws {
        #expect(try CSDL.parse(CSDLFixtures.v4) == CSDL.parse(Array(CSDLFixtures.v4.utf8)))
    }

    // MARK: V2 (SAP GWSAMPLE style)

    @Test func v2GatewaySample() throws {
        let schema = try CSDL.parse(CSDLFixtures.gwsample)
        #expect(schema.version == .v2)
        #expect(schema.entityTypes.count == 3)
        #expect(Set(schema.complexTypes.keys) == ["GWSAMPLE_BASIC.CT_Address", "GWSAMPLE_BASIC.CT_String"])
        #expect(schema.entitySetNames == ["BusinessPartnerSet", "SalesOrderSet", "SalesOrderLineItemSet"])

        let partner = try #require(schema.entityTypes["GWSAMPLE_BASIC.BusinessPartner"])
        #expect(partner.property("Address")?.type == .complex("GWSAMPLE_BASIC.CT_Address"))
        #expect(partner.property("Address")?.nullable == false)
        #expect(partner.property("BusinessPartnerID")?.maxLength == 10)
        #expect(partner.property("ChangedAt")?.type == .primitive(.dateTime))
        #expect(partner.property("ChangedAt")?.precision == 7)

        let order = try #require(schema.entityTypes["GWSAMPLE_BASIC.SalesOrder"])
        let gross = try #require(order.property("GrossAmount"))
        #expect(gross.type == .primitive(.decimal) && gross.precision == 16 && gross.scale == 3)

        let item = try #require(schema.entityTypes["GWSAMPLE_BASIC.SalesOrderLineItem"])
        #expect(item.key == ["SalesOrderID", "ItemPosition"])
        #expect(item.property("DeliveryTime")?.type == .primitive(.time))

        let toPartner = try #require(order.navigationProperty("ToBusinessPartner"))
        #expect(toPartner.targetType == "GWSAMPLE_BASIC.BusinessPartner")
        #expect(!toPartner.isCollection && !toPartner.nullable && toPartner.partner == "ToSalesOrders")
        #expect(
            toPartner.dependentConstraints
                == [ReferentialConstraint(property: "CustomerID", referencedProperty: "BusinessPartnerID")])
        #expect(toPartner.principalConstraints.isEmpty)

        let toOrders = try #require(partner.navigationProperty("ToSalesOrders"))
        #expect(toOrders.isCollection && toOrders.targetType == "GWSAMPLE_BASIC.SalesOrder")
        #expect(toOrders.partner == "ToBusinessPartner")
        #expect(
            toOrders.principalConstraints
                == [ReferentialConstraint(property: "CustomerID", referencedProperty: "BusinessPartnerID")])
        #expect(toOrders.dependentConstraints.isEmpty)

        #expect(schema.entitySets["BusinessPartnerSet"]?.navigationBindings == ["ToSalesOrders": "SalesOrderSet"])
        #expect(
            schema.entitySets["SalesOrderSet"]?.navigationBindings
                == ["ToBusinessPartner": "BusinessPartnerSet", "ToLineItems": "SalesOrderLineItemSet"])
        #expect(schema.entitySets["SalesOrderLineItemSet"]?.navigationBindings == ["ToHeader": "SalesOrderSet"])
    }

    // MARK: V3 (Northwind style)

    @Test func v3Northwind() throws {
        let schema = try CSDL.parse(CSDLFixtures.northwindV3)
        #expect(schema.version == .v3)
        #expect(schema.entitySetNames == ["Customers", "Orders", "Employees", "Transport"])
        #expect(schema.entityTypes["NorthwindModel.Customer"]?.property("CompanyName")?.maxLength == nil)
        #expect(schema.entityTypes["NorthwindModel.Order"]?.property("OrderDate")?.type == .primitive(.dateTime))

        let truck = try #require(schema.entityTypes["NorthwindModel.Truck"])
        #expect(truck.key == ["TransportID"] && truck.baseType == "NorthwindModel.Transport")
        #expect(truck.properties.map(\.name) == ["TransportID", "TransportType", "TruckNumber"])
        #expect(schema.entityTypes["NorthwindModel.Transport"]?.isAbstract == true)

        let customer = try #require(schema.entityTypes["NorthwindModel.Order"]?.navigationProperty("Customer"))
        #expect(customer.nullable && !customer.isCollection)
        let employee = try #require(schema.entityTypes["NorthwindModel.Order"]?.navigationProperty("Employee"))
        #expect(!employee.nullable)

        let boss = try #require(schema.entityTypes["NorthwindModel.Employee"])
        let subordinates = try #require(boss.navigationProperty("Subordinates"))
        let superior = try #require(boss.navigationProperty("Superior"))
        let reportsTo = [ReferentialConstraint(property: "ReportsTo", referencedProperty: "EmployeeID")]
        #expect(subordinates.isCollection && subordinates.partner == "Superior")
        #expect(subordinates.principalConstraints == reportsTo && subordinates.dependentConstraints.isEmpty)
        #expect(!superior.isCollection && superior.partner == "Subordinates")
        #expect(superior.dependentConstraints == reportsTo && superior.principalConstraints.isEmpty)
        #expect(
            schema.entitySets["Employees"]?.navigationBindings
                == ["Orders": "Orders", "Subordinates": "Employees", "Superior": "Employees"])
        #expect(schema.entitySets["Orders"]?.navigationBindings == ["Customer": "Customers", "Employee": "Employees"])
    }
}
