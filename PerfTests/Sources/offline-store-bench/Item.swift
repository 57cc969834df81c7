import OfflineStore

/// One sales-order item as a program would hold it: what the raw LMDB and SQLite contestants
/// decode into, and what every contestant is loaded from.
struct Item: Sendable {
    var salesOrderID: String
    var itemPosition: Int32
    var productID: String
    var note: String?
    var quantity: Int32
    var quantityUnit: String
    /// Decimals with scale 3, as thousandths.
    var netAmount: Int64
    var taxAmount: Int64
    var grossAmount: Int64
    var currencyCode: String
    /// Days since 1970-01-01.
    var deliveryDate: Int32
    /// Ticks (100 ns) since 1970 UTC and the offset in minutes.
    var changedAt: Int64
    var changedAtOffset: Int16
    var itemGUID: (high: UInt64, low: UInt64)

    /// From a generated entity (the shape is the schema above).
    init(_ p: Properties) {
        func string(_ k: String) -> String {
            guard case .string(let s)? = p[k] else { fatalError("\(k) is not a string in \(p)") }
            return s
        }
        func int(_ k: String) -> Int64 {
            guard case .int(let i)? = p[k] else { fatalError("\(k) is not an int in \(p)") }
            return i
        }
        func thousandths(_ k: String) -> Int64 {
            guard case .decimal(let d)? = p[k] else { fatalError("\(k) is not a decimal in \(p)") }
            var s = d.significand
            var scale = d.scale
            while scale < 3 { s *= 10; scale += 1 }
            while scale > 3 { s /= 10; scale -= 1 }
            return Int64(s)
        }
        salesOrderID = string("SalesOrderID")
        itemPosition = Int32(int("ItemPosition"))
        productID = string("ProductID")
        if case .string(let n)? = p["Note"] { note = n } else { note = nil }
        quantity = Int32(int("Quantity"))
        quantityUnit = string("QuantityUnit")
        netAmount = thousandths("NetAmount")
        taxAmount = thousandths("TaxAmount")
        grossAmount = thousandths("GrossAmount")
        currencyCode = string("CurrencyCode")
        guard case .date(let d)? = p["DeliveryDate"], case .dateTimeOffset(let t)? = p["ChangedAt"],
            case .guid(let g)? = p["ItemGUID"]
        else { fatalError("bad entity \(p)") }
        deliveryDate = d.days
        changedAt = t.ticks
        changedAtOffset = t.offsetMinutes
        itemGUID = (g.high, g.low)
    }

    init(
        salesOrderID: String, itemPosition: Int32, productID: String, note: String?, quantity: Int32,
        quantityUnit: String,
        netAmount: Int64, taxAmount: Int64, grossAmount: Int64, currencyCode: String, deliveryDate: Int32,
        changedAt: Int64, changedAtOffset: Int16, itemGUID: (high: UInt64, low: UInt64)
    ) {
        self.salesOrderID = salesOrderID
        self.itemPosition = itemPosition
        self.productID = productID
        self.note = note
        self.quantity = quantity
        self.quantityUnit = quantityUnit
        self.netAmount = netAmount
        self.taxAmount = taxAmount
        self.grossAmount = grossAmount
        self.currencyCode = currencyCode
        self.deliveryDate = deliveryDate
        self.changedAt = changedAt
        self.changedAtOffset = changedAtOffset
        self.itemGUID = itemGUID
    }

    /// The entity for OfflineStore: what a program hands to `load` or `upsert`.
    var properties: Properties {
        var p: Properties = [
            "SalesOrderID": .string(salesOrderID), "ItemPosition": .int(Int64(itemPosition)),
            "ProductID": .string(productID), "Quantity": .int(Int64(quantity)), "QuantityUnit": .string(quantityUnit),
            "NetAmount": .decimal(EDMDecimal(significand: Int128(netAmount), scale: 3)),
            "TaxAmount": .decimal(EDMDecimal(significand: Int128(taxAmount), scale: 3)),
            "GrossAmount": .decimal(EDMDecimal(significand: Int128(grossAmount), scale: 3)),
            "CurrencyCode": .string(currencyCode), "DeliveryDate": .date(EDMDate(days: deliveryDate)),
            "ChangedAt": .dateTimeOffset(EDMDateTimeOffset(ticks: changedAt, offsetMinutes: changedAtOffset)),
            "ItemGUID": .guid(EDMGuid(high: itemGUID.high, low: itemGUID.low)),
        ]
        if let note { p["Note"] = .string(note) }
        return p
    }

    /// A small number that depends on every field, so no decoding work can be optimized away.
    var checksum: Int {
        Int(itemPosition) &+ salesOrderID.utf8.count &+ productID.utf8.count &+ (note?.utf8.count ?? 0) &+ Int(quantity)
            &+ quantityUnit.utf8.count &+ Int(truncatingIfNeeded: netAmount &+ taxAmount &+ grossAmount)
            &+ currencyCode.utf8.count
            &+ Int(deliveryDate) &+ Int(truncatingIfNeeded: changedAt) &+ Int(changedAtOffset)
            &+ Int(truncatingIfNeeded: itemGUID.high ^ itemGUID.low)
    }
}

extension Properties {
    /// The same idea for an OfflineStore entity: touches every value.
    var checksum: Int {
        var c = count
        for (k, v) in self {
            c &+= k.utf8.count
            switch v {
            case .string(let s): c &+= s.utf8.count
            case .int(let i): c &+= Int(truncatingIfNeeded: i)
            case .decimal(let d): c &+= Int(truncatingIfNeeded: d.significand)
            case .date(let d): c &+= Int(d.days)
            case .dateTimeOffset(let t): c &+= Int(truncatingIfNeeded: t.ticks)
            case .guid(let g): c &+= Int(truncatingIfNeeded: g.high ^ g.low)
            default: c &+= 1
            }
        }
        return c
    }
}

/// Keeps a value alive in the optimizer's eyes.
@inline(never)
func blackHole<T>(_ x: T) {
    withExtendedLifetime(x) {}
}
