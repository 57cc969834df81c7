"""Call function imports of `offline-store serve` (V2 dialect, an offline store) with pyodata,
SAP's V2 client.

    python operations.py --service http://127.0.0.1:PORT/ --order 0500000001 --min 0500000002

Fetches a CSRF token, loads the service's $metadata into pyodata's model, then:

* calls the POST import ``SalesOrder_Confirm`` (``sap:action-for`` the sales order, which it
  returns) for ``--order``: the store queues it and answers 202 with the order as it holds it
  (pyodata logs that it expected 200, and reads the entity);
* calls it with an order that does not exist: refused (pyodata raises HttpError, 404);
* calls the GET import ``OpenOrders`` (``MinID``), which the store answers from the local query
  its configuration maps it to: the orders from ``--min`` on;
* calls the GET import ``LowStock``, which is mapped to nothing: 501, "needs the service"
  (pyodata raises HttpError).

Prints one line a check and a last JSON line {"passed":N,"failed":M}; exit status 1 on failure.
"""

import argparse
import json
import sys

import pyodata
import requests
from pyodata.exceptions import HttpError


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--service", required=True)
    parser.add_argument("--order", required=True)
    parser.add_argument("--min", required=True)
    args = parser.parse_args()
    url = args.service if args.service.endswith("/") else args.service + "/"
    session = requests.Session()
    # Gateway's CSRF protection (serve's V2 dialect): the token fetched first, as SAP's apps do.
    token = session.get(url, headers={"x-csrf-token": "Fetch", "Accept": "application/json"})
    session.headers["x-csrf-token"] = token.headers.get("x-csrf-token", "")
    service = pyodata.Client(url, session)
    results = []

    def check(name, ok, detail=""):
        results.append(ok)
        print(("ok   " if ok else "FAIL ") + name + ("" if ok else " " + str(detail)))

    try:
        confirmed = service.functions.SalesOrder_Confirm.parameter("SalesOrderID", args.order).execute()
        check("SalesOrder_Confirm (POST) is taken and answers with the order",
              confirmed is not None and confirmed.SalesOrderID == args.order, confirmed)
    except HttpError as e:
        check("SalesOrder_Confirm (POST) is taken and answers with the order", False,
              f"{e.response.status_code} {e.response.text[:500]}")
    try:
        service.functions.SalesOrder_Confirm.parameter("SalesOrderID", "0599999999").execute()
        check("SalesOrder_Confirm of a missing order is refused", False, "it was taken")
    except HttpError as e:
        check("SalesOrder_Confirm of a missing order is refused", e.response.status_code == 404,
              e.response.status_code)
    orders = service.functions.OpenOrders.parameter("MinID", args.min).execute()
    ids = sorted(o.SalesOrderID for o in orders)
    check("OpenOrders (GET) is answered from the store's local query", len(ids) > 0 and ids[0] >= args.min, ids)
    print(json.dumps({"openOrders": ids}))
    try:
        service.functions.LowStock.execute()
        check("LowStock (GET, not mapped) says it needs the service", False, "it was answered")
    except HttpError as e:
        check("LowStock (GET, not mapped) says it needs the service",
              e.response.status_code == 501 and "needs the service" in e.response.text, e.response.text[:300])
    passed = sum(1 for r in results if r)
    print(json.dumps({"passed": passed, "failed": len(results) - passed}))
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
