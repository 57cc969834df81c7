public import OfflineStore
import Storage

/// A small built-in EPM-style sample (business partners, products, sales orders and their items),
/// used by `offline-store demo` and by tests. The data is generated deterministically.
public enum SampleData {
    /// An OData V4 `$metadata` document for the sample.
    public static let metadata = """
        <?xml version="1.0" encoding="utf-8"?>
        <edmx:Edmx Version="4.0" xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx">
          <edmx:DataServices>
            <Schema Namespace="EPM" xmlns="http://docs.oasis-open.org/odata/ns/edm">
              <ComplexType Name="Address">
                <Property Name="City" Type="Edm.String" MaxLength="40"/>
                <Property Name="PostalCode" Type="Edm.String" MaxLength="10"/>
                <Property Name="Street" Type="Edm.String" MaxLength="60"/>
                <Property Name="Country" Type="Edm.String" MaxLength="3"/>
              </ComplexType>
              <EntityType Name="BusinessPartner">
                <Key><PropertyRef Name="BusinessPartnerID"/></Key>
                <Property Name="BusinessPartnerID" Type="Edm.String" Nullable="false" MaxLength="10"/>
                <Property Name="CompanyName" Type="Edm.String" Nullable="false" MaxLength="80"/>
                <Property Name="Country" Type="Edm.String" MaxLength="3"/>
                <Property Name="EmailAddress" Type="Edm.String" MaxLength="255"/>
                <Property Name="CurrencyCode" Type="Edm.String" MaxLength="5"/>
                <Property Name="Address" Type="EPM.Address"/>
                <Property Name="CreatedAt" Type="Edm.DateTimeOffset"/>
                <NavigationProperty Name="SalesOrders" Type="Collection(EPM.SalesOrder)" Partner="BusinessPartner"/>
                <NavigationProperty Name="Products" Type="Collection(EPM.Product)" Partner="Supplier"/>
              </EntityType>
              <EntityType Name="Product">
                <Key><PropertyRef Name="ProductID"/></Key>
                <Property Name="ProductID" Type="Edm.String" Nullable="false" MaxLength="10"/>
                <Property Name="Name" Type="Edm.String" MaxLength="255"/>
                <Property Name="Category" Type="Edm.String" MaxLength="40"/>
                <Property Name="SupplierID" Type="Edm.String" MaxLength="10"/>
                <Property Name="Price" Type="Edm.Decimal" Precision="16" Scale="3"/>
                <Property Name="CurrencyCode" Type="Edm.String" MaxLength="5"/>
                <Property Name="WeightMeasure" Type="Edm.Double"/>
                <NavigationProperty Name="Supplier" Type="EPM.BusinessPartner" Partner="Products">
                  <ReferentialConstraint Property="SupplierID" ReferencedProperty="BusinessPartnerID"/>
                </NavigationProperty>
              </EntityType>
              <EntityType Name="SalesOrder">
                <Key><PropertyRef Name="SalesOrderID"/></Key>
                <Property Name="SalesOrderID" Type="Edm.String" Nullable="false" MaxLength="10"/>
                <Property Name="CustomerID" Type="Edm.String" MaxLength="10"/>
                <Property Name="GrossAmount" Type="Edm.Decimal" Precision="16" Scale="3"/>
                <Property Name="CurrencyCode" Type="Edm.String" MaxLength="5"/>
                <Property Name="LifecycleStatus" Type="Edm.String" MaxLength="1"/>
                <Property Name="CreatedAt" Type="Edm.DateTimeOffset"/>
                <Property Name="Note" Type="Edm.String"/>
                <NavigationProperty Name="BusinessPartner" Type="EPM.BusinessPartner" Partner="SalesOrders">
                  <ReferentialConstraint Property="CustomerID" ReferencedProperty="BusinessPartnerID"/>
                </NavigationProperty>
                <NavigationProperty Name="Items" Type="Collection(EPM.SalesOrderItem)" Partner="SalesOrder"/>
              </EntityType>
              <EntityType Name="SalesOrderItem">
                <Key><PropertyRef Name="SalesOrderID"/><PropertyRef Name="ItemPosition"/></Key>
                <Property Name="SalesOrderID" Type="Edm.String" Nullable="false" MaxLength="10"/>
                <Property Name="ItemPosition" Type="Edm.Int32" Nullable="false"/>
                <Property Name="ProductID" Type="Edm.String" MaxLength="10"/>
                <Property Name="Quantity" Type="Edm.Int32"/>
                <Property Name="NetAmount" Type="Edm.Decimal" Precision="16" Scale="3"/>
                <Property Name="CurrencyCode" Type="Edm.String" MaxLength="5"/>
                <Property Name="DeliveryDate" Type="Edm.Date"/>
                <NavigationProperty Name="SalesOrder" Type="EPM.SalesOrder" Nullable="false" Partner="Items">
                  <ReferentialConstraint Property="SalesOrderID" ReferencedProperty="SalesOrderID"/>
                </NavigationProperty>
                <NavigationProperty Name="Product" Type="EPM.Product">
                  <ReferentialConstraint Property="ProductID" ReferencedProperty="ProductID"/>
                </NavigationProperty>
              </EntityType>
              <EntityContainer Name="Container">
                <EntitySet Name="BusinessPartners" EntityType="EPM.BusinessPartner">
                  <NavigationPropertyBinding Path="SalesOrders" Target="SalesOrders"/>
                  <NavigationPropertyBinding Path="Products" Target="Products"/>
                </EntitySet>
                <EntitySet Name="Products" EntityType="EPM.Product">
                  <NavigationPropertyBinding Path="Supplier" Target="BusinessPartners"/>
                </EntitySet>
                <EntitySet Name="SalesOrders" EntityType="EPM.SalesOrder">
                  <NavigationPropertyBinding Path="BusinessPartner" Target="BusinessPartners"/>
                  <NavigationPropertyBinding Path="Items" Target="SalesOrderItems"/>
                </EntitySet>
                <EntitySet Name="SalesOrderItems" EntityType="EPM.SalesOrderItem">
                  <NavigationPropertyBinding Path="SalesOrder" Target="SalesOrders"/>
                  <NavigationPropertyBinding Path="Product" Target="Products"/>
                </EntitySet>
              </EntityContainer>
            </Schema>
          </edmx:DataServices>
        </edmx:Edmx>
        """

    /// The sample's configuration: indexes as SAP's `indexed_type` writes them.
    public static var configuration: StoreConfiguration {
        StoreConfiguration(indexes: [
            "BusinessPartners": ["Country", "CompanyName"],
            "Products": ["Category, Price DESC"],
            "SalesOrderItems": ["Quantity DESC, ProductID"],
        ])
    }

    static let companies = [
        "SAP", "Becker Berlin", "DelBont Industries", "Talpa", "Panorama Studios", "TECUM",
        "Asia High tech", "Laurent", "AVANTEL", "Telecomunicaciones Star", "Vente Et Réparation de Ordinateur",
        "New Line Design", "HEPA Tec", "Anav Ideon", "Robert Brown Entertainment", "Mexican Oil Trading Company",
    ]
    static let countries = [
        "DE", "DE", "US", "DE", "US", "DE", "JP", "FR", "US", "ES", "FR", "US", "DE", "IN", "US", "MX",
    ]
    static let cities = [
        "Walldorf", "Berlin", "Fremont", "Hannover", "Hollywood", "Muenster", "Tokyo", "Paris", "Boston", "Barcelona",
        "Lyon", "Chicago", "Stuttgart", "Pune", "Seattle", "Mexico City",
    ]
    static let categories = ["Notebooks", "Tablets", "Smartphones", "Headsets", "Printers", "Software"]

    /// The sample data of one set, as an OData V4 JSON payload (`{"value":[…]}`).
    public static func json(_ set: String) -> String {
        var out = "{\"value\":["
        var first = true
        func add(_ members: [(String, String)]) {
            if !first { out += "," }
            first = false
            out += "{" + members.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}"
        }
        func q(_ s: String) -> String { var o = ""; JSONWriter.writeString(s, to: &o); return o }
        switch set {
        case "BusinessPartners":
            for (i, name) in companies.enumerated() {
                add([
                    ("BusinessPartnerID", q("01000000\(String(format2: i))")), ("CompanyName", q(name)),
                    ("Country", q(countries[i])), ("EmailAddress", q("contact@partner\(i).example")),
                    ("CurrencyCode", q(i % 3 == 0 ? "EUR" : "USD")),
                    (
                        "Address",
                        "{\"City\":\(q(cities[i])),\"PostalCode\":\"\(10000 + i * 137)\",\"Street\":\"Main St \(i + 1)\",\"Country\":\(q(countries[i]))}"
                    ),
                    ("CreatedAt", q("2021-0\(1 + i % 9)-1\(i % 10)T0\(i % 10):30:00+0\(i % 3):00")),
                ])
            }
        case "Products":
            for i in 0..<24 {
                let price = 49 + (i * 7919) % 2400
                add([
                    ("ProductID", q("HT-\(1000 + i)")), ("Name", q("\(categories[i % 6].dropLast()) \(i)")),
                    ("Category", q(categories[i % 6])),
                    ("SupplierID", q("01000000\(String(format2: i % companies.count))")),
                    ("Price", "\(price).\(i % 10)0"),
                    ("CurrencyCode", q("USD")), ("WeightMeasure", "\(Double(1 + i % 5) * 0.45)"),
                ])
            }
        case "SalesOrders":
            for i in 0..<40 {
                add([
                    ("SalesOrderID", q("05000000\(String(format2: i))")),
                    ("CustomerID", q("01000000\(String(format2: (i * 7) % companies.count))")),
                    ("GrossAmount", "\(1000 + (i * 3571) % 90000).\(String(format2: i % 100))"),
                    ("CurrencyCode", q("USD")),
                    ("LifecycleStatus", q(["N", "P", "C"][i % 3])),
                    ("CreatedAt", q("2021-\(String(format2: 1 + i % 12))-0\(1 + i % 9)T10:00:00Z")),
                    ("Note", i % 4 == 0 ? "null" : q("Order \(i) — \"rush\"")),
                ])
            }
        case "SalesOrderItems":
            for i in 0..<40 {
                for pos in 1...(1 + i % 4) {
                    add([
                        ("SalesOrderID", q("05000000\(String(format2: i))")), ("ItemPosition", "\(pos * 10)"),
                        ("ProductID", q("HT-\(1000 + (i + pos * 5) % 24)")), ("Quantity", "\(1 + (i * pos) % 9)"),
                        ("NetAmount", "\(100 + (i * pos * 131) % 5000).\(pos)00"), ("CurrencyCode", q("USD")),
                        ("DeliveryDate", q("2022-\(String(format2: 1 + (i + pos) % 12))-1\(pos)")),
                    ])
                }
            }
        default: break
        }
        return out + "]}"
    }

    public static let setsInLoadOrder = ["BusinessPartners", "Products", "SalesOrders", "SalesOrderItems"]
}

extension String {
    init(format2 i: Int) { self = i < 10 ? "0\(i)" : "\(i)" }
}
