import Foundation
import TestSupport
@testable import OfflineStore

/// A small store whose one entity set holds the extreme values of every kind the engine computes
/// with — Int64.min/max keys, Int32 bounds, 38-digit decimals, ±Double.greatestFiniteMagnitude and
/// INF, years -9999 and 9999, durations of ±Int64.max ticks — and a self-referencing navigation
/// (Parent/Children), so hostile queries meet hostile data.
enum EdgeStore {
    static let metadata = """
        <?xml version="1.0" encoding="utf-8"?>
        <edmx:Edmx Version="4.0" xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx">
          <edmx:DataServices>
            <Schema Namespace="Edge" xmlns="http://docs.oasis-open.org/odata/ns/edm">
              <EntityType Name="Thing">
                <Key><PropertyRef Name="ID"/></Key>
                <Property Name="ID" Type="Edm.Int64" Nullable="false"/>
                <Property Name="ParentID" Type="Edm.Int64"/>
                <Property Name="I64" Type="Edm.Int64"/>
                <Property Name="I32" Type="Edm.Int32"/>
                <Property Name="Dec" Type="Edm.Decimal"/>
                <Property Name="Dbl" Type="Edm.Double"/>
                <Property Name="Dt" Type="Edm.Date"/>
                <Property Name="Dto" Type="Edm.DateTimeOffset"/>
                <Property Name="Dur" Type="Edm.Duration"/>
                <Property Name="Tod" Type="Edm.TimeOfDay"/>
                <Property Name="Str" Type="Edm.String"/>
                <NavigationProperty Name="Parent" Type="Edge.Thing" Partner="Children">
                  <ReferentialConstraint Property="ParentID" ReferencedProperty="ID"/>
                </NavigationProperty>
                <NavigationProperty Name="Children" Type="Collection(Edge.Thing)" Partner="Parent"/>
              </EntityType>
              <EntityContainer Name="Container">
                <EntitySet Name="Things" EntityType="Edge.Thing">
                  <NavigationPropertyBinding Path="Parent" Target="Things"/>
                  <NavigationPropertyBinding Path="Children" Target="Things"/>
                </EntitySet>
              </EntityContainer>
            </Schema>
          </edmx:DataServices>
        </edmx:Edmx>
        """

    /// Stored values by property, as JSON texts; row `i` takes `values[i % count]`.
    static let columns: [(String, [String])] = [
        ("I64", ["9223372036854775807", "-9223372036854775808", "0", "1", "-1", "null", "2147483648"]),
        ("I32", ["2147483647", "-2147483648", "0", "-1", "null"]),
        (
            "Dec",
            [
                "99999999999999999999999999999999999999", "-99999999999999999999999999999999999999",
                "0.00000000000000000000000000000000000001", "1e300", "-1e-300", "0", "null",
            ]
        ),
        (
            "Dbl",
            [
                "1.7976931348623157e308", "-1.7976931348623157e308", "5e-324", "\"INF\"", "\"-INF\"", "\"NaN\"", "0",
                "null",
            ]
        ),
        ("Dt", ["\"9999-12-31\"", "\"-9999-01-01\"", "\"0001-01-01\"", "\"1970-01-01\"", "null"]),
        (
            "Dto",
            [
                "\"9999-12-31T23:59:59.9999999Z\"", "\"-9999-01-01T00:00:00Z\"",
                "\"9999-12-31T23:59:59.9999999+14:00\"",
                "\"-9999-01-01T00:00:00-14:00\"", "\"2024-02-29T12:00:00+05:30\"", "null",
            ]
        ),
        ("Dur", ["\"PT922337203685.4775807S\"", "\"-PT922337203685.4775807S\"", "\"P10675199D\"", "\"PT0S\"", "null"]),
        ("Tod", ["\"23:59:59.9999999\"", "\"00:00:00\"", "null"]),
        (
            "Str",
            [
                "\"\"", "\"x\"", "\"\\u001b[31mred\"", "\"" + String(repeating: "y", count: 1000) + "\"", "\"ÄÖ🙂\"",
                "null",
            ]
        ),
    ]

    /// Keys include Int64.min and Int64.max; each row's parent is another row, so Parent/Children cycle.
    static let ids: [Int64] = [.min, -1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, .max]

    static func rowsJSON() -> String {
        var rows: [String] = []
        for (i, id) in ids.enumerated() {
            var members = ["\"ID\":\(id)", "\"ParentID\":\(ids[(i + 1) / 2])"]
            for (name, values) in columns { members.append("\"\(name)\":\(values[i % values.count])") }
            rows.append("{" + members.joined(separator: ",") + "}")
        }
        return "{\"value\":[" + rows.joined(separator: ",") + "]}"
    }

    static func create(limits: QueryLimits = QueryLimits()) throws -> OfflineStore {
        let dir = TestScratch.directory("os-edge")
        let store = try OfflineStore.create(
            at: dir, metadata: Array(metadata.utf8), configuration: StoreConfiguration(limits: limits))
        _ = try store.load(set: "Things", json: Array(rowsJSON().utf8))
        return store
    }
}
