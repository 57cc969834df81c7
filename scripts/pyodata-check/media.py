"""Read a media entity's stream from `offline-store serve` (V2 dialect) with pyodata, SAP's V2 client.

    python media.py --service http://127.0.0.1:PORT/ --set Attachments --key a \
        --sha256 HEX --content-type application/pdf

Loads the service's $metadata into pyodata's model, reads the entity by key, then its media
resource (`EntityProxy.get_value()`, `Set('key')/$value`) and checks the bytes' SHA-256 and the
answer's Content-Type. Also reads it through the entity set's `get_entity(key).get_value()`.
Prints one line a check and a last JSON line {"passed":N,"failed":M}; exit status 1 on failure.
"""

import argparse
import hashlib
import json
import sys

import pyodata
import requests


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--service", required=True)
    parser.add_argument("--set", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--sha256", required=True)
    parser.add_argument("--content-type", required=True)
    args = parser.parse_args()
    url = args.service if args.service.endswith("/") else args.service + "/"
    session = requests.Session()
    service = pyodata.Client(url, session)
    results = []

    def check(name, ok, detail=""):
        results.append(ok)
        print(("ok   " if ok else "FAIL ") + name + ("" if ok else " " + detail))

    entity_set = getattr(service.entity_sets, args.set)
    entity = entity_set.get_entity(args.key).execute()
    check("the media entity reads by key", entity is not None)
    response = entity.get_value().execute()
    digest = hashlib.sha256(response.content).hexdigest()
    check("EntityProxy.get_value() gives the stream's bytes", digest == args.sha256,
          f"sha256 {digest}, {len(response.content)} bytes")
    check("with its Content-Type", response.headers.get("Content-Type") == args.content_type,
          str(response.headers.get("Content-Type")))
    again = entity_set.get_entity(args.key).get_value().execute()
    check("get_entity(key).get_value() too", hashlib.sha256(again.content).hexdigest() == args.sha256)
    passed = sum(1 for r in results if r)
    print(json.dumps({"passed": passed, "failed": len(results) - passed}))
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
