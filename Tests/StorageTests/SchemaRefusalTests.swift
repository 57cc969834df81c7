import Foundation
import Testing
@testable import Storage

/// Schemas the store cannot hold are refused when the store is created, with a message naming
/// the type, and leave nothing behind. Before, each was accepted and failed later: a complex-type
/// cycle made `generate` recurse until SIGSEGV, a complex key failed at the first write, 10,000
/// entity sets gave a raw MDB_DBS_FULL.
@Suite(.runsOffThePool) struct SchemaRefusalTests {
    static func document(_ types: String, sets: String) -> String {
        """
        <?xml version="1.0" encoding="utf-8"?>
        <edmx:Edmx Version="4.0" xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx">
         <edmx:DataServices><Schema Namespace="T" xmlns="http://docs.oasis-open.org/odata/ns/edm">
         \(types)
         <EntityContainer Name="C">\(sets)</EntityContainer>
         </Schema></edmx:DataServices>
        </edmx:Edmx>
        """
    }

    static func entity(
        _ extra: String, key: String = #"<Property Name="id" Type="Edm.Int32" Nullable="false"/>"#,
        keyName: String = "id"
    ) -> String {
        #"<EntityType Name="E"><Key><PropertyRef Name="\#(keyName)"/></Key>\#(key)\#(extra)</EntityType>"#
    }

    static let oneSet = #"<EntitySet Name="Es" EntityType="T.E"/>"#

    /// The error `EntityStore.create` gives for `xml`, checking that nothing was left behind.
    func refusal(_ xml: String) throws -> String? {
        let dir = temporaryDirectory() + "/store"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        do {
            _ = try EntityStore.create(path: dir, metadata: Array(xml.utf8), configuration: StorageSettings())
            return nil
        } catch {
            #expect(!FileManager.default.fileExists(atPath: dir), "a refused create left \(dir)")
            return "\(error)"
        }
    }

    @Test(arguments: [
        // (types, expected words in the error)
        (
            #"<ComplexType Name="A"><Property Name="b" Type="T.B" Nullable="false"/></ComplexType><ComplexType Name="B"><Property Name="a" Type="T.A" Nullable="false"/></ComplexType>"#
                + entity(#"<Property Name="x" Type="T.A"/>"#), "complex type T.A contains itself"
        ),
        (
            #"<ComplexType Name="A"><Property Name="me" Type="T.A" Nullable="false"/></ComplexType>"# + entity(""),
            "T.A.me"
        ),
        (
            #"<ComplexType Name="K"><Property Name="v" Type="Edm.Int32"/></ComplexType>"#
                + entity("", key: #"<Property Name="k" Type="T.K" Nullable="false"/>"#, keyName: "k"),
            "key property k has type T.K"
        ),
        (
            entity("", key: #"<Property Name="k" Type="Collection(Edm.Int32)" Nullable="false"/>"#, keyName: "k"),
            "key property k"
        ),
        (
            entity("", key: #"<Property Name="k" Type="Edm.GeographyPoint" Nullable="false"/>"#, keyName: "k"),
            "key property k"
        ),
        (entity(#"<Property Name="s" Type="Edm.String" MaxLength="0"/>"#), "property s has MaxLength=0"),
        (entity(#"<Property Name="d" Type="Edm.Decimal" Precision="0"/>"#), "property d has Precision=0"),
        (entity(#"<Property Name="d" Type="Edm.Decimal" Precision="4" Scale="5"/>"#), "Scale=5 above its Precision=4"),
    ])
    func refusedAtCreate(types: String, expected: String) throws {
        let message = try refusal(Self.document(types, sets: Self.oneSet))
        #expect(message?.contains(expected) == true, "\(message ?? "accepted")")
    }

    @Test func acceptedNearMisses() throws {
        // A cycle through a nullable property or a collection ends; an enum key is ordered.
        let ok = [
            #"<ComplexType Name="A"><Property Name="b" Type="T.B" Nullable="false"/></ComplexType><ComplexType Name="B"><Property Name="a" Type="T.A"/></ComplexType>"#
                + Self.entity(#"<Property Name="x" Type="T.A"/>"#),
            #"<ComplexType Name="A"><Property Name="kids" Type="Collection(T.A)" Nullable="false"/></ComplexType>"#
                + Self.entity(#"<Property Name="x" Type="T.A"/>"#),
            #"<EnumType Name="S"><Member Name="a" Value="0"/></EnumType>"#
                + Self.entity("", key: #"<Property Name="k" Type="T.S" Nullable="false"/>"#, keyName: "k"),
            Self.entity(
                #"<Property Name="s" Type="Edm.String" MaxLength="max"/><Property Name="d" Type="Edm.Decimal" Precision="4" Scale="4"/>"#
            ),
        ]
        for types in ok {
            #expect(try refusal(Self.document(types, sets: Self.oneSet)) == nil, "\(types)")
        }
    }

    @Test func tooManyEntitySets() throws {
        let sets = (0..<10_000).map { #"<EntitySet Name="S\#($0)" EntityType="T.E"/>"# }.joined()
        let message = try refusal(Self.document(Self.entity(""), sets: sets))
        #expect(message?.contains("the schema has 10000 entity sets") == true, "\(message ?? "accepted")")
    }
}
