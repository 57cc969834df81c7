/// Which entities `OfflineStore.find(set:index:where:)` returns: a condition on the leading
/// components of an index.
///
/// ```swift
/// try store.find(set: "SalesOrderItems", index: "ProductID", where: .equals([.string("HT-1000")]))
/// try store.find(set: "SalesOrderItems", index: "Quantity DESC,ProductID",
///                where: .range(from: ValueBound(.int(5), inclusive: true), to: nil))
/// try store.find(set: "BusinessPartners", index: "Country,CompanyName", where: .startsWith(prefix: [.string("US")], "A"))
/// ```
public enum IndexCondition: Sendable, Hashable {
    /// The first `values.count` components equal `values`.
    case equals([Value])
    /// The components equal `prefix` and the next one lies between the bounds (nil: unbounded);
    /// a null never lies in a range.
    case range(prefix: [Value] = [], from: ValueBound?, to: ValueBound?)
    /// The components equal `prefix` and the next one, a string, starts with `string`.
    case startsWith(prefix: [Value] = [], String)
}
