import OfflineStore

/// One query of the query workloads: what it asks (`kind`), its OData URL (for OfflineStore; built
/// once, outside the timing, as the other contestants' keys and arguments are), and what the raw
/// LMDB and SQLite contestants do by hand for the same answer.
struct BenchQuery: Sendable, CustomStringConvertible {
    enum Kind: Sendable {
        /// One item by its composite key.
        case key(ItemKey)
        /// All items of one product, through the `ProductID` index (~100).
        case product(String)
        /// Items delivered in `[from, until)` (days since 1970), ordered by `DeliveryDate` (ties by
        /// key), the first `top`: through the `DeliveryDate` index, stopping after `top`.
        case deliveries(from: Int32, until: Int32, top: Int)
        /// Items in `filterCurrency` with a net amount below `filterNetBelow`: neither property is
        /// indexed in any contestant, so every row is read and the predicate checked (~0.5% match).
        case cheapInCurrency
    }

    static let filterCurrency = "BRL"
    /// Thousandths: 5.000.
    static let filterNetBelow: Int64 = 5_000

    let kind: Kind
    let url: String

    init(_ kind: Kind) {
        self.kind = kind
        func quoted(_ s: String) -> String { "'" + s.replacingOccurrences(of: "'", with: "''") + "'" }
        switch kind {
        case .key(let k):
            url = "\(BenchSchema.set)(SalesOrderID=\(quoted(k.salesOrderID)),ItemPosition=\(k.itemPosition))"
        case .product(let p):
            url = "\(BenchSchema.set)?$filter=ProductID eq \(quoted(p))"
        case .deliveries(let from, let until, let top):
            url =
                "\(BenchSchema.set)?$filter=DeliveryDate ge \(EDMDate(days: from)) and DeliveryDate lt \(EDMDate(days: until))&$orderby=DeliveryDate&$top=\(top)"
        case .cheapInCurrency:
            url =
                "\(BenchSchema.set)?$filter=CurrencyCode eq \(quoted(Self.filterCurrency)) and NetAmount lt \(Self.filterNetBelow / 1000)"
        }
    }

    /// Whether the result has an order every contestant must keep (`$orderby`); otherwise results
    /// are compared as sets.
    var isOrdered: Bool {
        if case .deliveries = kind { return true }
        return false
    }

    var description: String { url }
}
