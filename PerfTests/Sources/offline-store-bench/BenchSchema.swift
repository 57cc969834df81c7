// No imports: scripts/engine-microbench compiles this file as it is, beside its own main.swift.

/// The benchmark's data model: EPM-like sales-order items (composite key, 13 typed properties,
/// about 300 bytes a row) whose `ProductID` points at one of N/100 products — so an equality
/// look-up on `ProductID` returns about 100 items.
enum BenchSchema {
    static let metadata = """
        <?xml version="1.0" encoding="utf-8"?>
        <edmx:Edmx Version="4.0" xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx">
          <edmx:DataServices>
            <Schema Namespace="Bench" xmlns="http://docs.oasis-open.org/odata/ns/edm">
              <EntityType Name="Product">
                <Key><PropertyRef Name="ProductID"/></Key>
                <Property Name="ProductID" Type="Edm.String" Nullable="false" MaxLength="10"/>
                <Property Name="Name" Type="Edm.String" MaxLength="60"/>
                <Property Name="Category" Type="Edm.String" MaxLength="40"/>
                <Property Name="Price" Type="Edm.Decimal" Precision="16" Scale="3"/>
                <Property Name="CurrencyCode" Type="Edm.String" MaxLength="5"/>
              </EntityType>
              <EntityType Name="SalesOrderItem">
                <Key><PropertyRef Name="SalesOrderID"/><PropertyRef Name="ItemPosition"/></Key>
                <Property Name="SalesOrderID" Type="Edm.String" Nullable="false" MaxLength="10"/>
                <Property Name="ItemPosition" Type="Edm.Int32" Nullable="false"/>
                <Property Name="ProductID" Type="Edm.String" Nullable="false" MaxLength="10"/>
                <Property Name="Note" Type="Edm.String" MaxLength="255"/>
                <Property Name="Quantity" Type="Edm.Int32" Nullable="false"/>
                <Property Name="QuantityUnit" Type="Edm.String" Nullable="false" MaxLength="3"/>
                <Property Name="NetAmount" Type="Edm.Decimal" Nullable="false" Precision="16" Scale="3"/>
                <Property Name="TaxAmount" Type="Edm.Decimal" Nullable="false" Precision="16" Scale="3"/>
                <Property Name="GrossAmount" Type="Edm.Decimal" Nullable="false" Precision="16" Scale="3"/>
                <Property Name="CurrencyCode" Type="Edm.String" Nullable="false" MaxLength="5"/>
                <Property Name="DeliveryDate" Type="Edm.Date" Nullable="false"/>
                <Property Name="ChangedAt" Type="Edm.DateTimeOffset" Nullable="false"/>
                <Property Name="ItemGUID" Type="Edm.Guid" Nullable="false"/>
                <NavigationProperty Name="Product" Type="Bench.Product" Nullable="false">
                  <ReferentialConstraint Property="ProductID" ReferencedProperty="ProductID"/>
                </NavigationProperty>
              </EntityType>
              <EntityContainer Name="Container">
                <EntitySet Name="Products" EntityType="Bench.Product"/>
                <EntitySet Name="SalesOrderItems" EntityType="Bench.SalesOrderItem">
                  <NavigationPropertyBinding Path="Product" Target="Products"/>
                </EntitySet>
              </EntityContainer>
            </Schema>
          </edmx:DataServices>
        </edmx:Edmx>
        """

    static let set = "SalesOrderItems"
    /// The same three secondary indexes in every contestant.
    static let indexes = ["ProductID", "DeliveryDate", "Quantity DESC, ProductID"]
}
