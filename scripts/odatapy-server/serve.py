#!/usr/bin/env python3
"""odatapy 5.3.0 as a writable OData V4 service, for the sync tests (scripts/odatapy-server.sh).

odatapy's ``InMemoryProcessor`` behind its WSGI adapter on ``wsgiref``, on 127.0.0.1 (a free port
unless ``--port``), for the model of ``--metadata`` (CSDL XML) and the data of ``--data SET=FILE``
(``{"value": [...]}`` each). It prints ``odatapy serving at URL`` as its first line, writes its PID
to ``--pid-file``, and exits after ``--lifetime`` seconds (or on SIGTERM/SIGINT).

**State.** The whole state -- every entity with its ETag, and the log of applied writes -- is kept
in ``--state FILE`` (JSON, replaced atomically after every request that wrote, *before* its answer
is sent). A server started with a ``--state`` file that exists loads it instead of ``--data``, so
a server that was stopped (even with SIGKILL) and started again has exactly the writes it
answered, plus possibly those of a request whose answer was never sent.

**The applied log** (``"applied"`` in the state file): one entry per write odatapy applied --
``{"seq", "method", "set", "key", "rid"}`` (``rid``: the request's ``Repeatability-Request-ID``,
which odatapy itself ignores) -- the server-side count that lets a test prove exactly-once.
A write inside an atomicity group that was rolled back is not in it.

**ETags.** Every entity set carries ETags (``W/"n"``, odatapy's counter): loaded entities start
at ``W/"1"``, and a PATCH, PUT or DELETE needs ``If-Match`` (428 without).

**Computed keys.** A set whose single key property is an integer annotated ``Core.Computed``
gets its key from the service on POST (odatapy: max + 1).

**Deviations of odatapy 5.3.0 from OData V4, worked around here** (not in the client):

* Navigation is kept in a relation table of its own, not derived from the foreign-key
  properties, so an entity created with ``SalesOrderID`` set is not among that order's ``Items``.
  The table is derived again from the referential constraints after every request that wrote.
* ``$expand`` writes the expanded entities as inline links onto the stored entities, and later
  requests read those (the state leak scripts/crosscheck/README.md describes): they are dropped
  after every request.
* Its delta link drops the request's query options and its delta response ignores ``$filter``
  (every change of the set is reported): ``Prefer: odata.track-changes`` is removed from a
  request that has query options, so such a request gets no delta link (a client reads it in
  full every time). A delta link of a plain set works.
* The change log behind delta links is not persisted: a delta token from before a restart is
  answered ``410 Gone`` (the client then reads in full), as the spec allows for an expired token.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import urllib.parse
import xml.etree.ElementTree as ET
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "crosscheck"))

from run import derive_relations, forget_inline_links, load_schema  # noqa: E402

from odatapy.edm.json_value import format_key_literal  # noqa: E402
from odatapy.edm.xml_io import XmlEdmProvider  # noqa: E402
from odatapy.server import OData  # noqa: E402
from odatapy.server.adapters import ODataWSGIApp  # noqa: E402
from odatapy.server.deserializer.json_deserializer import ODataJsonDeserializer  # noqa: E402
from odatapy.server.inmemory import InMemoryDataStore, InMemoryProcessor  # noqa: E402
from odatapy.server.processor import CustomETagSupport  # noqa: E402
from odatapy.server.serializer.json_serializer import EntityCollectionSerializerOptions  # noqa: E402
from odatapy.data import EntityCollection  # noqa: E402
from odatapy.http.content_type import ContentType  # noqa: E402

EDM = "{http://docs.oasis-open.org/odata/ns/edm}"
INTEGER_TYPES = {"Edm.Int16", "Edm.Int32", "Edm.Int64", "Edm.Byte", "Edm.SByte"}


def computed_key_sets(metadata: str) -> list[str]:
    """Entity sets whose single integer key property is annotated ``Core.Computed``."""
    root = ET.fromstring(metadata)
    computed: set[str] = set()
    for schema in root.iter(EDM + "Schema"):
        namespace = schema.get("Namespace")
        for t in schema.findall(EDM + "EntityType"):
            keys = [r.get("Name") for r in t.findall(f"{EDM}Key/{EDM}PropertyRef")]
            if len(keys) != 1:
                continue
            for p in t.findall(EDM + "Property"):
                if p.get("Name") == keys[0] and p.get("Type") in INTEGER_TYPES and any(
                        (a.get("Term") or "").endswith(".Computed") and a.get("Bool", "true") == "true"
                        for a in p.findall(EDM + "Annotation")):
                    computed.add(f"{namespace}.{t.get('Name')}")
    return [es.get("Name") for es in root.iter(EDM + "EntitySet") if es.get("EntityType") in computed]


class Store(InMemoryDataStore):
    """The data store, with the log of applied writes (rolled back with a failed change set)."""

    def __init__(self, key_names: dict[str, list[tuple[str, str]]]) -> None:
        super().__init__()
        self.key_names = key_names  # set -> [(key property, type)]
        self.applied: list[dict[str, Any]] = []
        #: (method, Repeatability-Request-ID) of the write being processed.
        self.current: tuple[str, str | None] | None = None
        #: Delta tokens below this were issued before a restart: their changes are not logged.
        self.epoch = 0

    def key_text(self, entity_set: str, entity: Any) -> str:
        names = self.key_names[entity_set]
        parts = [format_key_literal(entity.get_value(n), t) for n, t in names]
        return parts[0] if len(parts) == 1 else ",".join(f"{n}={v}" for (n, _), v in zip(names, parts))

    def record_change(self, entity_set: str, entity: Any, kind: str) -> None:
        super().record_change(entity_set, entity, kind)
        if self.current is not None:
            method, rid = self.current
            self.applied.append({"seq": len(self.applied) + 1, "method": method, "set": entity_set,
                                 "key": self.key_text(entity_set, entity), "rid": rid})

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            s = super().snapshot()
            s["applied"] = [dict(a) for a in self.applied]
            return s

    def restore(self, snapshot: dict[str, Any]) -> None:
        with self.lock:
            super().restore(snapshot)
            self.applied[:] = snapshot["applied"]


class Processor(InMemoryProcessor, CustomETagSupport):
    """odatapy's in-memory processor, every set with ETags, noting which write is applied."""

    def has_etag(self, entity_set_or_singleton: Any) -> bool:
        return True

    def _noting(self, method: str, request: Any, run: Any) -> None:
        store: Store = self.store  # type: ignore[assignment]
        with store.lock:
            outer = store.current
            store.current = (method, request.get_header("Repeatability-Request-ID"))
            try:
                run()
            finally:
                store.current = outer

    def create_entity(self, request, response, uri_info, request_ct, response_ct) -> None:
        self._noting("POST", request, lambda: super(Processor, self).create_entity(request, response, uri_info, request_ct, response_ct))

    def update_entity(self, request, response, uri_info, request_ct, response_ct) -> None:
        self._noting(request.method.value, request, lambda: super(Processor, self).update_entity(request, response, uri_info, request_ct, response_ct))

    def delete_entity(self, request, response, uri_info) -> None:
        self._noting("DELETE", request, lambda: super(Processor, self).delete_entity(request, response, uri_info))


class Service:
    def __init__(self, args: argparse.Namespace) -> None:
        with open(args.metadata, encoding="utf-8") as fh:
            metadata_text = fh.read()
        self.schema = load_schema(args.metadata)
        odata = OData.new_instance()
        service_metadata = odata.create_service_metadata(XmlEdmProvider(metadata_text))
        self.edm = service_metadata.edm
        handler = odata.create_handler(service_metadata)
        key_names = {}
        for name, type_name in self.schema.sets.items():
            t = self.schema.types[type_name]
            key_names[name] = [(k, t.props[k]) for k in t.keys]
        self.store = Store(key_names)
        self.processor = Processor(self.store)
        self.state_path = args.state
        self.deserializer = ODataJsonDeserializer(strict=True)
        self.serializer = odata.create_serializer(ContentType.APPLICATION_JSON)
        if os.path.exists(args.state) and os.path.getsize(args.state) > 0:
            self.load_state()
        else:
            for item in args.data:
                name, _, path = item.partition("=")
                if name not in self.schema.sets:
                    raise SystemExit(f"--data {item}: no entity set {name!r} in {args.metadata}")
                with open(path, encoding="utf-8") as fh:
                    self.load_set(name, fh.read())
            for name in self.schema.sets:
                for e in self.store.entities(name):
                    e.etag = e.etag or 'W/"1"'
            self.save_state()
        self.store.declare_key_auto_generating(*computed_key_sets(metadata_text))
        derive_relations(self.schema, self.edm, self.store, self.processor)
        handler.register(self.processor)
        self.app = ODataWSGIApp(handler)
        self.exit_after = args.exit_after_writes
        self.lock = threading.Lock()

    def load_set(self, name: str, text: str) -> list[Any]:
        entity_type = self.edm.get_entity_set(name).entity_type
        entities = self.deserializer.entity_collection(self.edm, entity_type, text).entities
        self.store.set_entities(name, entities)
        return entities

    def load_state(self) -> None:
        with open(self.state_path, encoding="utf-8") as fh:
            state = json.load(fh)
        for name, rows in state["sets"].items():
            entities = self.load_set(name, json.dumps({"value": [r["entity"] for r in rows]}))
            for e, r in zip(entities, rows):
                e.etag = r["etag"]
        self.store.applied[:] = state["applied"]
        self.store._sequence = state["sequence"]
        self.store.epoch = state["sequence"]

    def save_state(self) -> None:
        sets = {}
        for name in self.schema.sets:
            entity_type = self.edm.get_entity_set(name).entity_type
            entities = self.store.entities(name)
            text = self.serializer.entity_collection(self.edm, entity_type, EntityCollection(entities=entities),
                                                     EntityCollectionSerializerOptions())
            rows = json.loads(text)["value"]
            sets[name] = [{"entity": {k: v for k, v in row.items() if "@" not in k}, "etag": e.etag}
                          for row, e in zip(rows, entities)]
        state = {"sets": sets, "applied": self.store.applied, "sequence": int(self.store.change_token)}
        tmp = self.state_path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(state, fh, ensure_ascii=False)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.state_path)

    def __call__(self, environ: dict, start_response: Any) -> list[bytes]:
        with self.lock:
            query = urllib.parse.parse_qs(environ.get("QUERY_STRING") or "")
            if query and "HTTP_PREFER" in environ:
                prefer = [p for p in environ["HTTP_PREFER"].split(",") if p.strip().lower() != "odata.track-changes"]
                environ["HTTP_PREFER"] = ",".join(prefer)
            token = (query.get("$deltatoken") or [None])[0]
            if token is not None and self.store.epoch and (not token.isdigit() or int(token) < self.store.epoch):
                body = json.dumps({"error": {"code": "410", "message": "The delta token is from before the service restarted."}}).encode()
                start_response("410 Gone", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
                return [body]
            before = (len(self.store.applied), self.store.change_token)
            answer: dict[str, Any] = {}

            def capture(status: str, headers: list, exc_info: Any = None) -> None:
                answer["status"], answer["headers"] = status, headers

            body = b"".join(self.app(environ, capture))
            forget_inline_links(self.store)
            wrote = (len(self.store.applied), self.store.change_token) != before
            if wrote:
                derive_relations(self.schema, self.edm, self.store, self.processor)
                self.save_state()
                if self.exit_after and len(self.store.applied) >= self.exit_after:
                    # Stopped after applying and persisting, before answering: the answer is lost.
                    os._exit(3)
            start_response(answer["status"], answer["headers"])
            return [body]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--metadata", required=True, help="the $metadata (CSDL XML)")
    ap.add_argument("--data", action="append", default=[], metavar="SET=FILE", help='a set\'s entities, {"value":[...]} (repeatable)')
    ap.add_argument("--state", required=True, help="the state file: loaded when it exists, written after every write")
    ap.add_argument("--lifetime", type=float, required=True, help="exit after this many seconds")
    ap.add_argument("--port", type=int, default=0, help="the port on 127.0.0.1 (default: a free one)")
    ap.add_argument("--pid-file", help="write the PID here")
    ap.add_argument("--exit-after-writes", type=int, default=0, metavar="N",
                    help="exit (status 3) once N writes are applied and saved, before answering the request")
    args = ap.parse_args()
    if args.lifetime <= 0:
        ap.error("--lifetime must be positive")

    from wsgiref.simple_server import WSGIRequestHandler, make_server

    class Quiet(WSGIRequestHandler):
        def log_message(self, *a: Any) -> None:
            pass

    service = Service(args)
    server = make_server("127.0.0.1", args.port, service, handler_class=Quiet)
    if args.pid_file:
        with open(args.pid_file, "w") as fh:
            fh.write(f"{os.getpid()}\n")
    print(f"odatapy serving at http://127.0.0.1:{server.server_address[1]}/", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    timer = threading.Timer(args.lifetime, lambda: os._exit(0))
    timer.daemon = True
    timer.start()
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
