import TestSupport
import Foundation
import OfflineStore
import Testing

/// SAP's offline application configuration file (`.ini`) read into a `StoreConfiguration`
/// (`StoreConfiguration.readINI`, `init --config app.ini`): what maps, what warns (naming the key,
/// its section and its line), what is an error (with its line).
@Suite(.checksStores, .runsOffThePool) struct AppConfigurationINITests {
    /// A Gateway V2 `$metadata` shaped like GWSAMPLE_BASIC's (its names, a complex address,
    /// partner → orders → items), cut down to what the tests need.
    static let metadata = """
        <?xml version="1.0" encoding="utf-8"?>
        <edmx:Edmx Version="1.0" xmlns:edmx="http://schemas.microsoft.com/ado/2007/06/edmx" xmlns:m="http://schemas.microsoft.com/ado/2007/08/dataservices/metadata" xmlns:sap="http://www.sap.com/Protocols/SAPData">
         <edmx:DataServices m:DataServiceVersion="2.0">
          <Schema Namespace="GWSAMPLE_BASIC" xmlns="http://schemas.microsoft.com/ado/2008/09/edm">
           <ComplexType Name="CT_Address">
            <Property Name="City" Type="Edm.String" MaxLength="40"/>
            <Property Name="Country" Type="Edm.String" MaxLength="3"/>
           </ComplexType>
           <EntityType Name="BusinessPartner">
            <Key><PropertyRef Name="BusinessPartnerID"/></Key>
            <Property Name="Address" Type="GWSAMPLE_BASIC.CT_Address" Nullable="false"/>
            <Property Name="BusinessPartnerID" Type="Edm.String" Nullable="false" MaxLength="10"/>
            <Property Name="CompanyName" Type="Edm.String" Nullable="false" MaxLength="80"/>
            <NavigationProperty Name="ToSalesOrders" Relationship="GWSAMPLE_BASIC.Assoc_BusinessPartner_SalesOrders" FromRole="FromRole_Assoc_BusinessPartner_SalesOrders" ToRole="ToRole_Assoc_BusinessPartner_SalesOrders"/>
           </EntityType>
           <EntityType Name="Product">
            <Key><PropertyRef Name="ProductID"/></Key>
            <Property Name="ProductID" Type="Edm.String" Nullable="false" MaxLength="10"/>
            <Property Name="Category" Type="Edm.String" Nullable="false" MaxLength="40"/>
            <Property Name="Name" Type="Edm.String" Nullable="false" MaxLength="255"/>
            <Property Name="Price" Type="Edm.Decimal" Precision="16" Scale="3"/>
           </EntityType>
           <EntityType Name="SalesOrder">
            <Key><PropertyRef Name="SalesOrderID"/></Key>
            <Property Name="SalesOrderID" Type="Edm.String" Nullable="false" MaxLength="10"/>
            <Property Name="CustomerID" Type="Edm.String" Nullable="false" MaxLength="10"/>
            <Property Name="GrossAmount" Type="Edm.Decimal" Precision="16" Scale="3"/>
            <NavigationProperty Name="ToLineItems" Relationship="GWSAMPLE_BASIC.Assoc_SalesOrder_SalesOrderLineItems" FromRole="FromRole_Assoc_SalesOrder_SalesOrderLineItems" ToRole="ToRole_Assoc_SalesOrder_SalesOrderLineItems"/>
           </EntityType>
           <EntityType Name="SalesOrderLineItem">
            <Key><PropertyRef Name="SalesOrderID"/><PropertyRef Name="ItemPosition"/></Key>
            <Property Name="SalesOrderID" Type="Edm.String" Nullable="false" MaxLength="10"/>
            <Property Name="ItemPosition" Type="Edm.String" Nullable="false" MaxLength="10"/>
            <Property Name="ProductID" Type="Edm.String" Nullable="false" MaxLength="10"/>
            <Property Name="Quantity" Type="Edm.Decimal" Precision="13" Scale="3"/>
           </EntityType>
           <Association Name="Assoc_BusinessPartner_SalesOrders">
            <End Type="GWSAMPLE_BASIC.BusinessPartner" Multiplicity="1" Role="FromRole_Assoc_BusinessPartner_SalesOrders"/>
            <End Type="GWSAMPLE_BASIC.SalesOrder" Multiplicity="*" Role="ToRole_Assoc_BusinessPartner_SalesOrders"/>
            <ReferentialConstraint>
             <Principal Role="FromRole_Assoc_BusinessPartner_SalesOrders"><PropertyRef Name="BusinessPartnerID"/></Principal>
             <Dependent Role="ToRole_Assoc_BusinessPartner_SalesOrders"><PropertyRef Name="CustomerID"/></Dependent>
            </ReferentialConstraint>
           </Association>
           <Association Name="Assoc_SalesOrder_SalesOrderLineItems">
            <End Type="GWSAMPLE_BASIC.SalesOrder" Multiplicity="1" Role="FromRole_Assoc_SalesOrder_SalesOrderLineItems"/>
            <End Type="GWSAMPLE_BASIC.SalesOrderLineItem" Multiplicity="*" Role="ToRole_Assoc_SalesOrder_SalesOrderLineItems"/>
            <ReferentialConstraint>
             <Principal Role="FromRole_Assoc_SalesOrder_SalesOrderLineItems"><PropertyRef Name="SalesOrderID"/></Principal>
             <Dependent Role="ToRole_Assoc_SalesOrder_SalesOrderLineItems"><PropertyRef Name="SalesOrderID"/></Dependent>
            </ReferentialConstraint>
           </Association>
           <EntityContainer Name="GWSAMPLE_BASIC_Entities" m:IsDefaultEntityContainer="true">
            <EntitySet Name="BusinessPartnerSet" EntityType="GWSAMPLE_BASIC.BusinessPartner"/>
            <EntitySet Name="ProductSet" EntityType="GWSAMPLE_BASIC.Product"/>
            <EntitySet Name="SalesOrderSet" EntityType="GWSAMPLE_BASIC.SalesOrder"/>
            <EntitySet Name="SalesOrderLineItemSet" EntityType="GWSAMPLE_BASIC.SalesOrderLineItem"/>
            <AssociationSet Name="Assoc_BusinessPartner_SalesOrders_AssocSet" Association="GWSAMPLE_BASIC.Assoc_BusinessPartner_SalesOrders">
             <End EntitySet="BusinessPartnerSet" Role="FromRole_Assoc_BusinessPartner_SalesOrders"/>
             <End EntitySet="SalesOrderSet" Role="ToRole_Assoc_BusinessPartner_SalesOrders"/>
            </AssociationSet>
            <AssociationSet Name="Assoc_SalesOrder_SalesOrderLineItems_AssocSet" Association="GWSAMPLE_BASIC.Assoc_SalesOrder_SalesOrderLineItems">
             <End EntitySet="SalesOrderSet" Role="FromRole_Assoc_SalesOrder_SalesOrderLineItems"/>
             <End EntitySet="SalesOrderLineItemSet" Role="ToRole_Assoc_SalesOrder_SalesOrderLineItems"/>
            </AssociationSet>
           </EntityContainer>
          </Schema>
         </edmx:DataServices>
        </edmx:Edmx>
        """

    /// A sales app's file, written after SAP's documented layout: an endpoint with indexes and
    /// settings, then its defining requests. Line numbers matter to the tests: one line per entry.
    static let realistic = [
        "# Offline configuration of the field sales app",  // 1
        "; exported from the Mobile Services cockpit",  // 2
        "",  // 3
        "[endpoint]",  // 4
        "name=http://gateway.example.com/sap/opu/odata/IWBEP/GWSAMPLE_BASIC",  // 5
        "prepopulate_offline_db=SHARED-ONLY",  // 6
        "indexed_type=GWSAMPLE_BASIC.Product: Category, Price DESC",  // 7
        "indexed_type=GWSAMPLE_BASIC.BusinessPartner: Address/Country",  // 8
        "indexed_type=GWSAMPLE_BASIC.SalesOrderLineItem: ProductID ASC",  // 9
        "request_format=application/json;q=1,application/atom+xml;q=0.5",  // 10
        "case_sensitive_offline_db=Y",  // 11
        "local_change_expiry=1440",  // 12
        "allow_defining_query_removal=Y",  // 13
        "delta_enabled=Y",  // 14
        "",  // 15
        "[defining_request]",  // 16
        "name=SG_Sales",  // 17
        "defining_query=/BusinessPartnerSet?$filter=Address/Country eq 'DE'&$expand=ToSalesOrders/ToLineItems",  // 18
        "is_shared_data=N",  // 19
        "",  // 20
        "[defining_request]",  // 21
        "name=SG_Product",  // 22
        "defining_query=ProductSet",  // 23
        "is_shared_data=Y",  // 24
        "refresh_interval=60",  // 25
    ]

    static func bytes(_ lines: [String]) -> [UInt8] { Array(lines.joined(separator: "\n").utf8) }

    static func read(
        _ lines: [String], endpoint: String? = nil
    ) throws -> (
        configuration: StoreConfiguration, warnings: [StoreConfiguration.INIWarning]
    ) {
        try StoreConfiguration.readINI(bytes(lines), metadata: Array(metadata.utf8), endpoint: endpoint)
    }

    @Test func aRealisticFileMapsWhatMapsAndWarnsAboutTheRest() throws {
        let (c, warnings) = try Self.read(Self.realistic)
        #expect(c.serviceRoot == "http://gateway.example.com/sap/opu/odata/IWBEP/GWSAMPLE_BASIC/")
        #expect(
            c.definingRequests == [
                .init(
                    name: "SG_Sales",
                    url: "BusinessPartnerSet?$filter=Address/Country eq 'DE'&$expand=ToSalesOrders/ToLineItems"),
                .init(name: "SG_Product", url: "ProductSet"),
            ])
        #expect(
            c.indexes == [
                "ProductSet": ["Category,Price DESC"], "BusinessPartnerSet": ["Address/Country"],
                "SalesOrderLineItemSet": ["ProductID"],
            ])
        // Everything else keeps the store's defaults.
        var rest = c
        rest.serviceRoot = nil
        rest.definingRequests = []
        rest.indexes = [:]
        #expect(rest == StoreConfiguration())
        #expect(
            warnings.map { "\($0.line) \($0.section) \($0.key)" } == [
                "6 [endpoint] http://gateway.example.com/sap/opu/odata/IWBEP/GWSAMPLE_BASIC prepopulate_offline_db",
                "10 [endpoint] http://gateway.example.com/sap/opu/odata/IWBEP/GWSAMPLE_BASIC request_format",
                "12 [endpoint] http://gateway.example.com/sap/opu/odata/IWBEP/GWSAMPLE_BASIC local_change_expiry",
                "24 [defining_request] SG_Product is_shared_data",
                "25 [defining_request] SG_Product refresh_interval",
            ])
        #expect(
            warnings[2].description
                == "line 12, [endpoint] http://gateway.example.com/sap/opu/odata/IWBEP/GWSAMPLE_BASIC: local_change_expiry=1440: local changes never expire: a request stays in the RequestQueue until flush sends it, undo drops it, or its error is resolved"
        )
        // The configuration makes a store: the indexes exist, the defining requests are kept.
        let dir = tempDir()
        let store = try OfflineStore.create(at: dir + "/s", metadata: Array(Self.metadata.utf8), configuration: c)
        #expect(store.definingRequests.map(\.name) == ["SG_Sales", "SG_Product"])
        #expect(store.configuration.indexes["ProductSet"] == ["Category,Price DESC"])
        #expect(try store.entities("ProductSet?$filter=Category eq 'Notebooks'").isEmpty)
    }

    /// Keys whose value is what the store does: read, no warning.
    @Test(arguments: [
        "name=https://gw.example.com/sap/opu/odata/IWBEP/GWSAMPLE_BASIC/",
        "service_root=http://127.0.0.1:8080/sap/opu/odata/IWBEP/GWSAMPLE_BASIC",
        "indexed_type=GWSAMPLE_BASIC.Product: Name",
        "indexed_type=Product: Name DESC",
        "indexed_type=ProductSet: Category ASC, Name",
        "allow_defining_query_removal=Y",
        "delta_enabled=yes",
        "offline_db_collation=UTF8BIN",
        "case_sensitive_offline_db=Y",
        "json_datetimeoffset_in_utc=N",
        "allow_omitting_max_length_facet=Y",
        "content_id_header_location=mime",
    ])
    func anEndpointKeyThatMapsGivesNoWarning(line: String) throws {
        let named = line.hasPrefix("name=")
        let (c, warnings) = try Self.read(named ? ["[endpoint]", line] : ["[endpoint]", "name=http://h/svc/", line])
        #expect(warnings.isEmpty, "\(warnings)")
        if named { #expect(c.serviceRoot == "https://gw.example.com/sap/opu/odata/IWBEP/GWSAMPLE_BASIC/") }
        if line.hasPrefix("indexed_type") { #expect(c.indexes["ProductSet"]?.count == 1, "\(c.indexes)") }
        if line.hasPrefix("service_root") {
            #expect(c.serviceRoot == "http://127.0.0.1:8080/sap/opu/odata/IWBEP/GWSAMPLE_BASIC/")
        }
    }

    @Test(
        arguments: [
            ("defining_query=ProductSet", "SG_Product", "ProductSet"),
            (
                "query=/ProductSet?$filter=Category eq 'Notebooks'", "SG_Product",
                "ProductSet?$filter=Category eq 'Notebooks'"
            ),
            ("url=ProductSet", "SG_Product", "ProductSet"),
            ("request=ProductSet", "SG_Product", "ProductSet"),
            ("defining_request=ProductSet", "SG_Product", "ProductSet"),
            ("is_shared_data=N", nil, nil),
            ("download_cache_only=N", nil, nil),
            ("automatic_delta=Y", nil, nil),
            ("delta_enabled=Y", nil, nil),
            ("track_deltas=AUTO", nil, nil),
        ] as [(String, String?, String?)])
    func aDefiningRequestKeyThatMapsGivesNoWarning(line: String, name: String?, url: String?) throws {
        // Without a URL key, the name is the request (SMP 3's form).
        let lines = ["[endpoint]", "name=http://h/svc/", "[defining_request]", "name=\(name ?? "ProductSet")", line]
        let (c, warnings) = try Self.read(lines)
        #expect(warnings.isEmpty, "\(warnings)")
        #expect(c.definingRequests == [.init(name: name ?? "ProductSet", url: url ?? "ProductSet")])
    }

    @Test func smp3NamesThatAreURLsGetAStoreNameAndAWarning() throws {
        let (c, warnings) = try Self.read([
            "[endpoint]", "name=http://h/svc/", "[defining_query]", "name=/ProductSet?$filter=Category eq 'Notebooks'",
        ])
        #expect(
            c.definingRequests == [
                .init(
                    name: "ProductSet_filter_Category_eq_Notebooks", url: "ProductSet?$filter=Category eq 'Notebooks'")
            ])
        #expect(warnings.count == 1)
        #expect(warnings.first?.line == 4 && warnings.first?.key == "name", "\(warnings)")
        #expect(
            warnings.first?.section == "[defining_query] /ProductSet?$filter=Category eq 'Notebooks'", "\(warnings)")
    }

    /// Every key the store handles differently or not at all: one warning, naming the key and the
    /// section, at the key's line.
    @Test(arguments: [
        ("prepopulate_offline_db=Y", "the store starts empty"),
        ("prepopulate_offline_db_interval=1440", "no shared data is prepared"),
        ("request_format=application/atom+xml", "JSON only"),
        ("defining_query_format=application/json", "JSON only"),
        ("delta_request_format=application/atom+xml", "JSON only"),
        ("delta_query_format=application/atom+xml", "JSON only"),
        ("offline_db_collation=UTF8_GERMAN", "code point"),
        ("case_sensitive_offline_db=N", "case-sensitive"),
        ("json_datetimeoffset_in_utc=Y", "keep the offset"),
        ("local_change_expiry=60", "never expire"),
        ("allow_omitting_max_length_facet=N", "unbounded"),
        ("content_id_header_location=operation", "MIME headers"),
        ("max_delta_resends=3", "no delta resends"),
        ("allow_defining_query_removal=N", "undefine always removes"),
        ("early_populate_backend_generated_values=Y", "next refresh after flush"),
        ("delta_enabled=N", "cannot be switched off"),
        ("batch_all_defining_queries=Y", "one after another"),
        ("page_size=500", "refresh --page-size 500"),
        ("indexed_type=GWSAMPLE_BASIC.Product: Category ASC", "given twice"),
        ("no_such_key=1", "not a key this store knows"),
    ])
    func anEndpointKeyThatDiffersWarns(line: String, fragment: String) throws {
        let key = String(line.prefix { $0 != "=" })
        var lines = ["[endpoint]", "name=http://h/svc/", line]
        // An index given twice: the same definition on a second line.
        if key == "indexed_type" { lines.insert("indexed_type=ProductSet: Category", at: 2) }
        let (_, warnings) = try Self.read(lines)
        #expect(warnings.count == 1, "\(warnings)")
        let w = try #require(warnings.first)
        #expect(w.line == lines.count && w.key == key && w.section == "[endpoint] http://h/svc/", "\(w)")
        #expect(w.message.contains(fragment), "\(w)")
        #expect(w.description.hasPrefix("line \(lines.count), [endpoint] http://h/svc/: \(line): "), "\(w)")
    }

    @Test(arguments: [
        ("is_shared_data=Y", "no shared cache"),
        ("refresh_interval=30", "nothing refreshes on a schedule"),
        ("download_cache_only=Y", "no download cache"),
        ("automatic_delta=N", "cannot be switched off"),
        ("delta_enabled=N", "cannot be switched off"),
        ("track_deltas=ALWAYS", "not computed on a server"),
        ("track_deltas=NEVER", "not computed on a server"),
        ("delta_token_lifetime=7", "until the service refuses it"),
        ("cache_mode=full", "not a key this store knows"),
    ])
    func aDefiningRequestKeyThatDiffersWarns(line: String, fragment: String) throws {
        let lines = [
            "[endpoint]", "name=http://h/svc/", "[defining_request]", "name=SG_Product", "url=ProductSet", line,
        ]
        let (_, warnings) = try Self.read(lines)
        #expect(warnings.count == 1, "\(warnings)")
        let w = try #require(warnings.first)
        #expect(w.line == 6 && w.key == String(line.prefix { $0 != "=" }), "\(w)")
        #expect(w.section == "[defining_request] SG_Product", "\(w)")
        #expect(w.message.contains(fragment), "\(w)")
    }

    @Test func sectionWideWarnings() throws {
        // A connection name (not a URL), a second endpoint, an unknown section.
        let lines = [
            "[endpoint]", "name=GWSAMPLE", "[defining_request]", "name=ProductSet",
            "[endpoint]", "name=OTHER", "[defining_request]", "name=SalesOrderSet",
            "[client]", "color=blue",
        ]
        let (c, warnings) = try Self.read(lines)
        #expect(c.serviceRoot == nil && c.definingRequests == [.init(name: "ProductSet", url: "ProductSet")])
        #expect(
            warnings.map { "\($0.line) \($0.section) \($0.key)" } == [
                "2 [endpoint] GWSAMPLE name", "5 [endpoint] OTHER name", "9 [client] [client]",
            ], "\(warnings)")
        #expect(warnings[1].message.contains("init --endpoint OTHER"))
        #expect(warnings[0].message.contains("connection name"))
        // The other endpoint, by name.
        let other = try Self.read(lines, endpoint: "OTHER")
        #expect(other.configuration.definingRequests == [.init(name: "SalesOrderSet", url: "SalesOrderSet")])
        #expect(other.warnings.contains { $0.line == 1 && $0.section == "[endpoint] GWSAMPLE" })
        // A service_root beside a connection name: no warning about the name.
        let rooted = try Self.read(["[endpoint]", "name=GWSAMPLE", "service_root=http://h/svc"])
        #expect(rooted.warnings.isEmpty && rooted.configuration.serviceRoot == "http://h/svc/")
    }

    /// Syntax errors and values the store cannot take: an error with the line.
    @Test(
        arguments: [
            (["name=x"], 1, "comes before any section"),
            (["[endpoint", "name=x"], 1, "section header"),
            (["[]"], 1, "section header"),
            (["[endpoint]", "name http://h/"], 2, "expected 'key=value'"),
            (["[endpoint]", "=value"], 2, "expected a key"),
            (["[endpoint]", "# a comment", "prepopulate_offline_db=Y"], 1, "needs name="),
            (["[endpoint]", "name=a", "name=b"], 3, "given twice"),
            (["[endpoint]", "name=a", "[endpoint]", "name=a"], 4, "a second [endpoint]"),
            (["[defining_request]", "name=ProductSet"], 1, "before any [endpoint]"),
            (["# empty"], 0, "no [endpoint] section"),
            (["[endpoint]", "name=a", "delta_enabled=maybe"], 3, "must be Y or N"),
            (["[endpoint]", "name=a", "prepopulate_offline_db=SOMETIMES"], 3, "must be Y, N, SHARED-ONLY"),
            (["[endpoint]", "name=a", "local_change_expiry=-1"], 3, "whole number"),
            (["[endpoint]", "name=a", "service_root=ftp://h/"], 3, "http or https"),
            (["[endpoint]", "name=a", "", "indexed_type=GWSAMPLE_BASIC.Product Category"], 4, "indexed_type must be"),
            (["[endpoint]", "name=a", "indexed_type=GWSAMPLE_BASIC.Nope: Category"], 3, "no entity type"),
            (["[endpoint]", "name=a", "indexed_type=Product: Colour"], 3, "no property 'Colour'"),
            (["[endpoint]", "name=a", "indexed_type=Product: Category UP"], 3, "not ASC or DESC"),
            (
                ["[endpoint]", "name=a", "indexed_type=BusinessPartner: Address/Planet"], 3,
                "no property 'Address/Planet'"
            ),
            (["[endpoint]", "name=a", "[defining_request]", "url=ProductSet"], 3, "needs name="),
            (["[endpoint]", "name=a", "[defining_request]", "name=SG", "url=NoSuchSet"], 5, "NoSuchSet"),
            (["[endpoint]", "name=a", "[defining_request]", "name=SG_Product"], 4, "defining_query="),
            (
                ["[endpoint]", "name=a", "[defining_request]", "name=SG", "url=ProductSet", "query=ProductSet"], 6,
                "one URL"
            ),
            (["[endpoint]", "name=a", "[defining_request]", "name=bad name", "url=ProductSet"], 4, "bad name"),
            (
                [
                    "[endpoint]", "name=a", "[defining_request]", "name=P", "url=ProductSet", "[defining_request]",
                    "name=P", "url=ProductSet",
                ],
                7, "a second defining request"
            ),
            (
                ["[endpoint]", "name=a", "[defining_request]", "name=SG", "url=ProductSet", "is_shared_data=1x"], 6,
                "Y or N"
            ),
        ] as [([String], Int, String)])
    func errorsNameTheirLine(lines: [String], line: Int, fragment: String) throws {
        do {
            let read = try Self.read(lines)
            Issue.record("no error: \(read)")
        } catch let e as StoreConfiguration.INIError {
            #expect(e.line == line, "\(e)")
            #expect(e.message.contains(fragment), "\(e)")
        }
    }

    @Test func notUTF8IsAnErrorWithItsLine() throws {
        let bytes = Array("[endpoint]\nname=a\n".utf8) + [0x63, 0xFF, 0x3D, 0x31]
        #expect(throws: StoreConfiguration.INIError(line: 3, message: "not UTF-8 text")) {
            try StoreConfiguration.readINI(bytes, metadata: Array(Self.metadata.utf8))
        }
    }

    @Test func formIsChosenByExtensionThenContent() {
        #expect(StoreConfiguration.isINI(path: "app.ini", bytes: Array("{}".utf8)))
        #expect(StoreConfiguration.isINI(path: "APP.INI", bytes: []))
        #expect(!StoreConfiguration.isINI(path: "c.json", bytes: Array("[endpoint]".utf8)))
        #expect(StoreConfiguration.isINI(path: "conf", bytes: Array("\u{FEFF}# x\n[endpoint]\nname=a".utf8)))
        #expect(!StoreConfiguration.isINI(path: "conf", bytes: Array("\n  {\"indexes\": {}}".utf8)))
    }

    // MARK: the tool

    @Test func initWithAnINIPrintsTheWarningsAndMakesTheStore() throws {
        let dir = tempDir()
        try write(Self.metadata, to: dir + "/metadata.xml")
        try write(Self.realistic.joined(separator: "\r\n"), to: dir + "/app.ini")
        let r = try CLI.run([
            "init", "--store", dir + "/s", "--metadata", dir + "/metadata.xml", "--config", dir + "/app.ini",
        ])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("created \(dir)/s: 4 entity sets"), "\(r.stdout)")
        // The configuration's warnings, and one of the store's own: its defining requests read
        // sets whose $metadata declares no concurrency control.
        let all = r.stderr.split(separator: "\n").map(String.init)
        let lines = all.filter { !$0.contains("declares no concurrency control") }
        #expect(all.count - lines.count == 1, "\(r.stderr)")
        #expect(lines.count == 5, "\(r.stderr)")
        #expect(lines.allSatisfy { $0.hasPrefix("offline-store: warning: \(dir)/app.ini line ") }, "\(r.stderr)")
        #expect(
            lines.contains {
                $0.contains(
                    "app.ini line 12, [endpoint] http://gateway.example.com/sap/opu/odata/IWBEP/GWSAMPLE_BASIC: local_change_expiry=1440: local changes never expire"
                )
            }, "\(r.stderr)")
        #expect(
            lines.contains { $0.contains("line 24, [defining_request] SG_Product: is_shared_data=Y") }, "\(r.stderr)")
        let stats = try CLI.run(["stats", "--store", dir + "/s"])
        #expect(stats.stdout.contains("index Category,Price DESC"), "\(stats.stdout)")
        #expect(stats.stdout.contains("index Address/Country"), "\(stats.stdout)")
        let store = try OfflineStore.open(at: dir + "/s", readOnly: true)
        #expect(store.definingRequests.map(\.name) == ["SG_Sales", "SG_Product"])
        #expect(store.configuration.serviceRoot == "http://gateway.example.com/sap/opu/odata/IWBEP/GWSAMPLE_BASIC/")
    }

    @Test func initReportsAnINIErrorWithFileAndLineAndMakesNothing() throws {
        let dir = tempDir()
        try write(Self.metadata, to: dir + "/metadata.xml")
        try write("[endpoint]\nname=a\nindexed_type=Product: Colour\n", to: dir + "/app.ini")
        let r = try CLI.run([
            "init", "--store", dir + "/s", "--metadata", dir + "/metadata.xml", "--config", dir + "/app.ini",
        ])
        #expect(r.status != 0)
        #expect(
            r.stderr
                == "offline-store: \(dir)/app.ini line 3: indexed_type: the entity type 'GWSAMPLE_BASIC.Product' has no property 'Colour'\n",
            "\(r.stderr)")
        #expect(!FileManager.default.fileExists(atPath: dir + "/s"))
    }

    @Test func initTellsTheFormsApartByContentAndTakesAnEndpoint() throws {
        let dir = tempDir()
        try write(Self.metadata, to: dir + "/metadata.xml")
        // No extension: INI by content, the second endpoint chosen.
        try write(
            "[endpoint]\nname=http://a/svc/\n[endpoint]\nname=http://b/svc/\n[defining_query]\nname=ProductSet\n",
            to: dir + "/offline")
        let ini = try CLI.run([
            "init", "--store", dir + "/s1", "--metadata", dir + "/metadata.xml", "--config", dir + "/offline",
            "--endpoint", "http://b/svc/",
        ])
        #expect(ini.status == 0, "\(ini.stderr)")
        #expect(ini.stderr.contains("line 1, [endpoint] http://a/svc/: name=http://a/svc/: not used"), "\(ini.stderr)")
        #expect(try OfflineStore.open(at: dir + "/s1", readOnly: true).configuration.serviceRoot == "http://b/svc/")
        // No extension, JSON by content.
        try write(#"{"serviceRoot": "http://c/svc/", "indexes": {"ProductSet": ["Name"]}}"#, to: dir + "/conf")
        let json = try CLI.run([
            "init", "--store", dir + "/s2", "--metadata", dir + "/metadata.xml", "--config", dir + "/conf",
        ])
        #expect(json.status == 0 && json.stderr.isEmpty, "\(json.stderr)")
        let unknown = try CLI.run([
            "init", "--store", dir + "/s3", "--metadata", dir + "/metadata.xml", "--config", dir + "/offline",
            "--endpoint", "nope",
        ])
        #expect(unknown.status != 0 && unknown.stderr.contains("no [endpoint] named 'nope'"), "\(unknown.stderr)")
    }
}
