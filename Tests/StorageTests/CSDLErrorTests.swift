import Testing
@testable import Storage

@Suite(.runsOffThePool) struct CSDLErrorTests {
    /// The error parsing `text` throws, or nil when it parses.
    func error(_ text: String) -> CSDLError? {
        do {
            _ = try CSDL.parse(text)
            return nil
        } catch {
            return error
        }
    }

    @Test(arguments: ["", "hello, world", "{\"not\": \"xml\"}", "<a><b></a>", "<edmx:Edmx Version=\"4.0\">"])
    func notXML(_ text: String) throws {
        let failure = try #require(error(text))
        #expect(!failure.message.isEmpty)
    }

    @Test func malformedReportsLine() throws {
        let failure = try #require(error(CSDLFixtures.v4(schema: "<EntityType Name=\"A\">\n<Key>\n</EntityType>")))
        #expect(failure.message == "malformed XML (mismatched end tag)")
        #expect(failure.line == 7)
    }

    @Test func encodings() throws {
        var broken = Array(CSDLFixtures.gwsample.utf8)
        broken.insert(0xC3, at: broken.count / 2)
        #expect(throws: CSDLError("not an XML document: not valid UTF-8")) { try CSDL.parse(broken) }

        let latin1 =
            Array(
                #"""
                <?xml version="1.0" encoding="ISO-8859-1"?>
                <edmx:Edmx Version="4.0" xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx"><edmx:DataServices>
                <Schema Namespace="NS" xmlns="http://docs.oasis-open.org/odata/ns/edm"><EntityType Name="Caf
                """#.utf8) + [0xE9]
            + Array(
                #"""
                "><Property Name="ID" Type="Edm.Int32"/></EntityType></Schema></edmx:DataServices></edmx:Edmx>
                """#.utf8)
        do {
            _ = try CSDL.parse(latin1)
            Issue.record("a type without key must not parse")
        } catch {
            #expect(error.element == "EntityType 'Café'" && error.line == 3)
        }
    }

    @Test func deepNestingIsRefused() throws {
        let deep = String(repeating: "<a>", count: 100_000) + String(repeating: "</a>", count: 100_000)
        #expect(error(deep)?.message.contains("nested") == true)
    }

    @Test func missingStructure() throws {
        #expect(error("<Schema Namespace=\"X\"/>")?.element == "Schema")
        let v4 = "<edmx:Edmx Version=\"4.0\" xmlns:edmx=\"http://docs.oasis-open.org/odata/ns/edmx\">"
        #expect(error(v4 + "</edmx:Edmx>")?.message == "no DataServices element")
        #expect(error(v4 + "<edmx:DataServices/></edmx:Edmx>")?.message == "no Schema element")
        let future = "<edmx:Edmx Version=\"9.0\"><edmx:DataServices/></edmx:Edmx>"  // undeclared prefix is tolerated
        #expect(error(future)?.message.contains("9.0") == true)
    }

    @Test func missingKey() throws {
        let doc = CSDLFixtures.v4(
            schema: """
                <EntityType Name="Thing">
                  <Property Name="ID" Type="Edm.Int32"/>
                </EntityType>
                """)
        let failure = try #require(error(doc))
        #expect(failure.element == "EntityType 'Thing'")
        #expect(failure.line == 5)
        #expect(failure.message.contains("Key"))
        #expect(failure.description.contains("line 5") && failure.description.contains("Thing"))
    }

    @Test func abstractOrDerivedWithoutKey() throws {
        let schema = try CSDL.parse(
            CSDLFixtures.v4(
                schema: """
                    <EntityType Name="Base" Abstract="true"><Property Name="A" Type="Edm.String"/></EntityType>
                    <EntityType Name="Keyed" BaseType="NS.Base"><Key><PropertyRef Name="A"/></Key></EntityType>
                    <EntityType Name="Leaf" BaseType="NS.Keyed"><Property Name="B" Type="Edm.String"/></EntityType>
                    """))
        #expect(schema.entityTypes["NS.Base"]?.key == [])
        #expect(schema.entityTypes["NS.Leaf"]?.key == ["A"])
        #expect(schema.entityTypes["NS.Leaf"]?.properties.map(\.name) == ["A", "B"])
        let failure = error(
            CSDLFixtures.v4(
                schema: """
                    <EntityType Name="Base" Abstract="true"><Property Name="A" Type="Edm.String"/></EntityType>
                    <EntityType Name="Leaf" BaseType="NS.Base"/>
                    """))
        #expect(failure?.element == "EntityType 'Leaf'")
    }

    @Test func keyNamesMissingProperty() throws {
        let failure = try #require(
            error(
                CSDLFixtures.v4(
                    schema: """
                        <EntityType Name="Thing"><Key><PropertyRef Name="Nope"/></Key><Property Name="ID" Type="Edm.Int32"/></EntityType>
                        """)))
        #expect(failure.element == "PropertyRef 'Nope'")
        #expect(failure.message.contains("Thing"))
    }

    @Test func unknownPropertyType() throws {
        let failure = try #require(
            error(
                CSDLFixtures.v4(
                    schema: """
                        <EntityType Name="Thing"><Key><PropertyRef Name="ID"/></Key>
                        <Property Name="ID" Type="Edm.Int32"/>
                        <Property Name="Bad" Type="NS.Missing"/>
                        </EntityType>
                        """)))
        #expect(failure.element == "Property 'Bad'")
        #expect(failure.message.contains("NS.Missing"))
        #expect(failure.line == 7)
    }

    @Test func unknownNavigationTarget() throws {
        let failure = try #require(
            error(
                CSDLFixtures.v4(
                    schema: """
                        <EntityType Name="Thing"><Key><PropertyRef Name="ID"/></Key><Property Name="ID" Type="Edm.Int32"/>
                        <NavigationProperty Name="Other" Type="Collection(NS.Ghost)"/></EntityType>
                        """)))
        #expect(failure.element == "NavigationProperty 'Other'")
        #expect(failure.message.contains("NS.Ghost"))
    }

    @Test func unknownEntitySetType() throws {
        let failure = try #require(
            error(
                CSDLFixtures.v4(
                    schema: """
                        <EntityContainer Name="C"><EntitySet Name="Ghosts" EntityType="NS.Ghost"/></EntityContainer>
                        """)))
        #expect(failure.element == "EntitySet 'Ghosts'")
    }

    @Test func otherInvalidDeclarations() throws {
        let keyed = "<Key><PropertyRef Name=\"ID\"/></Key><Property Name=\"ID\" Type=\"Edm.Int32\"/>"
        let cycle = error(
            CSDLFixtures.v4(
                schema: """
                    <EntityType Name="A" BaseType="NS.B">\(keyed)</EntityType><EntityType Name="B" BaseType="NS.A"/>
                    """))
        #expect(cycle?.message.contains("cycle") == true)
        let unknownBase = error(CSDLFixtures.v4(schema: "<ComplexType Name=\"C\" BaseType=\"NS.Nope\"/>"))
        #expect(unknownBase?.element == "ComplexType 'C'")
        let badEnum = error(
            CSDLFixtures.v4(schema: "<EnumType Name=\"E\"><Member Name=\"X\" Value=\"one\"/></EnumType>"))
        #expect(badEnum?.element == "Member 'X'")
        let outOfRange = error(
            CSDLFixtures.v4(
                schema: """
                    <EnumType Name="E" UnderlyingType="Edm.Byte"><Member Name="X" Value="300"/></EnumType>
                    """))
        #expect(outOfRange?.element == "Member 'X'")
        let unnamed = error(CSDLFixtures.v4(schema: "<EntityType><Key/></EntityType>"))
        #expect(unnamed?.element == "EntityType")
        let unknownAssociation = error(
            CSDLFixtures.v4(
                schema: """
                    <EntityType Name="A">\(keyed)<NavigationProperty Name="N" Relationship="NS.Nope" FromRole="a" ToRole="b"/></EntityType>
                    """))
        #expect(unknownAssociation?.element == "NavigationProperty 'N'")
    }

    @Test func typeDefinitionAndSkippedElements() throws {
        let schema = try CSDL.parse(
            CSDLFixtures.v4(
                schema: """
                    <TypeDefinition Name="Text" UnderlyingType="Edm.String"><Annotation Term="X.Y"/></TypeDefinition>
                    <EntityType Name="A"><Key><PropertyRef Name="ID"/></Key>
                    <Property Name="ID" Type="NS.Text" Nullable="false"/><Property Name="Blob" Type="Edm.Stream"/>
                    <Unknown Whatever="1"><Property Name="Ignored" Type="Nowhere.Type"/></Unknown></EntityType>
                    <Term Name="T" Type="Edm.String"/><Function Name="F"><ReturnType Type="NS.Unknown"/></Function>
                    """))
        #expect(
            schema.entityTypes["NS.A"]?.properties == [Property(name: "ID", type: .primitive(.string), nullable: false)]
        )
    }

    @Test func truncatedDocumentsThrow() {
        for document in [CSDLFixtures.v4, CSDLFixtures.gwsample, CSDLFixtures.northwindV3] {
            let bytes = Array(document.utf8)
            guard let end = bytes.lastIndex(of: UInt8(ascii: ">")) else { continue }
            var cuts = Array(stride(from: 0, to: end, by: 13))
            cuts += (max(0, end - 40)..<(end + 1))
            for cut in cuts {
                #expect(throws: CSDLError.self, "cut at \(cut)") { try CSDL.parse(Array(bytes[..<cut])) }
            }
        }
    }

    @Test func mutatedDocumentsNeverCrash() {
        var generator = SeededRandom(seed: 0x0DA7A)
        let alphabet = Array("<>/=\"' :.()Edm.ZxKeyName&;\u{0}\u{FF}".utf8)
        for document in [CSDLFixtures.v4, CSDLFixtures.gwsample, CSDLFixtures.northwindV3] {
            let original = Array(document.utf8)
            for _ in 0..<150 {
                var bytes = original
                for _ in 0..<Int(generator.next() % 4 + 1) {
                    let position = Int(generator.next() % UInt64(bytes.count))
                    switch generator.next() % 3 {
                    case 0: bytes[position] = alphabet[Int(generator.next() % UInt64(alphabet.count))]
                    case 1: bytes.remove(at: position)
                    default: bytes.insert(alphabet[Int(generator.next() % UInt64(alphabet.count))], at: position)
                    }
                }
                _ = try? CSDL.parse(bytes)
            }
        }
    }
}
