/// Small CSDL documents modelled on real services (TripPin/Northwind V4, SAP GWSAMPLE V2, Northwind V3).
enum CSDLFixtures {
    /// A V4 document: two schemas with aliases, enums, complex inheritance, entity inheritance, bindings.
    static let v4 = #"""
        <?xml version="1.0" encoding="utf-8"?>
        <edmx:Edmx Version="4.0" xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx">
          <edmx:Reference Uri="https://oasis-tcs.github.io/odata-vocabularies/vocabularies/Org.OData.Core.V1.xml">
            <edmx:Include Namespace="Org.OData.Core.V1" Alias="Core"/>
          </edmx:Reference>
          <edmx:DataServices>
            <Schema Namespace="Demo.Types" Alias="T" xmlns="http://docs.oasis-open.org/odata/ns/edm">
              <EnumType Name="Color">
                <Member Name="Red"/>
                <Member Name="Green"/>
                <Member Name="Blue" Value="10"/>
                <Member Name="Black"/>
              </EnumType>
              <EnumType Name="Access" UnderlyingType="Edm.Byte" IsFlags="true">
                <Member Name="None" Value="0"/>
                <Member Name="Read" Value="1"/>
                <Member Name="Write" Value="2"/>
              </EnumType>
              <TypeDefinition Name="Money" UnderlyingType="Edm.Decimal"/>
              <ComplexType Name="Address">
                <Property Name="Street" Type="Edm.String"/>
                <Property Name="City" Type="Edm.String" Nullable="false" MaxLength="40"/>
              </ComplexType>
              <ComplexType Name="GeoAddress" BaseType="T.Address" OpenType="true">
                <Property Name="Position" Type="Edm.GeographyPoint" SRID="4326"/>
              </ComplexType>
              <Term Name="Tag" Type="Edm.String"/>
              <EntityContainer Name="Extra">
                <EntitySet Name="Parties" EntityType="Demo.Model.Party"/>
              </EntityContainer>
            </Schema>
            <Schema Namespace="Demo.Model" Alias="self" xmlns="http://docs.oasis-open.org/odata/ns/edm">
              <EntityType Name="Party" Abstract="true">
                <Key>
                  <PropertyRef Name="ID"/>
                </Key>
                <Property Name="ID" Type="Edm.Int32" Nullable="false">
                  <Annotation Term="Core.Computed" Bool="true"/>
                </Property>
                <Property Name="Name" Type="Edm.String" MaxLength="max"/>
                <Property Name="Addresses" Type="Collection(Demo.Types.Address)"/>
                <NavigationProperty Name="Orders" Type="Collection(self.Order)" Partner="Customer"/>
              </EntityType>
              <EntityType Name="Customer" BaseType="self.Party" OpenType="true" HasStream="true">
                <Property Name="Emails" Type="Collection(Edm.String)" Nullable="false"/>
                <Property Name="Favorite" Type="T.Color"/>
                <Property Name="Rights" Type="Demo.Types.Access"/>
                <Property Name="Home" Type="T.GeoAddress"/>
                <Property Name="Thumbnail" Type="Edm.Stream"/>
                <Annotation Term="Core.Description">
                  <Record><PropertyValue Property="Text" String="A customer"/></Record>
                </Annotation>
              </EntityType>
              <EntityType Name="Order">
                <Key>
                  <PropertyRef Name="OrderID"/>
                </Key>
                <Property Name="OrderID" Type="Edm.Int64" Nullable="false"/>
                <Property Name="CustomerID" Type="Edm.Int32"/>
                <Property Name="Total" Type="T.Money" Precision="15" Scale="variable"/>
                <Property Name="Placed" Type="Edm.DateTimeOffset" Precision="3"/>
                <Property Name="Area" Type="Edm.GeometryPolygon"/>
                <NavigationProperty Name="Customer" Type="self.Party" Nullable="false" Partner="Orders">
                  <ReferentialConstraint Property="CustomerID" ReferencedProperty="ID"/>
                </NavigationProperty>
                <NavigationProperty Name="Items" Type="Collection(self.OrderItem)" Partner="Order" ContainsTarget="true"/>
              </EntityType>
              <EntityType Name="OrderItem">
                <Key>
                  <PropertyRef Name="OrderID"/>
                  <PropertyRef Name="Line"/>
                </Key>
                <Property Name="OrderID" Type="Edm.Int64" Nullable="false"/>
                <Property Name="Line" Type="Edm.Int32" Nullable="false"/>
                <Property Name="Amount" Type="Edm.Decimal" Precision="12" Scale="2"/>
                <NavigationProperty Name="Order" Type="self.Order" Nullable="false" Partner="Items">
                  <ReferentialConstraint Property="OrderID" ReferencedProperty="OrderID"/>
                </NavigationProperty>
              </EntityType>
              <Action Name="Ship" IsBound="true">
                <Parameter Name="order" Type="self.Order"/>
              </Action>
              <Function Name="Top">
                <ReturnType Type="Collection(self.Order)"/>
              </Function>
              <EntityContainer Name="Service">
                <EntitySet Name="Customers" EntityType="self.Customer">
                  <NavigationPropertyBinding Path="Orders" Target="Orders"/>
                  <Annotation Term="Core.OptimisticConcurrency"><Collection><PropertyPath>Name</PropertyPath></Collection></Annotation>
                </EntitySet>
                <EntitySet Name="Orders" EntityType="Demo.Model.Order">
                  <NavigationPropertyBinding Path="Customer" Target="Demo.Model.Service/Customers"/>
                  <NavigationPropertyBinding Path="Items" Target="Service/OrderItems"/>
                </EntitySet>
                <EntitySet Name="OrderItems" EntityType="self.OrderItem">
                  <NavigationPropertyBinding Path="Order" Target="Orders"/>
                </EntitySet>
                <Singleton Name="Boss" Type="self.Customer">
                  <NavigationPropertyBinding Path="Orders" Target="Orders"/>
                </Singleton>
                <ActionImport Name="ShipAll" Action="self.Ship"/>
                <FunctionImport Name="TopOrders" Function="self.Top" EntitySet="Orders"/>
              </EntityContainer>
              <Annotations Target="self.Order">
                <Annotation Term="Core.Description" String="An order"/>
              </Annotations>
              <Annotations Target="Demo.Model.Service/Orders">
                <Annotation Term="Org.OData.Core.V1.OptimisticConcurrency"><Collection/></Annotation>
              </Annotations>
            </Schema>
          </edmx:DataServices>
        </edmx:Edmx>
        """#

    /// A V2 document in the style of SAP's GWSAMPLE_BASIC.
    static let gwsample = #"""
        <?xml version="1.0" encoding="utf-8"?><edmx:Edmx Version="1.0" xmlns:edmx="http://schemas.microsoft.com/ado/2007/06/edmx" xmlns:m="http://schemas.microsoft.com/ado/2007/08/dataservices/metadata" xmlns:sap="http://www.sap.com/Protocols/SAPData"><edmx:DataServices m:DataServiceVersion="2.0"><Schema Namespace="GWSAMPLE_BASIC" xml:lang="en" sap:schema-version="1" xmlns="http://schemas.microsoft.com/ado/2008/09/edm">
        <EntityType Name="BusinessPartner" sap:content-version="1"><Key><PropertyRef Name="BusinessPartnerID"/></Key><Property Name="Address" Type="GWSAMPLE_BASIC.CT_Address" Nullable="false"/><Property Name="BusinessPartnerID" Type="Edm.String" Nullable="false" MaxLength="10" sap:label="Business Partner ID" sap:creatable="false" sap:updatable="false"/><Property Name="CompanyName" Type="Edm.String" Nullable="false" MaxLength="80" sap:label="Company"/><Property Name="ChangedAt" Type="Edm.DateTime" Precision="7" ConcurrencyMode="Fixed" sap:label="Time Stamp"/><NavigationProperty Name="ToSalesOrders" Relationship="GWSAMPLE_BASIC.Assoc_BusinessPartner_SalesOrders" FromRole="FromRole_Assoc_BusinessPartner_SalesOrders" ToRole="ToRole_Assoc_BusinessPartner_SalesOrders"/></EntityType>
        <EntityType Name="SalesOrder" sap:content-version="1"><Key><PropertyRef Name="SalesOrderID"/></Key><Property Name="SalesOrderID" Type="Edm.String" Nullable="false" MaxLength="10" sap:label="Sales Order ID"/><Property Name="CustomerID" Type="Edm.String" Nullable="false" MaxLength="10" sap:label="Business Partner ID"/><Property Name="GrossAmount" Type="Edm.Decimal" Precision="16" Scale="3" sap:unit="CurrencyCode" sap:label="Gross Amount"/><Property Name="CurrencyCode" Type="Edm.String" MaxLength="5" sap:semantics="currency-code"/><Property Name="CreatedAt" Type="Edm.DateTime" Precision="7"/><NavigationProperty Name="ToBusinessPartner" Relationship="GWSAMPLE_BASIC.Assoc_BusinessPartner_SalesOrders" FromRole="ToRole_Assoc_BusinessPartner_SalesOrders" ToRole="FromRole_Assoc_BusinessPartner_SalesOrders"/><NavigationProperty Name="ToLineItems" Relationship="GWSAMPLE_BASIC.Assoc_SalesOrder_SalesOrderLineItems" FromRole="FromRole_Assoc_SalesOrder_SalesOrderLineItems" ToRole="ToRole_Assoc_SalesOrder_SalesOrderLineItems"/></EntityType>
        <EntityType Name="SalesOrderLineItem" sap:content-version="1"><Key><PropertyRef Name="SalesOrderID"/><PropertyRef Name="ItemPosition"/></Key><Property Name="SalesOrderID" Type="Edm.String" Nullable="false" MaxLength="10"/><Property Name="ItemPosition" Type="Edm.String" Nullable="false" MaxLength="10"/><Property Name="Quantity" Type="Edm.Decimal" Nullable="false" Precision="13" Scale="3" sap:unit="QuantityUnit"/><Property Name="DeliveryTime" Type="Edm.Time" Precision="0"/><NavigationProperty Name="ToHeader" Relationship="GWSAMPLE_BASIC.Assoc_SalesOrder_SalesOrderLineItems" FromRole="ToRole_Assoc_SalesOrder_SalesOrderLineItems" ToRole="FromRole_Assoc_SalesOrder_SalesOrderLineItems"/></EntityType>
        <ComplexType Name="CT_Address"><Property Name="City" Type="Edm.String" MaxLength="40" sap:label="City"/><Property Name="PostalCode" Type="Edm.String" MaxLength="10" sap:label="Postal Code"/><Property Name="Street" Type="Edm.String" MaxLength="60" sap:label="Street"/></ComplexType><ComplexType Name="CT_String"><Property Name="String" Type="Edm.String" sap:creatable="false"/></ComplexType>
        <Association Name="Assoc_BusinessPartner_SalesOrders" sap:content-version="1"><End Type="GWSAMPLE_BASIC.BusinessPartner" Multiplicity="1" Role="FromRole_Assoc_BusinessPartner_SalesOrders"/><End Type="GWSAMPLE_BASIC.SalesOrder" Multiplicity="*" Role="ToRole_Assoc_BusinessPartner_SalesOrders"/><ReferentialConstraint><Principal Role="FromRole_Assoc_BusinessPartner_SalesOrders"><PropertyRef Name="BusinessPartnerID"/></Principal><Dependent Role="ToRole_Assoc_BusinessPartner_SalesOrders"><PropertyRef Name="CustomerID"/></Dependent></ReferentialConstraint></Association>
        <Association Name="Assoc_SalesOrder_SalesOrderLineItems" sap:content-version="1"><End Type="GWSAMPLE_BASIC.SalesOrder" Multiplicity="1" Role="FromRole_Assoc_SalesOrder_SalesOrderLineItems"/><End Type="GWSAMPLE_BASIC.SalesOrderLineItem" Multiplicity="*" Role="ToRole_Assoc_SalesOrder_SalesOrderLineItems"/><ReferentialConstraint><Principal Role="FromRole_Assoc_SalesOrder_SalesOrderLineItems"><PropertyRef Name="SalesOrderID"/></Principal><Dependent Role="ToRole_Assoc_SalesOrder_SalesOrderLineItems"><PropertyRef Name="SalesOrderID"/></Dependent></ReferentialConstraint></Association>
        <EntityContainer Name="GWSAMPLE_BASIC_Entities" m:IsDefaultEntityContainer="true" sap:supported-formats="atom json xlsx"><EntitySet Name="BusinessPartnerSet" EntityType="GWSAMPLE_BASIC.BusinessPartner" sap:content-version="1"/><EntitySet Name="SalesOrderSet" EntityType="GWSAMPLE_BASIC.SalesOrder" sap:updatable="false" sap:content-version="1"/><EntitySet Name="SalesOrderLineItemSet" EntityType="GWSAMPLE_BASIC.SalesOrderLineItem" sap:content-version="1"/>
        <AssociationSet Name="Assoc_BusinessPartner_SalesOrders_AssocS" Association="GWSAMPLE_BASIC.Assoc_BusinessPartner_SalesOrders" sap:creatable="false"><End EntitySet="BusinessPartnerSet" Role="FromRole_Assoc_BusinessPartner_SalesOrders"/><End EntitySet="SalesOrderSet" Role="ToRole_Assoc_BusinessPartner_SalesOrders"/></AssociationSet><AssociationSet Name="Assoc_SalesOrder_SalesOrderLineItems_Ass" Association="GWSAMPLE_BASIC.Assoc_SalesOrder_SalesOrderLineItems" sap:creatable="false"><End EntitySet="SalesOrderSet" Role="FromRole_Assoc_SalesOrder_SalesOrderLineItems"/><End EntitySet="SalesOrderLineItemSet" Role="ToRole_Assoc_SalesOrder_SalesOrderLineItems"/></AssociationSet>
        <FunctionImport Name="RegenerateAllData" ReturnType="GWSAMPLE_BASIC.CT_String" m:HttpMethod="POST"><Parameter Name="NoOfSalesOrders" Type="Edm.Int32" Mode="In"/></FunctionImport><FunctionImport Name="SalesOrder_Confirm" ReturnType="GWSAMPLE_BASIC.SalesOrder" EntitySet="SalesOrderSet" m:HttpMethod="POST" sap:action-for="GWSAMPLE_BASIC.SalesOrder"><Parameter Name="SalesOrderID" Type="Edm.String" Mode="In" MaxLength="10"/></FunctionImport></EntityContainer>
        <atom:link rel="self" href="https://example.invalid/sap/opu/odata/IWBEP/GWSAMPLE_BASIC/$metadata" xmlns:atom="http://www.w3.org/2005/Atom"/></Schema></edmx:DataServices></edmx:Edmx>
        """#

    /// A V3 document in the style of the Northwind sample service (starts with a byte order mark).
    static let northwindV3 =
        "\u{FEFF}" + #"""
            <?xml version="1.0" encoding="utf-8"?><edmx:Edmx Version="1.0" xmlns:edmx="http://schemas.microsoft.com/ado/2007/06/edmx"><edmx:DataServices m:DataServiceVersion="3.0" m:MaxDataServiceVersion="3.0" xmlns:m="http://schemas.microsoft.com/ado/2007/08/dataservices/metadata"><Schema Namespace="NorthwindModel" xmlns="http://schemas.microsoft.com/ado/2009/11/edm">
            <EntityType Name="Customer"><Key><PropertyRef Name="CustomerID" /></Key><Property Name="CustomerID" Type="Edm.String" Nullable="false" MaxLength="128" FixedLength="false" Unicode="true" p6:StoreGeneratedPattern="None" xmlns:p6="http://schemas.microsoft.com/ado/2009/02/edm/annotation" /><Property Name="CompanyName" Type="Edm.String" Nullable="false" MaxLength="Max" /><NavigationProperty Name="Orders" Relationship="NorthwindModel.Customer_Orders" ToRole="Customer_Orders_Target" FromRole="Customer_Orders_Source" /></EntityType>
            <EntityType Name="Order"><Key><PropertyRef Name="OrderID" /></Key><Property Name="OrderID" Type="Edm.Int32" Nullable="false" /><Property Name="CustomerID" Type="Edm.String" MaxLength="128" /><Property Name="EmployeeID" Type="Edm.Int32" Nullable="false" /><Property Name="OrderDate" Type="Edm.DateTime" Nullable="false" /><Property Name="Freight" Type="Edm.Decimal" Precision="18" Scale="2" /><NavigationProperty Name="Customer" Relationship="NorthwindModel.Customer_Orders" ToRole="Customer_Orders_Source" FromRole="Customer_Orders_Target" /><NavigationProperty Name="Employee" Relationship="NorthwindModel.Employee_Orders" ToRole="Employee_Orders_Source" FromRole="Employee_Orders_Target" /></EntityType>
            <EntityType Name="Employee"><Key><PropertyRef Name="EmployeeID" /></Key><Property Name="EmployeeID" Type="Edm.Int32" Nullable="false" /><Property Name="LastName" Type="Edm.String" Nullable="false" MaxLength="Max" /><Property Name="ReportsTo" Type="Edm.Int32" /><Property Name="Photo" Type="Edm.Binary" MaxLength="Max" FixedLength="false" /><NavigationProperty Name="Orders" Relationship="NorthwindModel.Employee_Orders" ToRole="Employee_Orders_Target" FromRole="Employee_Orders_Source" /><NavigationProperty Name="Subordinates" Relationship="NorthwindModel.Employee_Subordinates" ToRole="Employee_Subordinates_Target" FromRole="Employee_Subordinates_Source" /><NavigationProperty Name="Superior" Relationship="NorthwindModel.Employee_Subordinates" ToRole="Employee_Subordinates_Source" FromRole="Employee_Subordinates_Target" /></EntityType>
            <EntityType Name="Transport" Abstract="true"><Key><PropertyRef Name="TransportID" /></Key><Property Name="TransportID" Type="Edm.Int32" Nullable="false" /><Property Name="TransportType" Type="Edm.Int32" Nullable="false" /></EntityType><EntityType Name="Truck" BaseType="NorthwindModel.Transport"><Property Name="TruckNumber" Type="Edm.String" MaxLength="Max" /></EntityType>
            <ComplexType Name="Address"><Property Name="City" Type="Edm.String" MaxLength="Max" /><Property Name="Country" Type="Edm.String" MaxLength="Max" /></ComplexType>
            <Association Name="Customer_Orders"><End Type="NorthwindModel.Customer" Role="Customer_Orders_Source" Multiplicity="0..1" /><End Type="NorthwindModel.Order" Role="Customer_Orders_Target" Multiplicity="*" /><ReferentialConstraint><Principal Role="Customer_Orders_Source"><PropertyRef Name="CustomerID" /></Principal><Dependent Role="Customer_Orders_Target"><PropertyRef Name="CustomerID" /></Dependent></ReferentialConstraint></Association>
            <Association Name="Employee_Orders"><End Type="NorthwindModel.Employee" Role="Employee_Orders_Source" Multiplicity="1"><OnDelete Action="Cascade" /></End><End Type="NorthwindModel.Order" Role="Employee_Orders_Target" Multiplicity="*" /><ReferentialConstraint><Principal Role="Employee_Orders_Source"><PropertyRef Name="EmployeeID" /></Principal><Dependent Role="Employee_Orders_Target"><PropertyRef Name="EmployeeID" /></Dependent></ReferentialConstraint></Association>
            <Association Name="Employee_Subordinates"><End Type="NorthwindModel.Employee" Role="Employee_Subordinates_Source" Multiplicity="0..1" /><End Type="NorthwindModel.Employee" Role="Employee_Subordinates_Target" Multiplicity="*" /><ReferentialConstraint><Principal Role="Employee_Subordinates_Source"><PropertyRef Name="EmployeeID" /></Principal><Dependent Role="Employee_Subordinates_Target"><PropertyRef Name="ReportsTo" /></Dependent></ReferentialConstraint></Association>
            <EntityContainer Name="NorthwindContext" m:IsDefaultEntityContainer="true"><EntitySet Name="Customers" EntityType="NorthwindModel.Customer" /><EntitySet Name="Orders" EntityType="NorthwindModel.Order" /><EntitySet Name="Employees" EntityType="NorthwindModel.Employee" /><EntitySet Name="Transport" EntityType="NorthwindModel.Transport" />
            <FunctionImport Name="ReturnIntCollection" ReturnType="Collection(Edm.Int32)" m:HttpMethod="GET"><Parameter Name="count" Type="Edm.Int32" Nullable="false" /></FunctionImport><FunctionImport Name="PassThroughAddress" ReturnType="NorthwindModel.Address"><Parameter Name="address" Type="NorthwindModel.Address" /></FunctionImport>
            <AssociationSet Name="Customer_Orders" Association="NorthwindModel.Customer_Orders"><End Role="Customer_Orders_Target" EntitySet="Orders" /><End Role="Customer_Orders_Source" EntitySet="Customers" /></AssociationSet><AssociationSet Name="Employee_Orders" Association="NorthwindModel.Employee_Orders"><End Role="Employee_Orders_Target" EntitySet="Orders" /><End Role="Employee_Orders_Source" EntitySet="Employees" /></AssociationSet><AssociationSet Name="Employee_Subordinates" Association="NorthwindModel.Employee_Subordinates"><End Role="Employee_Subordinates_Source" EntitySet="Employees" /><End Role="Employee_Subordinates_Target" EntitySet="Employees" /></AssociationSet></EntityContainer></Schema></edmx:DataServices></edmx:Edmx>
            """#

    /// Wraps schema content in a V4 EDMX envelope (namespace `NS`); the content starts on line 5.
    static func v4(schema content: String) -> String {
        """
        <?xml version="1.0" encoding="utf-8"?>
        <edmx:Edmx Version="4.0" xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx">
        <edmx:DataServices>
        <Schema Namespace="NS" xmlns="http://docs.oasis-open.org/odata/ns/edm">
        \(content)
        </Schema>
        </edmx:DataServices>
        </edmx:Edmx>
        """
    }
}
