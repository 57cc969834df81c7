"""A service in another language — Python, standard library only — that keeps its data in an
offline store running beside it as a sidecar (`offline-store serve --sync-interval`), and keeps
working when its back end is away. Examples/Sidecar/run.sh runs it in three acts:

    python3 service.py work  SIDECAR_URL            # read, write (queued), show the queue
    python3 service.py away  SIDECAR_URL            # the back end is down: reads and writes go on
    python3 service.py synced SIDECAR_URL BACKEND_URL  # wait until the sidecar's syncs empty the queue

Exit status 1 (with a line saying why) when something is not as it should be.
"""

import json
import sys
import time
import urllib.error
import urllib.parse
import urllib.request


def call(method, url, body=None, headers=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers={
        "Accept": "application/json", **({"Content-Type": "application/json"} if data else {}), **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            text = response.read().decode()
            return response.status, dict(response.headers), json.loads(text) if text else None
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()


def get(url, query=""):
    status, _, body = call("GET", url + query)
    if status != 200:
        sys.exit(f"service.py: GET {url}{query} answered {status}: {body}")
    return body


def q(params):
    return "?" + urllib.parse.urlencode(params, quote_via=urllib.parse.quote)


def fail(why):
    sys.exit(f"service.py: FAILED: {why}")


def work(side):
    cheap = get(side + "Products", q({"$filter": "Price lt 100", "$orderby": "Price", "$top": "3",
                                     "$select": "ProductID,Name,Price"}))["value"]
    print("three cheapest products:", ", ".join(f"{p['ProductID']} {p['Price']}" for p in cheap))
    status, headers, made = call("POST", side + "Products", {"ProductID": "PY-SIDE-1", "Name": "Made in Python",
                                                              "Category": "Software", "Price": 19.5,
                                                              "CurrencyCode": "EUR"})
    if status != 201:
        fail(f"create answered {status}: {made}")
    print(f"created {headers['Location']} (ETag {headers['ETag']})")
    status, headers, _ = call("PATCH", headers["Location"], {"Price": 17.5}, {"If-Match": headers["ETag"]})
    if status != 204:
        fail(f"update answered {status}")
    queue = get(side + "RequestQueue", q({"$select": "RequestID,Method,EntityKey", "$orderby": "RequestID"}))["value"]
    print("queued:", [(r["Method"], r["EntityKey"]) for r in queue])
    methods = [r["Method"] for r in queue]
    if methods == ["POST"]:
        print("the update collapsed into the pending create")
    elif methods in (["POST", "PATCH"], ["PATCH"], []):
        # The sidecar syncs every second: one may have taken the create between the two requests.
        # A create on its way is never merged into, so the update waits behind it.
        print("a sync took the create first: the update waits behind it")
    else:
        fail(f"unexpected queue after a create and an update of one entity: {queue}")


def away(side):
    status, _, made = call("POST", side + "Products", {"ProductID": "PY-SIDE-2", "Name": "Made while away",
                                                       "Category": "Software", "Price": 5, "CurrencyCode": "EUR"})
    if status != 201:
        fail(f"a create while the back end is away answered {status}: {made}")
    mine = get(side + "Products", q({"$filter": "startswith(ProductID,'PY-SIDE')", "$select": "ProductID"}))["value"]
    print("the back end is away; the service still reads and writes:", sorted(p["ProductID"] for p in mine))
    pending = get(side + "RequestQueue", q({"$count": "true", "$top": "0"}))["@odata.count"]
    print(f"requests waiting for the back end: {pending}")


def synced(side, backend):
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        pending = get(side + "RequestQueue", q({"$count": "true", "$top": "0"}))["@odata.count"]
        if pending == 0:
            break
        time.sleep(0.5)
    else:
        fail(f"{pending} requests still queued after 60 s")
    there = get(backend + "Products", q({"$filter": "startswith(ProductID,'PY-SIDE')", "$orderby": "ProductID",
                                         "$select": "ProductID,Price"}))["value"]
    print("on the back end:", ", ".join(f"{p['ProductID']} {p['Price']}" for p in there))
    if [(p["ProductID"], float(p["Price"])) for p in there] != [("PY-SIDE-1", 17.5), ("PY-SIDE-2", 5.0)]:
        fail(f"the back end does not hold the service's writes: {there}")
    errors = get(side + "ErrorArchive")["value"]
    if errors:
        fail(f"refused by the back end: {errors}")


if __name__ == "__main__":
    act, side = sys.argv[1], sys.argv[2]
    {"work": lambda: work(side), "away": lambda: away(side), "synced": lambda: synced(side, sys.argv[3])}[act]()
