import Foundation
import Samples
import Testing
import TestSupport
@testable import OfflineStore
@testable import Storage

/// `validate` first asks `accepts` (one walk with a cursor, no look-ups by name) and runs the
/// checks one by one only when it says no. The two must agree on every entity: random ones, in
/// any order, with unknown names, wrong types, nulls, missing keys, whole and partial — and on a
/// schema whose key property the metadata leaves nullable.
@Suite(.runsOffThePool) struct ValidationFastPathTests {
    @Test func acceptsAgreesWithTheChecksOneByOne() throws {
        var r = SeededRandom(seed: testSeed("ValidationFastPathTests"))
        func below(_ n: Int) -> Int { Int.random(in: 0..<n, using: &r) }
        let nullableKey = """
            <edmx:Edmx Version="4.0" xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx"><edmx:DataServices>
            <Schema Namespace="N" xmlns="http://docs.oasis-open.org/odata/ns/edm">
            <EntityType Name="T"><Key><PropertyRef Name="ID"/></Key><Property Name="ID" Type="Edm.String"/>
            <Property Name="N" Type="Edm.Int32" Nullable="false"/><Property Name="S" Type="Edm.String" MaxLength="3"/></EntityType>
            <EntityContainer Name="C"><EntitySet Name="Ts" EntityType="N.T"/></EntityContainer></Schema>
            </edmx:DataServices></edmx:Edmx>
            """
        let sample = try LoadTests().sampleStore()
        let odd = try OfflineStore.create(at: tempDir() + "/odd", metadata: Array(nullableKey.utf8))
        let handles =
            try ["Products", "SalesOrderItems", "BusinessPartners", "SalesOrders"].map { try sample.entities.set($0) }
            + [try odd.entities.set("Ts")]
        let values: [Value] = [
            .null, .string("x"), .string(String(repeating: "y", count: 300)), .int(7), .int(1 << 40),
            .decimal(EDMDecimal("12.5")!), .bool(true), .date(EDMDate(days: 100)), .double(1.5),
        ]
        var accepted = 0, refused = 0
        for _ in 0..<4_000 {
            let h = handles[below(handles.count)]
            var props = Properties()
            // Mostly a plausible entity: keys and a few properties, in declaration order or shuffled.
            var names = h.type.properties.map(\.name).filter { h.type.key.contains($0) || below(3) > 0 }
            if below(4) == 0 { names.shuffle(using: &r) }
            if below(8) == 0 { names.append("Bogus") }
            if below(8) == 0, !names.isEmpty { names.remove(at: below(names.count)) }
            for name in names {
                let p = h.type.property(name)
                // A valid value most of the time (from the generator's kind of values), else any.
                let v: Value = below(4) == 0 || p == nil ? values[below(values.count)] : Self.plausible(p!.type, below)
                props[name] = v
            }
            let partial = below(3) == 0
            let byChecks = (try? h.validateEachCheck(props, partial: partial)) != nil
            #expect(h.accepts(props, partial: partial) == byChecks, "\(h.name) \(props) partial \(partial)")
            if byChecks { accepted += 1 } else { refused += 1 }
        }
        #expect(accepted > 500 && refused > 500, "\(accepted) accepted, \(refused) refused")
        // The nullable-in-metadata key is still required.
        let t = try odd.entities.set("Ts")
        #expect(!t.accepts(["N": .int(1)], partial: false))
        #expect(t.accepts(["N": .int(1)], partial: true))
        #expect(throws: EntityError.self) { try t.validate(["N": .int(1)], partial: false) }
    }

    static func plausible(_ type: TypeRef, _ below: (Int) -> Int) -> Value {
        switch type {
        case .primitive(.string): return .string(["a", "HT-1", "0000000001", ""][below(4)])
        case .primitive(.int32), .primitive(.int64), .primitive(.int16): return .int(Int64(below(100)))
        case .primitive(.decimal): return .decimal(EDMDecimal("\(below(1000)).\(below(100))")!)
        case .primitive(.boolean): return .bool(below(2) == 0)
        case .primitive(.date): return .date(EDMDate(days: Int32(below(20_000))))
        case .primitive(.double): return .double(Double(below(1000)) / 8)
        default: return .null
        }
    }
}
