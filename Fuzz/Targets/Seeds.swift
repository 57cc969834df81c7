import Samples
import Storage

extension FuzzTargets {
    /// A starting corpus per target, made from the sample schema and data: valid inputs the
    /// fuzzer mutates from (`offline-store-fuzz --write-seeds DIR` writes them out).
    public static func seeds() -> [String: [[UInt8]]] {
        var out: [String: [[UInt8]]] = [:]
        out["url"] = [
            "Products", "Products('HT-1000')",
            "Products?$filter=Price gt 100 and Category eq 'Notebooks'&$orderby=Price desc&$top=5",
            "SalesOrderItems(SalesOrderID='0500000001',ItemPosition=10)",
            "SalesOrders('0500000001')/Items?$select=ProductID,Quantity",
            "BusinessPartners?$expand=SalesOrders($filter=GrossAmount ge 1000;$expand=Items($top=2))&$count=true",
            "Products?$filter=contains(Name,'Note') or startswith(ProductID,'HT') and not (Price lt 10.5)&$skip=3",
            "Products/$count?$filter=WeightMeasure mul 2 le 3.5",
            "SalesOrders?$filter=CreatedAt ge 2020-01-01T00:00:00Z&$orderby=CreatedAt",
            "BusinessPartners?$filter=Address/City eq 'Walldorf' and SalesOrders/any(o:o/GrossAmount gt 10)",
            "Products?$filter=Price in (1.5, 2, 3)&$select=Name&$skiptoken=10",
            "RequestQueue?$filter=offline.hasPendingChanges()",
            "Products?$filter=cast(Price,Edm.Int64) eq 49 and round(WeightMeasure) eq 1 and length(Name) gt 2",
        ].map { Array($0.utf8) }
        var rows: [[UInt8]] = [], bodies: [[UInt8]] = []
        for set in SampleData.setsInLoadOrder {
            let text = SampleData.json(set)
            bodies.append(Array(text.utf8))
            guard let type = schema.entityType(ofSet: set), case .array(let items)? = try? JSON.parse(text)["value"]
            else { continue }
            let values = ValueJSON(schema: schema)
            for item in items.prefix(3) {
                var one = ""
                JSONWriter.write(item, to: &one)
                bodies.append(Array(one.utf8))
                if let props = try? values.properties(
                    from: item, properties: type.properties, navigation: Set(type.navigationProperties.map(\.name)),
                    owner: set)
                {
                    rows.append(RowCodec(schema: schema, entityType: type).encode(props))
                }
            }
        }
        out["row"] = rows
        out["json"] =
            bodies
            + [#"{"Price":12.50,"Name":null}"#, #"{"ProductID":"X","Price":1e400}"#, #"{"d":{"results":[]}}"#].map {
                Array($0.utf8)
            }
        out["csdl"] = [Array(SampleData.metadata.utf8)]
        let batches = [
            #"{"requests":[{"id":"1","method":"POST","url":"Products","atomicityGroup":"g","body":{"ProductID":"B"}},{"id":"2","method":"PATCH","url":"$1","atomicityGroup":"g","headers":{"if-match":"*"},"body":{"Name":"n"}},{"id":"3","method":"GET","url":"Products?$top=1","dependsOn":["g"]}]}"#,
            #"{"requests":[{"id":"a","method":"DELETE","url":"Products('HT-1000')"}]}"#,
        ].map { Array($0.utf8) }
        out["batch"] = batches
        // The first sample product, and the same under another key (a create that succeeds).
        var product = "{}", newProduct = "{}"
        if case .array(let items)? = try? JSON.parse(SampleData.json("Products"))["value"],
            case .object(let members)? = items.first
        {
            product = ""
            JSONWriter.write(.object(members), to: &product)
            newProduct = ""
            JSONWriter.write(
                .object(members.map { $0.0 == "ProductID" ? ($0.0, .string("FZ-1")) : $0 }), to: &newProduct)
        }
        let json = "Content-Type: application/json\nAccept: application/json\n"
        out["serve"] = [
            "GET /\n\n", "GET /$metadata\nAccept: application/xml\n\n",
            "GET /Products?$top=2\nAccept: application/json;odata.metadata=minimal\n\n",
            "GET /Products?$filter=Price gt 100&$orderby=Name&$select=Name,Price&$count=true\nPrefer: odata.maxpagesize=2\n\n",
            "GET /BusinessPartners?$expand=SalesOrders($top=1)\n\n", "HEAD /Products('HT-1000')\n\n",
            "GET /Products/$count\nAccept: text/plain\n\n",
            "POST /Products\n\(json)Prefer: return=representation\n\n" + newProduct,
            "POST /Products\n\(json)\n" + product,
            "PATCH /Products('HT-1000')\n\(json)If-Match: *\n\n{\"Name\":\"n\",\"Price\":1.5}",
            "PUT /Products('FZ-1')\n\(json)\n" + newProduct,
            "DELETE /Products('HT-1002')\nIf-Match: W/\"1\"\n\n",
            "POST /$batch\n\(json)\n" + String(decoding: batches[0], as: UTF8.self),
            "POST /$batch\n\(json)Repeatability-Request-ID: fz-1\nRepeatability-First-Sent: Sun, 06 Nov 1994 08:49:37 GMT\n\n"
                + String(decoding: batches[1], as: UTF8.self),
            "POST /$batch\nContent-Type: multipart/mixed;boundary=b\n\n--b--",
            // A multipart batch: a read, and a change set that creates and then PATCHes `$1`.
            "POST /$batch\nContent-Type: multipart/mixed;boundary=b\n\n--b\r\nContent-Type: application/http\r\n\r\n"
                + "GET Products('HT-1000') HTTP/1.1\r\n\r\n\r\n--b\r\nContent-Type: multipart/mixed;boundary=c\r\n\r\n"
                + "--c\r\nContent-Type: application/http\r\nContent-ID: 1\r\n\r\nPOST Products HTTP/1.1\r\n"
                + "Content-Type: application/json\r\n\r\n{\"ProductID\":\"FZ-M\"}\r\n--c\r\nContent-Type: application/http\r\n"
                + "Content-ID: 2\r\n\r\nPATCH $1 HTTP/1.1\r\nIf-Match: *\r\n\r\n{\"Name\":\"m\"}\r\n--c--\r\n--b--\r\n",
        ].map { Array($0.utf8) }
        return out
    }
}
