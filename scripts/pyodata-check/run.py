"""Drive `offline-store serve` with SAP's own OData V2 client, pyodata (PyPI), over real HTTP.

    python run.py --service http://127.0.0.1:PORT/

The service is an offline store made from GWSAMPLE_BASIC's $metadata (SAP Gateway's demo
service), served in its V2 dialect with CSRF on. The script does what a Python service migrating
off SAP's offline store does through pyodata: fetches a CSRF token, loads the service and its
metadata into pyodata's model, queries (filter, orderby, top/skip, select, expand, inlinecount,
$count, a datetime literal), reads by key, creates, updates with MERGE, PATCH and PUT, deletes,
sends a change set in a multipart $batch, and meets ETags (If-Match) and a refused write.

Each check prints one line; the last line is a JSON object: {"passed":N,"failed":M,"changes":{…}}
naming what it changed, for the caller to find on the back end after a flush. Exit status 1 when
a check failed.
"""

import argparse
import datetime
import decimal
import json
import sys

import pyodata
import requests
from pyodata.exceptions import HttpError

passed = 0
failed = 0


def check(name, condition, detail=""):
    global passed, failed
    if condition:
        passed += 1
        print(f"ok   {name}")
    else:
        failed += 1
        print(f"FAIL {name} {detail}")


def product(key, name, price):
    return dict(ProductID=key, TypeCode="PR", Category="Notebooks", Name=name, SupplierID="0100000000",
                MeasureUnit="EA", CurrencyCode="EUR", Price=price, WeightMeasure="4.200", WeightUnit="KG")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--service", required=True)
    args = parser.parse_args()
    url = args.service if args.service.endswith("/") else args.service + "/"

    session = requests.Session()
    # Gateway's CSRF protection: a write without the token is refused, then fetched and kept.
    refused = session.post(url + "ProductSet", json={"ProductID": "NO-TOKEN"},
                           headers={"Accept": "application/json"})
    check("a write without a CSRF token is refused", refused.status_code == 403
          and refused.headers.get("x-csrf-token") == "Required", refused.status_code)
    token = session.get(url, headers={"x-csrf-token": "Fetch", "Accept": "application/json"})
    check("a CSRF token is fetched", "x-csrf-token" in token.headers, token.headers)
    session.headers["x-csrf-token"] = token.headers.get("x-csrf-token", "")

    client = pyodata.Client(url, session)
    names = [es.name for es in client.schema.entity_sets]
    check("service and metadata load into pyodata's model", "ProductSet" in names and "SalesOrderSet" in names,
          names)
    products = client.entity_sets.ProductSet

    # Queries.
    page = (products.get_entities().filter("Price gt 100").order_by("Price desc").skip(1).top(3)
            .select("ProductID,Price,Name").count(inline=True).execute())
    # pyodata keeps an Edm.Decimal as V2 sends it, a string.
    prices = [decimal.Decimal(p.Price) for p in page]
    check("filter, orderby, skip, top, select, inlinecount", len(page) == 3 and prices == sorted(prices, reverse=True)
          and all(p > 100 for p in prices) and page.total_count >= 4, (prices, page.total_count))
    total = products.get_entities().count().execute()
    check("$count", isinstance(total, int) and total >= page.total_count, total)
    orders = client.entity_sets.SalesOrderSet.get_entities().expand("ToLineItems").top(2).execute()
    check("expand a collection", len(orders) == 2 and all(len(o.ToLineItems) >= 1 for o in orders),
          [len(o.ToLineItems) for o in orders])
    with_partner = client.entity_sets.SalesOrderSet.get_entities().expand("ToBusinessPartner").top(1).execute()
    check("expand a single entity", with_partner[0].ToBusinessPartner.BusinessPartnerID == with_partner[0].CustomerID)
    recent = (client.entity_sets.BusinessPartnerSet.get_entities()
              .filter("CreatedAt gt datetime'2000-01-01T00:00:00'").execute())
    check("a V2 datetime literal in $filter, Edm.DateTime read as a datetime",
          len(recent) >= 1 and all(isinstance(b.CreatedAt, datetime.datetime) for b in recent), len(recent))
    one = products.get_entity("HT-1000").execute()
    check("read by key, with its ETag", one.ProductID == "HT-1000" and (one.etag or "").startswith('W/"'), one.etag)
    try:
        products.get_entity("NO-SUCH").execute()
        check("a missing entity is 404", False)
    except HttpError as e:
        check("a missing entity is 404", e.response.status_code == 404, e.response.status_code)

    # Writes: each is queued by the offline store.
    made = products.create_entity().set(**product("PY-1", "pyodata one", "12.50")).execute()
    check("create", made.ProductID == "PY-1" and decimal.Decimal(made.Price) == decimal.Decimal("12.50"), made.Price)
    products.update_entity("PY-1", method="MERGE").set(Name="pyodata merged").execute()
    check("update with MERGE", products.get_entity("PY-1").execute().Name == "pyodata merged")
    products.update_entity("HT-1000", method="PATCH").set(Description="patched by pyodata").execute()
    check("update with PATCH", products.get_entity("HT-1000").execute().Description == "patched by pyodata")
    whole = product("PY-1", "pyodata put", "13.00")
    whole.pop("ProductID")
    products.update_entity("PY-1", method="PUT").set(**whole).execute()
    replaced = products.get_entity("PY-1").execute()
    check("update with PUT", replaced.Name == "pyodata put" and decimal.Decimal(replaced.Price) == decimal.Decimal("13.00"))

    # ETags: the current one passes, an old one is refused.
    before = products.get_entity("HT-1001").execute()
    def conditional(name, etag):
        request = products.update_entity("HT-1001").set(Name=name)
        request.add_headers({"If-Match": etag})
        return request.execute()

    conditional("matched", before.etag)
    check("If-Match with the current ETag", products.get_entity("HT-1001").execute().Name == "matched")
    try:
        conditional("stale", before.etag)
        check("If-Match with an old ETag is refused", False)
    except HttpError as e:
        check("If-Match with an old ETag is refused", e.response.status_code == 412, e.response.status_code)

    items = client.entity_sets.SalesOrderLineItemSet
    item = items.get_entities().order_by("SalesOrderID,ItemPosition").top(1).execute()[0]
    items.delete_entity(SalesOrderID=item.SalesOrderID, ItemPosition=item.ItemPosition).execute()
    try:
        items.get_entity(SalesOrderID=item.SalesOrderID, ItemPosition=item.ItemPosition).execute()
        check("delete", False)
    except HttpError as e:
        check("delete", e.response.status_code == 404, e.response.status_code)

    # A change set in a multipart $batch: both or neither.
    batch = client.create_batch()
    changeset = client.create_changeset()
    changeset.add_request(products.create_entity().set(**product("PY-2", "pyodata batch two", "2.00")))
    changeset.add_request(products.create_entity().set(**product("PY-3", "pyodata batch three", "3.00")))
    batch.add_request(changeset)
    batch.execute()
    check("a change set in a multipart $batch", products.get_entity("PY-2").execute().Name == "pyodata batch two"
          and products.get_entity("PY-3").execute().Name == "pyodata batch three")
    failing = client.create_batch()
    bad = client.create_changeset()
    bad.add_request(products.create_entity().set(**product("PY-4", "never", "4.00")))
    bad.add_request(products.create_entity().set(**product("PY-1", "a taken key", "1.00")))
    failing.add_request(bad)
    try:
        failing.execute()
    except HttpError:
        pass
    try:
        products.get_entity("PY-4").execute()
        check("a change set that fails changes nothing", False)
    except HttpError as e:
        check("a change set that fails changes nothing", e.response.status_code == 404, e.response.status_code)

    changes = {"created": ["PY-1", "PY-2", "PY-3"], "patched": "HT-1000", "matched": "HT-1001",
               "deleted": {"SalesOrderID": item.SalesOrderID, "ItemPosition": item.ItemPosition}}
    print(json.dumps({"passed": passed, "failed": failed, "changes": changes}))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
