#!/usr/bin/env python3
"""odatapy 5.3.0 as a writable OData V4 service, for the sync tests (scripts/odatapy-server.sh).

odatapy's ``InMemoryProcessor`` behind its WSGI adapter on ``wsgiref``, on 127.0.0.1 (a free port
unless ``--port``), for the model of ``--metadata`` (CSDL XML) and the data of ``--data SET=FILE``
(``{"value": [...]}`` each). It prints ``odatapy serving at URL`` as its first line, writes its PID
to ``--pid-file``, and exits after ``--lifetime`` seconds (or on SIGTERM/SIGINT).

**State.** The whole state -- every entity with its ETag (and a media entity's bytes, content type
and media ETag), the relations of navigations without referential constraints, and the log of
applied writes -- is kept in ``--state FILE`` (JSON, replaced atomically after every request that
wrote, *before* its answer is sent). A server started with a ``--state`` file that exists loads it
instead of ``--data``, so a server that was stopped (even with SIGKILL) and started again has
exactly the writes it answered, plus possibly those of a request whose answer was never sent.

**The applied log** (``"applied"`` in the state file): one entry per write odatapy applied --
``{"seq", "method", "set", "key", "rid"}`` (``rid``: the request's ``Repeatability-Request-ID``,
which odatapy itself ignores) -- the server-side count that lets a test prove exactly-once.
A write inside an atomicity group that was rolled back is not in it. A write of a media
entity's stream (PUT or DELETE ``Set(key)/$value``) has ``"on": "$value"``; a ``$ref`` write
(POST, PUT or DELETE ``Set(key)/Nav/$ref``) has ``"on": "Nav/$ref"`` and the owner's set and key.
(A POST of a media entity is an entry like any POST; a deep insert has one entry per entity
created. Writes of a single property, ``PUT``/``DELETE Set(key)/Prop[/$value]``, are not noted
and not saved.)

**ETags.** Every entity set carries ETags (``W/"n"``, odatapy's counter): loaded entities start
at ``W/"1"``, and a PATCH, PUT or DELETE needs ``If-Match`` (428 without).

**Actions** (odatapy dispatches them and leaves what they do to the service; this is this test
service's business logic). A call of an action -- bound (``POST Set(key)/NS.Action``) or through
an action import (``POST Import``) -- with a JSON object of parameters:

* sets each property of the bound entity that a parameter of the same name names (not a key
  property), moves its ETag and records a change its set's delta link reports;
* is refused with 400 (code ``ActionRefused``) when its parameter ``Fail`` is ``true``, and then
  does nothing;
* is noted in the applied log as ``{"seq", "method": "ACTION", "name", "rid", "params"}``, with
  ``"set"`` and ``"key"`` when bound;
* is executed once per ``Repeatability-Request-ID`` (OData 4.01 Part 1 section 8.2.8): a call
  whose id was executed before is answered again, with ``Repeatability-Result: accepted``, and
  does nothing;
* answers with the bound entity when the action returns its type, else 204.

**Functions** with an entity set (a ``FunctionImport`` with ``EntitySet``) are registered with
odatapy (``register_function``) as a lookup by example: a call answers the entities of that set
whose properties equal its parameters of the same name (``Overdue(Days=30)``: the books whose
``Days`` is 30). Other functions answer 501, as odatapy does for a function it has no
implementation of.

**Computed keys.** A set whose single key property is an integer annotated ``Core.Computed``
gets its key from the service on POST (odatapy: max + 1).

**Media entities** (an entity type with ``HasStream="true"``). A ``--data`` row may carry its
media: ``"@serve.media": "<the bytes, base64>"``, ``"@odata.mediaContentType": "<type>"``
(default ``application/octet-stream``) and optionally ``"@odata.mediaEtag"`` (default
``W/"<the first 12 hex digits of the bytes' SHA-256>"``); they are taken out of the row before
odatapy reads it. odatapy serves ``GET Set(key)/$value`` (its Content-Type, ``ETag`` the media
ETag, else the entity's; ``If-None-Match`` 304; 204 without media), writes
``@odata.mediaContentType``/``@odata.mediaEtag``/``@odata.mediaReadLink`` into the entity, creates
one with a POST of the bytes to the set (key max + 1) and replaces or removes the bytes with PUT
or DELETE ``Set(key)/$value`` (the entity's ETag moves; a PUT gives a new random media ETag
``W/"<12 hex>"``). Each of those is a write here (applied log, state saved, and a change that the
set's delta link reports, with the new ``@odata.mediaEtag``).

**Navigations without referential constraints** (none on either side, e.g. a many-to-many
``Docs/Tags`` with partner ``Tags/Docs``, each with a NavigationPropertyBinding). odatapy keeps
them in its relation table; here they are saved in the state (``"relations"``:
``{"Docs/Tags": {"<Doc key>": ["<Tag key>", ...]}}``, keys as in URLs: ``1``, ``'a'``,
``A=1,B='x'``) and a ``--data`` row may seed them: ``"Tags@odata.bind": ["Tags(1)", ...]``
(``"Cover@odata.bind": "Photos(1)"`` for a single-valued one; resolved once every set is
loaded). Their writes -- ``$ref``, ``@odata.bind`` in a POST or PATCH, a POST to ``Set(key)/Nav``
-- are writes like any; after each, links to deleted entities are dropped and the partner
direction is brought in step (Docs(1)/Tags gaining Tag 2 gives Tags(2)/Docs Doc 1; removals
likewise; a single-valued side keeps the link it gained). The partner's ETag does not move and
no change of it is recorded. (A navigation without a NavigationPropertyBinding is left alone.)

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
* Its JSON reader ignores ``@odata.media*`` annotations and it has no persistence at all: media
  are seeded and saved here (above). It records no change for PUT/DELETE ``$value`` nor for a
  ``$ref`` write: recorded here.
* A ``$ref`` write or bind changes one direction of a relation only: the partner is kept in
  step here (above).

**Deviations left as they are** (a test must expect them):

* PUT/DELETE ``Set(key)/$value`` checks ``If-Match`` against the *entity's* ETag: the media
  ETag (which GET ``$value`` answers with) gives 412, where OData 4.01 Part 1 section 11.4.7.2
  has a client send the media stream's ETag when there is one. Neither that PUT nor a media POST
  answers with an ``ETag``.
* A media entity created by POST has no media ETag until its first PUT ``$value``: its
  ``$value`` has the entity's ETag, its JSON no ``@odata.mediaEtag``.
* Stream properties (``Edm.Stream``) are not supported: odatapy holds one as a string (its
  "read link"), answers ``GET Set(key)/P`` with JSON ``{"value": "..."}``, keeps no content type
  or ETag, and a PUT of ``P/$value`` decodes the body as UTF-8 (500 for binary bytes). Only a
  HasStream type's media can be seeded (``P@serve.media`` is refused).
* ``$ref`` writes need no ``If-Match``; ``DELETE Set(key)/Nav(key)/$ref`` (the 4.01 form) is
  400 -- use ``DELETE Set(key)/Nav/$ref?$id=...``; ``Nav@odata.bind`` in a PATCH adds to a
  collection (it does not replace it).
"""

from __future__ import annotations

import argparse
import base64
import binascii
import hashlib
import json
import os
import signal
import sys
import threading
import types
import urllib.parse
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from decimal import Decimal
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
from odatapy.server.processor import ActionProcessor, CustomETagSupport  # noqa: E402
from odatapy.server.serializer.json_serializer import EntityCollectionSerializerOptions, EntitySerializerOptions  # noqa: E402
from odatapy.data import EntityCollection  # noqa: E402
from odatapy.errors import ODataApplicationException  # noqa: E402
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


@dataclass
class FreeNav:
    """A navigation with a NavigationPropertyBinding and no referential constraint on either side."""
    set: str
    nav: str
    target: str  # the entity set it is bound to
    collection: bool
    partner: "FreeNav | None" = None  # the navigation back, kept in step (may be this one)


def free_navigations(schema: Any, edm: Any) -> list[FreeNav]:
    """The navigations derive_relations leaves to odatapy's relation table, with their partners.

    Constrained is what derive_relations derives: a constraint on the navigation, or on a
    navigation of the target type bound back to this set.
    """
    out: dict[tuple[str, str], FreeNav] = {}
    for set_name, type_name in schema.sets.items():
        for nav, (target_type, collection) in schema.types[type_name].navs.items():
            target_set = schema.bindings.get((set_name, nav))
            if target_set is None or (type_name, nav) in schema.constraints or any(
                    schema.bindings.get((target_set, n)) == set_name and (target_type, n) in schema.constraints
                    for n in schema.types[target_type].navs):
                continue
            out[(set_name, nav)] = FreeNav(set_name, nav, target_set, collection)
    for f in out.values():
        declared = edm.get_entity_set(f.set).entity_type.get_navigation_property(f.nav).partner
        back = out.get((f.target, declared)) if declared else None
        if back is None or back.target != f.set:  # or the other side names this one its partner
            back = next((b for b in out.values() if b.set == f.target and b.target == f.set
                         and edm.get_entity_set(b.set).entity_type.get_navigation_property(b.nav).partner == f.nav),
                        None)
        f.partner = back
    return list(out.values())


class Store(InMemoryDataStore):
    """The data store, with the log of applied writes (rolled back with a failed change set)."""

    def __init__(self, key_names: dict[str, list[tuple[str, str]]]) -> None:
        super().__init__()
        self.key_names = key_names  # set -> [(key property, type)]
        self.applied: list[dict[str, Any]] = []
        #: (method, Repeatability-Request-ID, what of the entity it wrote: None, "$value" or
        #: "Nav/$ref") of the write being processed.
        self.current: tuple[str, str | None, str | None] | None = None
        #: Delta tokens below this were issued before a restart: their changes are not logged.
        self.epoch = 0

    def key_text(self, entity_set: str, entity: Any) -> str:
        names = self.key_names[entity_set]
        parts = [format_key_literal(entity.get_value(n), t) for n, t in names]
        return parts[0] if len(parts) == 1 else ",".join(f"{n}={v}" for (n, _), v in zip(names, parts))

    def record_change(self, entity_set: str, entity: Any, kind: str) -> None:
        super().record_change(entity_set, entity, kind)
        if self.current is not None:
            method, rid, on = self.current
            entry = {"seq": len(self.applied) + 1, "method": method, "set": entity_set,
                     "key": self.key_text(entity_set, entity), "rid": rid}
            if on is not None:
                entry["on"] = on
            self.applied.append(entry)

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            s = super().snapshot()
            s["applied"] = [dict(a) for a in self.applied]
            return s

    def restore(self, snapshot: dict[str, Any]) -> None:
        with self.lock:
            super().restore(snapshot)
            self.applied[:] = snapshot["applied"]


class Processor(InMemoryProcessor, ActionProcessor, CustomETagSupport):
    """odatapy's in-memory processor, every set with ETags, noting which write is applied."""

    def has_etag(self, entity_set_or_singleton: Any) -> bool:
        return True

    def _noting(self, method: str, request: Any, run: Any, on: str | None = None) -> None:
        store: Store = self.store  # type: ignore[assignment]
        with store.lock:
            outer = store.current
            store.current = (method, request.get_header("Repeatability-Request-ID"), on)
            try:
                run()
            finally:
                store.current = outer

    def _changed(self, entity_set: Any, entity: Any) -> None:
        """Note a write odatapy applies without a change of its own (media, $ref): an applied
        entry, a change its delta links report, and so the state saved."""
        if entity_set is not None and entity is not None and entity_set.name in self.store.key_names:
            self.store.record_change(entity_set.name, entity, "changed")

    def create_entity(self, request, response, uri_info, request_ct, response_ct) -> None:
        self._noting("POST", request, lambda: super(Processor, self).create_entity(request, response, uri_info, request_ct, response_ct))

    def update_entity(self, request, response, uri_info, request_ct, response_ct) -> None:
        self._noting(request.method.value, request, lambda: super(Processor, self).update_entity(request, response, uri_info, request_ct, response_ct))

    def delete_entity(self, request, response, uri_info) -> None:
        self._noting("DELETE", request, lambda: super(Processor, self).delete_entity(request, response, uri_info))

    # Media entities: odatapy records the change of a POST, not of a PUT or DELETE of $value.
    def create_media_entity(self, request, response, uri_info, request_ct, response_ct) -> None:
        self._noting("POST", request, lambda: super(Processor, self).create_media_entity(request, response, uri_info, request_ct, response_ct))

    def _media_write(self, request, uri_info, run) -> None:
        run()
        target = self._resolve(request, uri_info, for_write=True)
        self._changed(target.entity_set, target.entity)

    def update_media_entity(self, request, response, uri_info, request_ct) -> None:
        self._noting("PUT", request, lambda: self._media_write(request, uri_info, lambda: super(Processor, self).update_media_entity(request, response, uri_info, request_ct)), "$value")

    def delete_media_entity(self, request, response, uri_info) -> None:
        self._noting("DELETE", request, lambda: self._media_write(request, uri_info, lambda: super(Processor, self).delete_media_entity(request, response, uri_info)), "$value")

    # $ref: odatapy changes its relation table and the owner's ETag, records no change. The
    # owner is the changed entity (its ETag moved); the partner side is kept in step after the
    # request (Service.sync_relations), without an ETag or change of its own.
    def _reference_write(self, method: str, request, uri_info, run) -> None:
        def write() -> None:
            run()
            owner_set, owner, nav = self._reference_parts(request, uri_info)
            self._changed(owner_set, owner)
        nav = next((p.navigation_property.name for p in reversed(uri_info.resource_parts)
                    if getattr(p, "navigation_property", None) is not None), "?")
        self._noting(method, request, write, f"{nav}/$ref")

    def create_reference(self, request, response, uri_info, request_ct) -> None:
        self._reference_write("POST", request, uri_info, lambda: InMemoryProcessor.create_reference(self, request, response, uri_info, request_ct))

    def update_reference(self, request, response, uri_info, request_ct) -> None:
        # odatapy's update_reference is its create_reference (which would note a POST here).
        self._reference_write("PUT", request, uri_info, lambda: InMemoryProcessor.create_reference(self, request, response, uri_info, request_ct))

    def delete_reference(self, request, response, uri_info) -> None:
        self._reference_write("DELETE", request, uri_info, lambda: InMemoryProcessor.delete_reference(self, request, response, uri_info))


    # Actions (bound and unbound, and action imports): the service's business logic, which
    # odatapy leaves to the service -- this test service's is described under "Actions" above.
    def process_action(self, request, response, uri_info, request_ct, response_ct) -> None:
        store: Store = self.store  # type: ignore[assignment]
        with store.lock:
            part = uri_info.resource_parts[-1]
            name = part.action_import.name if part.action_import is not None else (part.name or "")
            rid = request.get_header("Repeatability-Request-ID")
            done = next((a for a in store.applied if rid and a.get("rid") == rid and a["method"] == "ACTION"), None)
            try:
                params = json.loads(request.body or b"{}", parse_float=Decimal) if request.body else {}
            except ValueError:
                raise ODataApplicationException("The action's parameters are not JSON.", 400) from None
            if not isinstance(params, dict):
                raise ODataApplicationException("The action's parameters are not a JSON object.", 400)
            target = None
            if part.action_import is None:
                parts = [p for p in uri_info.resource_parts[:-1]]
                target = self._walk(request, parts, for_write=True)
                if target.entity is None or target.entity_set is None:
                    raise ODataApplicationException("A bound action here needs one entity.", 400)
            if done is not None:
                # Repeatability (OData 4.01 Part 1 section 8.2.8.x): executed once; answered again.
                response.set_header("Repeatability-Result", "accepted")
            elif params.get("Fail") is True:
                raise ODataApplicationException(f"{name} refused: the caller asked it to fail (Fail=true).", 400,
                                                code="ActionRefused")
            else:
                entry = {"seq": len(store.applied) + 1, "method": "ACTION", "name": name, "rid": rid,
                         "params": {k: (str(v) if isinstance(v, Decimal) else v) for k, v in params.items()}}
                if target is not None:
                    entity_set, entity = target.entity_set, target.entity
                    entry["set"], entry["key"] = entity_set.name, store.key_text(entity_set.name, entity)
                    keys = [n for n, _ in store.key_names[entity_set.name]]
                    for k, v in params.items():
                        declared = target.entity_type.get_structural_property(k)
                        if declared is None or k in keys:
                            continue
                        prop = entity.get_property(k)
                        if prop is not None:
                            prop.value = v
                        else:  # a property the entity was created without
                            entity.set_property(k, v, type_name=str(declared.type) if declared.type else None)
                    self._bump_etag(entity_set, entity)
                    store.record_change(entity_set.name, entity, "changed")  # for delta links; not noted
                store.applied.append(entry)  # the applied log moved: the state is saved
            returns = part.return_type_fqn
            if target is not None and returns and returns == target.entity_type.full_qualified_name.fqn:
                etag = self._etag_of(target.entity_set, target.entity)
                if etag:
                    response.set_header("ETag", etag)
                serializer = self._serializer(response_ct, request)
                options = EntitySerializerOptions(
                    context_url=self._context(request, f"{target.entity_set.name}/$entity"),
                    omit_values=self._omit_values(request, response), service_version=self._version(request))
                body = serializer.entity(self.service_metadata.edm, target.entity_type, target.entity, options)
                self._write(request, response, body, response_ct, status=200)
            else:
                response.set_status(204)


class ParsedJsonDeserializer(ODataJsonDeserializer):
    """odatapy's JSON reader, also given a body it would have parsed itself (a --data file whose
    media were taken out)."""

    def _load(self, body: Any) -> Any:
        return body if isinstance(body, (dict, list)) else super()._load(body)


MEDIA = "@serve.media"  # a --data row's media bytes (base64); "P@serve.media" would be a stream property's


def media_etag(content: bytes) -> str:
    return 'W/"' + hashlib.sha256(content).hexdigest()[:12] + '"'


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
        handler.register(self.processor)
        self.state_path = args.state
        self.deserializer = ParsedJsonDeserializer(strict=True)
        self.serializer = odata.create_serializer(ContentType.APPLICATION_JSON)
        self.free = free_navigations(self.schema, self.edm)
        #: The relations of the free navigations as last saved: pair -> {(key, key)} (see sync_relations).
        self.links: dict[tuple, set[tuple[str, str]]] = {}
        fresh = not (os.path.exists(args.state) and os.path.getsize(args.state) > 0)
        if not fresh:
            self.load_state()
        else:
            binds: list[tuple[str, Any, FreeNav, Any]] = []
            for item in args.data:
                name, _, path = item.partition("=")
                if name not in self.schema.sets:
                    raise SystemExit(f"--data {item}: no entity set {name!r} in {args.metadata}")
                with open(path, encoding="utf-8") as fh:
                    # As odatapy reads a body (numbers not through float: 10.50 keeps its scale).
                    data = json.loads(fh.read(), parse_float=Decimal, parse_int=int)
                rows = data.get("value") if isinstance(data, dict) else None
                if not isinstance(rows, list):
                    raise SystemExit(f'--data {item}: not {{"value": [...]}}')
                media = [self.media_of_row(f"--data {item}", name, row) if isinstance(row, dict) else None
                         for row in rows]
                for e in self.load_set(name, data, media):
                    binds += self.binds_of(f"--data {item}", name, e)
            for name in self.schema.sets:
                for e in self.store.entities(name):
                    e.etag = e.etag or 'W/"1"'
            self.apply_binds(binds)
        forget_inline_links(self.store)
        self.store.declare_key_auto_generating(*computed_key_sets(metadata_text))
        derive_relations(self.schema, self.edm, self.store, self.processor)
        self.sync_relations()
        if fresh:
            self.save_state()
        self.register_functions(metadata_text)
        self.app = ODataWSGIApp(handler)
        self.exit_after = args.exit_after_writes
        self.lock = threading.Lock()

    def register_functions(self, metadata: str) -> None:
        """Each function an import with an EntitySet exposes: a lookup by example (the docstring)."""
        root = ET.fromstring(metadata)
        sets: dict[str, str] = {}
        for imp in root.iter(EDM + "FunctionImport"):
            if imp.get("EntitySet"):
                sets[imp.get("Function") or ""] = imp.get("EntitySet") or ""
        store = self.store

        def by_example(target: Any, part: Any) -> list[Any]:
            name = part.function_import.function if part.function_import is not None else ""
            set_name = sets.get(name)
            if not set_name:
                raise ODataApplicationException(f"The function '{part.name}' has no implementation here.", 501)
            wanted = dict(part.typed_parameters)
            return [e for e in store.entities(set_name) if all(e.get_value(k) == v for k, v in wanted.items())]

        for function in sets:
            self.processor.register_function(function, by_example)

    # --- loading --------------------------------------------------------
    def media_of_row(self, where: str, name: str, row: dict[str, Any]) -> dict[str, Any] | None:
        """Takes a --data row's media out of it: ``@serve.media`` (base64), with
        ``@odata.mediaContentType`` (default application/octet-stream) and optionally
        ``@odata.mediaEtag`` (default W/"<12 hex of the bytes' SHA-256>")."""
        for k in row:
            if k.endswith(MEDIA) and k != MEDIA:
                raise SystemExit(f"{where}: {k}: stream properties cannot be seeded (odatapy keeps a stream "
                                 "property as a string, see serve.py); only a HasStream type's media can")
        if MEDIA not in row:
            return None
        if not self.edm.get_entity_set(name).entity_type.has_stream:
            raise SystemExit(f"{where}: {MEDIA} on an entity of {name}, whose type has no HasStream=\"true\"")
        try:
            content = base64.b64decode(row.pop(MEDIA), validate=True)
        except (binascii.Error, TypeError) as exc:
            raise SystemExit(f"{where}: {MEDIA} is not base64: {exc}") from None
        return {"content": base64.b64encode(content).decode("ascii"),
                "contentType": row.pop("@odata.mediaContentType", None) or "application/octet-stream",
                "etag": row.pop("@odata.mediaEtag", None) or media_etag(content)}

    def load_set(self, name: str, body: str | dict[str, Any], media: list[dict[str, Any] | None]) -> list[Any]:
        """A set's entities from ``{"value": [...]}``, as text or as odatapy's JSON reader parses it."""
        entity_type = self.edm.get_entity_set(name).entity_type
        entities = self.deserializer.entity_collection(self.edm, entity_type, body).entities
        for e, m in zip(entities, media):
            if m is not None:
                e.media_content = None if m["content"] is None else base64.b64decode(m["content"])
                e.media_content_type = m["contentType"]
                e.media_etag = m["etag"]
        self.store.set_entities(name, entities)
        return entities

    def binds_of(self, where: str, name: str, entity: Any) -> list[tuple[str, Any, FreeNav, Any]]:
        """A --data row's ``Nav@odata.bind`` of a free navigation (those of a constrained one are
        ignored, as they always were: the foreign keys say it)."""
        out = []
        for link in entity.navigation_links:
            if not link.bind_links:
                continue
            f = next((f for f in self.free if f.set == name and f.nav == link.title), None)
            if f is not None:
                out.append((where, entity, f, list(link.bind_links)))
            elif self.schema.bindings.get((name, link.title)) is None:
                raise SystemExit(f"{where}: {link.title}@odata.bind: {name}/{link.title} has no NavigationPropertyBinding")
        return out

    def apply_binds(self, binds: list[tuple[str, Any, FreeNav, Any]]) -> None:
        """Resolves seeded binds (``Set(key)``, once every set is loaded) into the relation table."""
        stub = types.SimpleNamespace(raw_base_uri="")
        for where, entity, f, ids in binds:
            targets = []
            for ref in ids:
                try:
                    target = self.processor._entity_by_id(ref, stub)
                except ODataApplicationException as exc:
                    raise SystemExit(f"{where}: {f.nav}@odata.bind: {ref}: {exc}") from None
                if not self.store.contains_entity(f.target, target):
                    raise SystemExit(f"{where}: {f.nav}@odata.bind: {ref} is not in {f.target}")
                if all(t is not target for t in targets):
                    targets.append(target)
            if not f.collection and len(targets) > 1:
                raise SystemExit(f"{where}: {f.nav}@odata.bind: one entity expected, {len(ids)} given")
            self.store.set_relation(f.set, self.processor._key_of(self.edm.get_entity_set(f.set), entity), f.nav, targets)

    def load_state(self) -> None:
        with open(self.state_path, encoding="utf-8") as fh:
            state = json.load(fh)
        for name, rows in state["sets"].items():
            entities = self.load_set(name, json.dumps({"value": [r["entity"] for r in rows]}),
                                     [r.get("media") for r in rows])
            for e, r in zip(entities, rows):
                e.etag = r["etag"]
        for path, lists in state.get("relations", {}).items():
            set_name, _, nav = path.partition("/")
            f = next((f for f in self.free if f.set == set_name and f.nav == nav), None)
            if f is None:
                raise SystemExit(f"{self.state_path}: relations of {path}, not a navigation without constraints of this model")
            owners, targets = self.by_key(f.set), self.by_key(f.target)
            es = self.edm.get_entity_set(f.set)
            for key, target_keys in lists.items():
                try:
                    self.store.set_relation(f.set, self.processor._key_of(es, owners[key]), nav,
                                            [targets[k] for k in target_keys])
                except KeyError as exc:
                    raise SystemExit(f"{self.state_path}: relations of {path}: no entity with key {exc}") from None
        self.store.applied[:] = state["applied"]
        self.store._sequence = state["sequence"]
        self.store.epoch = state["sequence"]

    def by_key(self, name: str) -> dict[str, Any]:
        return {self.store.key_text(name, e): e for e in self.store.entities(name)}

    # --- relations without constraints -----------------------------------
    def sync_relations(self) -> None:
        """Keeps the free navigations' relation table consistent, and partners in step.

        odatapy changes one direction only (a $ref write on Docs(1)/Tags, a bind or a deep insert)
        and, deleting an entity, drops its own relations but not the others' links to it. Each
        relation (a navigation and its partner) is held as a set of links (a, b) -- a in the one
        set, b in the other -- as last saved (``self.links``): a link is kept when both directions
        still have it, added when either direction gained it, and dropped when either lost it or
        an end is gone. A single-valued side keeps one link: the one it gained, else the one it has.
        Both directions are then written back from the links, in their order, new ones last.
        """
        store, done = self.store, set()
        sets = {name: store.entities(name) for name in self.schema.sets}
        position = {name: {id(e): i for i, e in enumerate(es)} for name, es in sets.items()}

        def current(f: FreeNav) -> dict[str, list[str]]:
            es = self.edm.get_entity_set(f.set)
            return {store.key_text(f.set, e): [store.key_text(f.target, t) for t in
                                               (store.relation(f.set, self.processor._key_of(es, e), f.nav) or [])
                                               if id(t) in position[f.target]]
                    for e in sets[f.set]}

        for f in self.free:
            pair = (f.set, f.nav) if f.partner is None else tuple(sorted([(f.set, f.nav), (f.partner.set, f.partner.nav)]))
            if pair in done:
                continue
            done.add(pair)
            fwd = current(f)
            forward = {(a, b) for a, bs in fwd.items() for b in bs}
            back = current(f.partner) if f.partner is not None else {}
            backward = {(a, b) for b, as_ in back.items() for a in as_} if f.partner is not None else forward
            old = self.links.get(pair, set())
            links = (old & forward & backward) | (forward - old) | (backward - old)
            for side, single, own in ((0, not f.collection, fwd),
                                      (1, f.partner is not None and not f.partner.collection, back)):
                if not single:
                    continue
                by_end: dict[str, list[tuple[str, str]]] = {}
                for link in sorted(links):
                    by_end.setdefault(link[side], []).append(link)
                for end, ls in by_end.items():
                    if len(ls) > 1:
                        gained = [l for l in ls if l not in old]
                        has = [l for l in ls if l[1 - side] in own.get(end, [])]
                        keep = next((l for l in gained if l in has), (gained or has or ls)[0])
                        links -= set(ls) - {keep}
            self.links[pair] = links
            self.write_relation(f, fwd, links, 0)
            if f.partner is not None and f.partner is not f:
                self.write_relation(f.partner, back, links, 1)

    def write_relation(self, f: FreeNav, current: dict[str, list[str]], links: set[tuple[str, str]], side: int) -> None:
        owners, targets = self.by_key(f.set), self.by_key(f.target)
        order = {k: i for i, k in enumerate(targets)}
        wanted: dict[str, list[str]] = {}
        for link in links:
            wanted.setdefault(link[side], []).append(link[1 - side])
        es = self.edm.get_entity_set(f.set)
        for key, entity in owners.items():
            have = current.get(key, [])
            want = set(wanted.get(key, []))
            keys = [k for k in have if k in want] + sorted(want - set(have), key=order.__getitem__)
            rel_key = self.processor._key_of(es, entity)
            stored = self.store.relation(f.set, rel_key, f.nav)
            if stored is None or [self.store.key_text(f.target, t) for t in stored] != keys:
                self.store.set_relation(f.set, rel_key, f.nav, [targets[k] for k in keys])

    # --- saving ---------------------------------------------------------
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
            if entity_type.has_stream:
                for r, e in zip(sets[name], entities):
                    if e.media_content is not None or e.media_content_type is not None or e.media_etag is not None:
                        r["media"] = {"content": None if e.media_content is None
                                      else base64.b64encode(bytes(e.media_content)).decode("ascii"),
                                      "contentType": e.media_content_type, "etag": e.media_etag}
        state: dict[str, Any] = {"sets": sets, "applied": self.store.applied, "sequence": int(self.store.change_token)}
        if self.free:
            relations: dict[str, dict[str, list[str]]] = {}
            for f in self.free:
                es = self.edm.get_entity_set(f.set)
                lists = {}
                for e in self.store.entities(f.set):
                    targets = self.store.relation(f.set, self.processor._key_of(es, e), f.nav) or []
                    if targets:
                        lists[self.store.key_text(f.set, e)] = [self.store.key_text(f.target, t) for t in targets]
                relations[f"{f.set}/{f.nav}"] = lists
            state["relations"] = relations
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
                self.sync_relations()
                self.save_state()
                if self.exit_after and len(self.store.applied) >= self.exit_after:
                    # Stopped after applying and persisting, before answering: the answer is lost.
                    os._exit(3)
            start_response(answer["status"], answer["headers"])
            return [body]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--metadata", required=True, help="the $metadata (CSDL XML)")
    ap.add_argument("--data", action="append", default=[], metavar="SET=FILE", help='a set\'s entities, {"value":[...]} (repeatable; media and binds: see the docstring)')
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
