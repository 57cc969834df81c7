#!/usr/bin/env python3
"""Cross-check OfflineStore's query engine against odatapy, an independent OData V4 server.

Both sides get the same $metadata (fixtures/metadata.xml) and the same deterministic data
(gen_data.py, fixed seed). Every request URL in fixtures/queries.txt is answered by

* our engine: ``offline-store query --store DIR URL`` (a store made with ``init`` + ``load``), and
* odatapy 5.3.0: its ``InMemoryProcessor`` behind its WSGI adapter, served by ``wsgiref`` on
  127.0.0.1 (a free port) and queried over HTTP with ``urllib``;

the two JSON answers are normalized by the EDM types of the metadata (Decimal exactly, Double as
float, DateTimeOffset as an instant in UTC, annotations other than ``@odata.count`` dropped,
collections without ``$orderby`` compared as multisets) and compared.

Corpus lines: one URL each (written unencoded; this script percent-encodes it the same way for
both sides, ``%XX`` already in the line is kept). ``#`` starts a comment line. Markers may follow
the URL:

* ``  # expect: error`` -- the OData spec requires the request to fail; each engine must answer
  with an error (instead of both answers being compared);
* ``  # known: WHO: reason`` -- a known difference (WHO is ``ours``, ``odatapy`` or ``both``): it is
  still run and shown, and counted as skipped while it differs.

The last line printed is ``N passed, M failed`` (``, K skipped`` when known differences remain);
the exit status is 1 when anything failed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import gen_data  # noqa: E402

FIXTURES = os.path.join(HERE, "fixtures")
METADATA = os.path.join(FIXTURES, "metadata.xml")
QUERIES = os.path.join(FIXTURES, "queries.txt")

#: Indexes of our store, so that the planner's index, range and ordered scans are exercised.
STORE_CONFIG = {
    "indexes": {
        "BusinessPartners": ["Country", "CompanyName"],
        "Products": ["Category, Price DESC", "Price"],
        "SalesOrders": ["CreatedAt", "GrossAmount DESC", "LifecycleStatus, CreatedAt"],
        "SalesOrderItems": ["ProductID", "Quantity DESC, ProductID", "DeliveryDate"],
    }
}


# ---------------------------------------------------------------------------
# the schema (just enough of CSDL to normalize answers)
# ---------------------------------------------------------------------------
@dataclass
class StructType:
    name: str
    props: dict[str, str] = field(default_factory=dict)  # name -> type name
    navs: dict[str, tuple[str, bool]] = field(default_factory=dict)  # name -> (type, collection)
    keys: list[str] = field(default_factory=list)


@dataclass
class Schema:
    types: dict[str, StructType]
    sets: dict[str, str]  # entity set -> type name
    bindings: dict[tuple[str, str], str]  # (set, nav) -> target set
    constraints: dict[tuple[str, str], list[tuple[str, str]]]  # (type, nav) -> [(prop, referenced)]


def load_schema(path: str) -> Schema:
    ns = {"edm": "http://docs.oasis-open.org/odata/ns/edm"}
    root = ET.parse(path).getroot()
    types: dict[str, StructType] = {}
    sets: dict[str, str] = {}
    bindings: dict[tuple[str, str], str] = {}
    constraints: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for schema in root.iter("{%s}Schema" % ns["edm"]):
        namespace = schema.get("Namespace")
        for tag in ("EntityType", "ComplexType"):
            for el in schema.findall("edm:" + tag, ns):
                t = StructType(f"{namespace}.{el.get('Name')}")
                for ref in el.findall("edm:Key/edm:PropertyRef", ns):
                    t.keys.append(ref.get("Name"))
                for p in el.findall("edm:Property", ns):
                    t.props[p.get("Name")] = p.get("Type")
                for n in el.findall("edm:NavigationProperty", ns):
                    typ = n.get("Type")
                    coll = typ.startswith("Collection(")
                    t.navs[n.get("Name")] = (typ[11:-1] if coll else typ, coll)
                    rc = [(c.get("Property"), c.get("ReferencedProperty"))
                          for c in n.findall("edm:ReferentialConstraint", ns)]
                    if rc:
                        constraints[(t.name, n.get("Name"))] = rc
                types[t.name] = t
        for container in schema.findall("edm:EntityContainer", ns):
            for es in container.findall("edm:EntitySet", ns):
                sets[es.get("Name")] = es.get("EntityType")
                for b in es.findall("edm:NavigationPropertyBinding", ns):
                    bindings[(es.get("Name"), b.get("Path"))] = b.get("Target")
    return Schema(types, sets, bindings, constraints)


def derive_relations(schema: Schema, edm: Any, store: Any, processor: Any) -> None:
    """Fill odatapy's relation table from the referential constraints (and their partners).

    odatapy keeps relationships in an explicit relation table, not in the foreign-key properties;
    this derives every set's navigation targets from the properties, in the order of the target
    set (replacing what the table held). A navigation without a NavigationPropertyBinding, or
    without a referential constraint on either side (a many-to-many, say), has nothing to derive
    from: it is left to the relation table as it is.
    """
    entities = {name: store.entities(name) for name in schema.sets}
    for set_name, type_name in schema.sets.items():
        es = edm.get_entity_set(set_name)
        for nav, (target_type, _) in schema.types[type_name].navs.items():
            target_set = schema.bindings.get((set_name, nav))
            if target_set is None:
                continue
            pairs = schema.constraints.get((type_name, nav))
            if pairs is None:  # the partner holds the constraint, if any does
                partner = next((n for n, (tt, _) in schema.types[target_type].navs.items()
                                if schema.bindings.get((target_set, n)) == set_name
                                and (target_type, n) in schema.constraints), None)
                if partner is None:
                    continue
                pairs = [(ref, prop) for prop, ref in schema.constraints[(target_type, partner)]]
            index: dict[tuple, list[Any]] = {}
            for t in entities[target_set]:
                index.setdefault(tuple(t.get_value(r) for _, r in pairs), []).append(t)
            for e in entities[set_name]:
                k = tuple(e.get_value(p) for p, _ in pairs)
                targets = [] if None in k else index.get(k, [])
                store.set_relation(set_name, processor._key_of(es, e), nav, targets)


def forget_inline_links(store: Any) -> None:
    """Undo odatapy's state leak between requests.

    Its ``$expand`` writes the (nested-$filter/$top/$skip-trimmed) related entities as inline
    links onto the *stored* entities, and its ``$filter`` evaluation prefers inline links over
    the relation table, so a later ``Items/any()`` would see an earlier request's
    ``$expand=Items($skip=1)``. Dropping the links after each request keeps requests independent.
    """
    with store.lock:
        for entities in store.data.values():
            for entity in entities:
                entity.navigation_links = []


# ---------------------------------------------------------------------------
# URLs
# ---------------------------------------------------------------------------
def split_top(text: str, sep: str) -> list[str]:
    """Split on ``sep`` outside parentheses and string literals."""
    parts, depth, quote, cur = [], 0, False, []
    for ch in text:
        if ch == "'":
            quote = not quote
        elif not quote and ch == "(":
            depth += 1
        elif not quote and ch == ")":
            depth -= 1
        if ch == sep and depth == 0 and not quote:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts


def query_options(query: str, sep: str = "&") -> dict[str, str]:
    out = {}
    for piece in split_top(query, sep) if query else []:
        name, _, value = piece.partition("=")
        out[name.strip()] = value
    return out


@dataclass
class Shape:
    """How to compare a (nested) collection: in order or as a multiset; its $select; nested expands."""
    ordered: bool
    expands: dict[str, "Shape"]
    select: set[str] | None = None


def select_of(opts: dict[str, str]) -> set[str] | None:
    if "$select" not in opts:
        return None
    names = {item.strip().split("/")[0] for item in split_top(opts["$select"], ",")}
    return None if "*" in names else names


def expand_shapes(expand: str | None) -> dict[str, Shape]:
    shapes: dict[str, Shape] = {}
    if not expand:
        return shapes
    for item in split_top(expand, ","):
        item = item.strip()
        name, paren, rest = item.partition("(")
        opts = query_options(rest[:-1], ";") if paren else {}
        shapes[name.strip()] = Shape("$orderby" in opts, expand_shapes(opts.get("$expand")), select_of(opts))
    return shapes


def encode(url: str) -> str:
    path, q, query = url.partition("?")
    path = urllib.parse.quote(path, safe="/()',=$:*@-._~%")
    if q:
        query = urllib.parse.quote(query, safe="&=$/(),'*:;@-._~%")
        return path + "?" + query
    return path


# ---------------------------------------------------------------------------
# normalization
# ---------------------------------------------------------------------------
def norm_instant(text: str) -> str:
    m = re.match(r"^(.*T\d\d:\d\d(?::\d\d)?)(\.\d+)?(Z|[+-]\d\d:\d\d)$", text)
    if not m:
        return "BAD-INSTANT:" + text
    frac = (m.group(2) or "")[:7].ljust(7, "0")[1:]  # microseconds (OData allows 12 digits)
    base = dt.datetime.fromisoformat(m.group(1) + ("." + frac if frac else "") + m.group(3).replace("Z", "+00:00"))
    return base.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def norm_decimal(value: Any) -> Any:
    try:
        d = Decimal(str(value)) if not isinstance(value, Decimal) else value
    except InvalidOperation:
        return "BAD-DECIMAL:" + repr(value)
    if d == 0:
        return "0"
    return format(d.normalize(), "f")


def norm_primitive(value: Any, typ: str) -> Any:
    if value is None:
        return None
    if typ == "Edm.Decimal":
        return norm_decimal(value) if not isinstance(value, (str, bool)) else "NOT-A-NUMBER:" + repr(value)
    if typ in ("Edm.Double", "Edm.Single"):
        if isinstance(value, str):
            return value  # INF, -INF, NaN
        return repr(float(value))
    if typ in ("Edm.Int16", "Edm.Int32", "Edm.Int64", "Edm.Byte", "Edm.SByte"):
        if isinstance(value, Decimal) and value == value.to_integral_value():
            value = int(value)
        return value
    if typ == "Edm.DateTimeOffset":
        return norm_instant(value) if isinstance(value, str) else "NOT-A-STRING:" + repr(value)
    return value


class Normalizer:
    def __init__(self, schema: Schema) -> None:
        self.schema = schema

    def entity(self, obj: Any, typ: str, shapes: dict[str, Shape], select: set[str] | None = None) -> Any:
        if not isinstance(obj, dict):
            return {"NOT-AN-OBJECT": obj}
        t = self.schema.types[typ]
        out: dict[str, Any] = {}
        if select is not None:
            # $select: properties not selected "SHOULD be omitted" (OData 4.01 Part 2, 5.1.3).
            # odatapy adds the key properties to a nested $select (so that the entity stays
            # identifiable); that is tolerated: unselected key properties are dropped on both sides.
            # Any other unselected property stays and shows in the diff; a missing one shows too.
            extra_keys = set(t.keys) - select
            obj = {k: v for k, v in obj.items() if k.partition("@")[0] not in extra_keys}
            for name in sorted(select - {k.partition("@")[0] for k in obj}):
                out[name] = "<MISSING>"
        for k, v in obj.items():
            if "@" in k:
                name, _, annotation = k.partition("@")
                if name and annotation == "odata.count":
                    out[k] = int(v)
                continue  # @odata.context, @odata.id, @odata.etag, ... differ by design
            if k in t.props:
                ptype = t.props[k]
                if ptype in self.schema.types:
                    out[k] = None if v is None else self.entity(v, ptype, {})
                else:
                    out[k] = norm_primitive(v, ptype)
            elif k in t.navs:
                ntype, coll = t.navs[k]
                shape = shapes.get(k, Shape(False, {}))
                if coll:
                    out[k] = self.collection(v, ntype, shape)
                else:
                    out[k] = None if v is None else self.entity(v, ntype, shape.expands, shape.select)
            else:
                out[k] = {"UNDECLARED": v}
        return out

    def collection(self, items: Any, typ: str, shape: Shape) -> Any:
        if not isinstance(items, list):
            return {"NOT-A-LIST": items}
        rows = [self.entity(e, typ, shape.expands, shape.select) for e in items]
        if not shape.ordered:
            rows.sort(key=lambda r: json.dumps(r, sort_keys=True, ensure_ascii=False))
        return rows


def resolve_target(schema: Schema, path: str) -> tuple[str, str | None, bool]:
    """(kind, type, is_collection) of a resource path; kind is 'entities' or 'count'."""
    segments = split_top(path.strip("/"), "/")
    typ: str | None = None
    coll = True
    for i, seg in enumerate(segments):
        if seg == "$count":
            return "count", typ, False
        name, paren, _ = seg.partition("(")
        if i == 0:
            typ = schema.sets[name]
            coll = not paren
        else:
            assert typ is not None
            ntype, ncoll = schema.types[typ].navs[name]
            typ, coll = ntype, ncoll and not paren
    return "entities", typ, coll


@dataclass
class Answer:
    ok: bool
    value: Any = None
    error: str = ""


def normalize_answer(schema: Schema, url: str, status_ok: bool, body: str) -> Answer:
    if not status_ok:
        return Answer(False, error=body.strip()[:400])
    path, _, query = url.partition("?")
    opts = query_options(query)
    kind, typ, coll = resolve_target(schema, path)
    try:
        if kind == "count":
            return Answer(True, {"$count": int(body.strip())})
        doc = json.loads(body, parse_float=Decimal, parse_int=int)
    except ValueError as exc:
        return Answer(False, error=f"unparseable answer ({exc}): {body[:300]}")
    n = Normalizer(schema)
    shapes = expand_shapes(opts.get("$expand"))
    assert typ is not None
    if coll:
        if not isinstance(doc, dict) or not isinstance(doc.get("value"), list):
            return Answer(False, error=f"not a collection: {body[:300]}")
        out = {"value": n.collection(doc["value"], typ, Shape("$orderby" in opts, shapes, select_of(opts)))}
        if "@odata.count" in doc:
            out["@odata.count"] = int(doc["@odata.count"])
        return Answer(True, out)
    return Answer(True, n.entity(doc, typ, shapes, select_of(opts)))


# ---------------------------------------------------------------------------
# the two engines
# ---------------------------------------------------------------------------
class Ours:
    def __init__(self, binary: str, workdir: str, data: dict[str, str], indexes: bool) -> None:
        self.binary = binary
        self.store = os.path.join(workdir, "store")
        config = os.path.join(workdir, "config.json")
        with open(config, "w") as fh:
            json.dump(STORE_CONFIG if indexes else {}, fh)
        self._run("init", "--store", self.store, "--metadata", METADATA, "--config", config)
        for name in gen_data.SETS:
            self._run("load", "--store", self.store, "--set", name, data[name])

    def _run(self, *args: str) -> str:
        p = subprocess.run([self.binary, *args], capture_output=True, text=True)
        if p.returncode != 0:
            raise SystemExit(f"offline-store {' '.join(args)} failed: {p.stderr.strip()}")
        return p.stdout

    def query(self, url: str) -> tuple[bool, str]:
        p = subprocess.run([self.binary, "query", "--store", self.store, url, "--format", "json"],
                           capture_output=True, text=True, timeout=120)
        return (p.returncode == 0, p.stdout if p.returncode == 0 else p.stderr)


class Reference:
    """odatapy's in-memory service over real HTTP (wsgiref on 127.0.0.1, a free port)."""

    def __init__(self, schema: Schema, data: dict[str, str]) -> None:
        from wsgiref.simple_server import WSGIRequestHandler, make_server

        from odatapy.edm.xml_io import XmlEdmProvider
        from odatapy.server import OData
        from odatapy.server.adapters import ODataWSGIApp
        from odatapy.server.deserializer.json_deserializer import ODataJsonDeserializer
        from odatapy.server.inmemory import InMemoryDataStore, InMemoryProcessor

        odata = OData.new_instance()
        with open(METADATA, encoding="utf-8") as fh:
            metadata = odata.create_service_metadata(XmlEdmProvider(fh.read()))
        edm = metadata.edm
        handler = odata.create_handler(metadata)
        store = InMemoryDataStore()
        deserializer = ODataJsonDeserializer(strict=True)
        entities: dict[str, list[Any]] = {}
        for name in gen_data.SETS:
            entity_type = edm.get_entity_set(name).entity_type
            with open(data[name], encoding="utf-8") as fh:
                entities[name] = deserializer.entity_collection(edm, entity_type, fh.read()).entities
            store.set_entities(name, entities[name])
        processor = InMemoryProcessor(store)
        derive_relations(schema, edm, store, processor)
        handler.register(processor)

        class Quiet(WSGIRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

        self.store = store
        self.server = make_server("127.0.0.1", 0, ODataWSGIApp(handler), handler_class=Quiet)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}/"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def query(self, url: str) -> tuple[bool, str]:
        req = urllib.request.Request(self.base + url, headers={"Accept": "application/json, text/plain;q=0.5"})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return True, r.read().decode("utf-8")
        except urllib.error.HTTPError as e:
            return False, f"HTTP {e.code}: {e.read().decode('utf-8', 'replace')}"
        finally:
            forget_inline_links(self.store)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# ---------------------------------------------------------------------------
# the run
# ---------------------------------------------------------------------------
@dataclass
class Case:
    line: int
    url: str
    known: str | None  # "WHO: reason", WHO = ours | odatapy | both
    expect_error: bool = False

    @property
    def known_who(self) -> set[str]:
        who = (self.known or "").split(":", 1)[0].strip()
        return {"ours", "odatapy"} if who == "both" else {who}


MARKER = re.compile(r"\s+#\s*(known|expect):\s*")


def read_corpus(path: str) -> list[Case]:
    cases = []
    with open(path, encoding="utf-8") as fh:
        for n, raw in enumerate(fh, 1):
            text = raw.strip()
            if not text or text.startswith("#"):
                continue
            parts = MARKER.split(text)
            case = Case(n, parts[0].strip(), None)
            for kind, value in zip(parts[1::2], parts[2::2]):
                if kind == "known":
                    case.known = value.strip()
                elif value.strip() == "error":
                    case.expect_error = True
                else:
                    raise SystemExit(f"{path}:{n}: unknown expectation {value!r}")
            cases.append(case)
    return cases


def pretty(answer: Answer) -> list[str]:
    if not answer.ok:
        return ["ERROR " + answer.error]
    return json.dumps(answer.value, indent=1, sort_keys=True, ensure_ascii=False).splitlines()


def size_of(answer: Answer) -> str:
    v = answer.value
    if isinstance(v, dict) and "$count" in v:
        return f"count {v['$count']}"
    if isinstance(v, dict) and isinstance(v.get("value"), list):
        return f"{len(v['value'])} rows"
    return "1 entity"


def find_binary() -> str | None:
    env = os.environ.get("OFFLINE_STORE")
    if env:
        return env
    for rel in (".build/debug/offline-store", ".build/release/offline-store"):
        path = os.path.join(REPO, rel)
        if os.path.exists(path):
            return path
    return shutil.which("offline-store")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", help="offline-store (default: $OFFLINE_STORE, else .build/debug/offline-store)")
    ap.add_argument("--queries", default=QUERIES)
    ap.add_argument("--seed", type=int, default=gen_data.SEED)
    ap.add_argument("--no-indexes", action="store_true", help="create our store without secondary indexes")
    ap.add_argument("--only", help="run only corpus lines whose URL contains this text")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (store and data)")
    ap.add_argument("-v", "--verbose", action="store_true", help="show both answers for passing queries too")
    args = ap.parse_args()

    binary = args.binary or find_binary()
    if not binary or not os.path.exists(binary):
        print("offline-store binary not found: build it with `swift build` or set OFFLINE_STORE", file=sys.stderr)
        return 2
    schema = load_schema(METADATA)
    cases = read_corpus(args.queries)
    if args.only:
        cases = [c for c in cases if args.only in c.url]

    workdir = tempfile.mkdtemp(prefix="crosscheck-")
    try:
        data = gen_data.write(os.path.join(workdir, "data"), args.seed)
        print(f"data: {workdir}/data (seed {args.seed}); binary: {binary}")
        ours = Ours(binary, workdir, data, indexes=not args.no_indexes)
        ref = Reference(schema, data)
        print(f"odatapy: {ref.base} ; {len(cases)} queries")
        passed = failed = skipped = 0
        for case in cases:
            url = encode(case.url)
            a = normalize_answer(schema, case.url, *ours.query(url))
            b = normalize_answer(schema, case.url, *ref.query(url))
            if case.expect_error:
                # The spec requires the request to fail: each engine is judged on its own.
                deviators = {who for who, ans in (("ours", a), ("odatapy", b)) if ans.ok}
            else:
                same = a.ok and b.ok and a.value == b.value
                deviators = set() if same else {"?"}
            where = f"line {case.line}: {case.url}"
            if not deviators:
                passed += 1
                note = "   (marked known, but now agrees: remove the marker)" if case.known else ""
                size = "both fail, as the spec requires" if case.expect_error else size_of(a)
                print(f"PASS  {where}  [{size}]{note}")
                if args.verbose:
                    print("\n".join("      " + s for s in pretty(a)))
                continue
            excused = case.known is not None and ("?" in deviators or deviators <= case.known_who)
            if excused:
                skipped += 1
                print(f"KNOWN {where}\n      known: {case.known}")
            else:
                failed += 1
                print(f"FAIL  {where}")
            if case.expect_error:
                print(f"      the spec requires an error; no error from: {', '.join(sorted(deviators))}")
            diff = difflib.unified_diff(pretty(a), pretty(b), "offline-store", "odatapy", n=2, lineterm="")
            lines = list(diff)
            for s in lines[:60]:
                print("      " + s)
            if len(lines) > 60:
                print(f"      ... {len(lines) - 60} more diff lines")
        ref.close()
    finally:
        if args.keep:
            print(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    summary = f"{passed} passed, {failed} failed"
    if skipped:
        summary += f", {skipped} skipped"
    print(summary)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
