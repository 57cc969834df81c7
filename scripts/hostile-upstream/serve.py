"""A hostile OData V4 upstream: each service root ``/MODE/`` misbehaves one way, on command.

It serves the entity sets given with ``--data SET=FILE`` (``{"value": [...]}``) as a V4 JSON service,
ten entities a page with a relative ``@odata.nextLink``, and answers writes as a service would
(201 with the entity, 204) — except where MODE says otherwise:

``ok``            behaves.
``next-other``    the first page's next link is absolute, on the *other* listener (another origin).
``delta-other``   with ``Prefer: odata.track-changes``, the last page carries a delta link on the other origin.
``location-other`` a create answers 201 with no body and a ``Location`` on the other origin.
``endless``       every page repeats the first ten entities with a new next link, forever.
``endless-empty`` every page is empty, with a new next link, forever.
``bad-etag``      entities carry ``@odata.etag`` values with CR/LF, NUL, or empty.
``facets``        entities carry values beyond their declared MaxLength (a Name of 300) or Scale (a Price of 1.23456).
``unknown-prop``  entities carry a property the client's ``$metadata`` lacks (``AddedLater``), answers to writes too.
``partial``       a write's answer carries only the key (and the ``Name`` sent), not the whole entity.
``huge-unknown``  the first page's first entity, and every write's answer, carry ``AddedLater``: an
                  array of ``--huge-bytes`` (default 100 MiB) of tiny values (``[0,0,…]``).
``no-delta``      refuses ``Prefer: odata.track-changes`` with 501, as a Gateway service without delta
                  support does; reads without it are served.
``huge-annotation`` the first page starts with ``@huge.annotation``, such an array, before ``value``.

Writes come one by one or in a JSON ``$batch`` (``POST /MODE/$batch``), answered in order.
``stall-body``    sends the head and the start of the body, then nothing for 120 s.
``stall-head``    sends nothing for 120 s.
``trickle``       sends the body one byte every 0.5 s.
``offset-shift``  pages by offset, and deletes the first entity just before it serves the second
                  page, once: the rest shifts left and one entity is never sent (no delta link).

Two roots are OAuth 2.0 token endpoints (``POST /MODE``, any form), for the tests of the token fetch:
``token``         answers a bearer token at once (``{"access_token": …, "token_type": "Bearer"}``).
``token-drip``    answers 200 and the token's length, then its body one byte every ``--drip-seconds`` (5) s.

Two roots repeat whatever they received in their errors, as careless services do, for the tests that
no secret reaches what the store records or prints:
``echo``          answers every request 400, a ``$batch`` 200 with each of its requests 400, with an
                  OData error whose ``message`` and ``innererror`` hold the request line, every
                  header, the body, and the credentials of an ``Authorization: Basic`` header
                  decoded: the user, the password as sent, form-decoded, form-encoded, and alone in
                  base64 (UTF-8, not escaped).
``token-echo``    a token endpoint answering 401 ``invalid_client`` with the same text as its
                  ``error_description``.

Every mode counts the collection when asked (``$count=true``: ``@odata.count``).

A second listener (the "other origin", same host, another port) answers everything with 200 and
logs what it received: ``GET /_log`` on either listener returns both logs (method, path, headers),
so a test can prove that nothing, and no credential, reached the other origin. ``POST /_reset``
clears the logs and the writes. It prints ``hostile upstream serving at URL`` as its first line.
"""
import argparse
import base64
import json
import os
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit, parse_qs, quote_plus, unquote_plus

DATA = {}
LOG = {"main": [], "other": []}
LOCK = threading.Lock()
PORTS = {}
PAGE = 10
SHIFTED = [False]
HUGE_BYTES = [100 << 20]
DRIP_SECONDS = [5.0]
PLACEHOLDER = "__HUGE__"


def huge():
    """A JSON array of HUGE_BYTES bytes: [0,0,...,0]."""
    n = max(1, HUGE_BYTES[0] // 2)
    return b"[" + b"0," * (n - 1) + b"0]"


def keyof(entity, set_name):
    for k in ("ProductID", "BusinessPartnerID", "SalesOrderID", "ID"):
        if k in entity:
            return k, entity[k]
    return None, None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    role = "main"

    def log_message(self, *args):
        pass

    def _log(self):
        with LOCK:
            LOG[self.role].append({"method": self.command, "path": self.path,
                                   "headers": {k.lower(): v for k, v in self.headers.items()}})

    def _send(self, status, obj=None, headers=None, raw=None):
        body = raw if raw is not None else (b"" if obj is None else json.dumps(obj).encode())
        marker = ('"%s"' % PLACEHOLDER).encode()
        if marker in body:
            body = body.replace(marker, huge())
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        if body or status not in (204, 304):
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("OData-Version", "4.0")
        self.end_headers()
        self.wfile.write(body)

    def _body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def _route(self):
        self._log()
        parts = urlsplit(self.path)
        if parts.path == "/_log":
            with LOCK:
                return self._send(200, LOG)
        if parts.path == "/_reset":
            with LOCK:
                LOG["main"].clear(); LOG["other"].clear()
            return self._send(204)
        if self.role == "other":
            return self._send(200, {"value": [{"ProductID": "EVIL", "Name": "from the other origin"}]})
        segs = parts.path.strip("/").split("/", 1)
        mode, rest = segs[0], (segs[1] if len(segs) > 1 else "")
        query = parse_qs(parts.query)
        if mode in ("token", "token-drip") and self.command == "POST":
            return self._token(mode)
        if mode in ("echo", "token-echo"):
            return self._echo(mode)
        if mode == "stall-head":
            time.sleep(120)
            return self._send(200, {"value": []})
        if rest == "$batch" and self.command == "POST":
            return self._batch(mode)
        set_name = rest.split("(", 1)[0]
        if set_name not in DATA:
            return self._send(404, {"error": {"code": "404", "message": "no entity set '%s'" % set_name}})
        if self.command == "GET":
            return self._read(mode, set_name, query)
        return self._write(mode, set_name, rest)

    def _root(self, mode, origin="main"):
        return "http://127.0.0.1:%d/%s/" % (PORTS[origin], mode)

    def _read(self, mode, set_name, query):
        page = int(query.get("p", ["0"])[0])
        if mode == "no-delta" and "odata.track-changes" in (self.headers.get("Prefer") or ""):
            return self._send(501, {"error": {"code": "501", "message": "Delta is not supported for %s" % set_name}})
        if mode == "offset-shift" and page == 1 and not SHIFTED[0]:
            with LOCK:
                del DATA[set_name][0]
                SHIFTED[0] = True
        rows = DATA[set_name]
        out = {"@odata.context": "$metadata#" + set_name}
        if mode == "huge-annotation" and page == 0:
            out["@huge.annotation"] = PLACEHOLDER
        if query.get("$count") == ["true"]:
            out["@odata.count"] = len(rows)
        if mode == "endless":
            items = rows[:PAGE]
            out["@odata.nextLink"] = "%s?p=%d" % (set_name, page + 1)
        elif mode == "endless-empty":
            items = []
            out["@odata.nextLink"] = "%s?p=%d" % (set_name, page + 1)
        else:
            items = rows[page * PAGE:(page + 1) * PAGE]
            if (page + 1) * PAGE < len(rows):
                if mode == "next-other":
                    out["@odata.nextLink"] = self._root(mode, "other") + "%s?p=%d" % (set_name, page + 1)
                else:
                    out["@odata.nextLink"] = "%s?p=%d" % (set_name, page + 1)
            elif "odata.track-changes" in (self.headers.get("Prefer") or "") and mode != "offset-shift":
                origin = "other" if mode == "delta-other" else "main"
                out["@odata.deltaLink"] = self._root(mode, origin) + set_name + "?$deltatoken=1"
        items = [dict(e) for e in items]
        for i, e in enumerate(items):
            if mode == "bad-etag":
                e["@odata.etag"] = ["W/\"a\r\nX-Injected: 1\"", "", "W/\"\x00\""][i % 3]
            if mode == "unknown-prop":
                e["AddedLater"] = "a property the client's $metadata lacks"
            if mode == "huge-unknown" and page == 0 and i == 0:
                e["AddedLater"] = PLACEHOLDER
            if mode == "facets":  # beyond MaxLength 255, beyond Scale 3
                if i % 2 == 0:
                    e["Name"] = "N" * 300
                else:
                    e["Price"] = 1.23456
        out["value"] = items
        body = json.dumps(out).encode()
        if mode == "stall-body":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body[:20]); self.wfile.flush()
            time.sleep(120)
            return
        if mode == "trickle":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            for b in body:
                self.wfile.write(bytes([b])); self.wfile.flush()
                time.sleep(0.5)
            return
        return self._send(200, out)

    def _token(self, mode):
        self._body()
        body = json.dumps({"access_token": "hostile-token", "token_type": "Bearer", "expires_in": 3600}).encode()
        if mode == "token":
            return self._send(200, raw=body)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            for b in body:
                self.wfile.write(bytes([b])); self.wfile.flush()
                time.sleep(DRIP_SECONDS[0])
        except OSError:
            pass  # the client gave up

    def _echo(self, mode):
        """Every request refused with an error that repeats it (``echo``, ``token-echo``)."""
        body = self._body()
        lines = []
        auth = self.headers.get("Authorization") or ""
        if auth.startswith("Basic "):
            decoded = base64.b64decode(auth[6:]).decode("utf-8", "replace")
            user, _, password = decoded.partition(":")
            lines.append("%s sent: %s" % (user, decoded))
            raw = unquote_plus(password)
            lines.append("password form-decoded: %s, form-encoded: %s, alone in base64: %s" % (
                raw, quote_plus(raw), base64.b64encode(raw.encode()).decode()))
        lines.append("%s %s %s" % (self.command, self.path, self.request_version))
        lines += ["%s: %s" % (k, v) for k, v in self.headers.items()]
        lines.append(body.decode("utf-8", "replace"))
        text = "\n".join(lines)
        if mode == "token-echo":
            obj = {"error": "invalid_client", "error_description": text}
            return self._send(401, raw=json.dumps(obj, ensure_ascii=False).encode())
        error = {"error": {"code": "echo", "message": text, "innererror": {"received": text}}}
        urls = []
        if self.command == "POST" and urlsplit(self.path).path.endswith("/$batch"):
            try:
                urls = [(r.get("id", str(i + 1))) for i, r in enumerate(json.loads(body or b"{}").get("requests", []))]
            except ValueError:
                urls = []
        if urls:
            answer = {"responses": [{"id": i, "status": 400, "headers": {}, "body": error} for i in urls]}
            return self._send(200, raw=json.dumps(answer, ensure_ascii=False).encode())
        return self._send(400, raw=json.dumps(error, ensure_ascii=False).encode())

    def _write(self, mode, set_name, rest):
        raw = self._body()
        try:
            sent = json.loads(raw or b"{}")
        except ValueError:
            return self._send(400, {"error": {"code": "400", "message": "not JSON"}})
        status, obj, headers = self._apply(self.command, mode, set_name, rest, sent)
        return self._send(status, obj, headers)

    def _batch(self, mode):
        """A JSON $batch (OData 4.01): each request applied in order, answered in order."""
        try:
            doc = json.loads(self._body() or b"{}")
        except ValueError:
            return self._send(400, {"error": {"code": "400", "message": "not JSON"}})
        out = []
        for i, r in enumerate(doc.get("requests", [])):
            url = r.get("url", "")
            set_name = url.split("(", 1)[0].split("?", 1)[0]
            if set_name not in DATA:
                status, obj, headers = 404, {"error": {"code": "404", "message": "no set"}}, {}
            else:
                status, obj, headers = self._apply(r.get("method", "GET"), mode, set_name, url, r.get("body") or {})
            item = {"id": r.get("id", str(i + 1)), "status": status, "headers": headers}
            if obj is not None:
                item["body"] = obj
            out.append(item)
        return self._send(200, {"responses": out})

    def _apply(self, method, mode, set_name, rest, sent):
        if method == "POST":
            k, v = keyof(sent, set_name)
            with LOCK:
                DATA[set_name].append(dict(sent))
            if mode == "location-other":
                return 201, None, {"Location": self._root(mode, "other") + "%s('%s')" % (set_name, v)}
            answer = dict(sent)
            if mode == "partial":
                answer = {k: v, **({"Name": sent["Name"]} if "Name" in sent else {})}
            if mode == "unknown-prop":
                answer["AddedLater"] = "x"
            if mode == "huge-unknown":
                answer["AddedLater"] = PLACEHOLDER
            return 201, answer, {"Location": self._root(mode) + "%s('%s')" % (set_name, v)}
        if method in ("PATCH", "PUT", "MERGE"):
            key = rest[len(set_name):].strip("()'")
            with LOCK:
                for e in DATA[set_name]:
                    if keyof(e, set_name)[1] == key:
                        e.update(sent)
                        current = dict(e)
                        break
                else:
                    return 404, {"error": {"code": "404", "message": "no entity " + key}}, {}
            if mode == "partial":
                k, v = keyof(current, set_name)
                return 200, {k: v, **({"Name": sent["Name"]} if "Name" in sent else {})}, {}
            if mode == "unknown-prop":
                current["AddedLater"] = "x"
            if mode == "huge-unknown":
                current["AddedLater"] = PLACEHOLDER
            return 200, current, {}
        if method == "DELETE":
            key = rest[len(set_name):].strip("()'")
            with LOCK:
                DATA[set_name][:] = [e for e in DATA[set_name] if keyof(e, set_name)[1] != key]
            return 204, None, {}
        return 405, {"error": {"code": "405", "message": "method not allowed"}}, {}

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = do_MERGE = _route


class Other(Handler):
    role = "other"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", action="append", default=[], help="SET=FILE ({\"value\": [...]})")
    p.add_argument("--lifetime", type=float, required=True)
    p.add_argument("--pid-file")
    p.add_argument("--huge-bytes", type=int, default=100 << 20, help="size of the huge-* modes' arrays")
    p.add_argument("--drip-seconds", type=float, default=5.0, help="token-drip's pause between two bytes")
    a = p.parse_args()
    HUGE_BYTES[0] = a.huge_bytes
    DRIP_SECONDS[0] = a.drip_seconds
    for item in a.data:
        name, path = item.split("=", 1)
        with open(path) as f:
            DATA[name] = json.load(f)["value"]
    main_server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    other_server = ThreadingHTTPServer(("127.0.0.1", 0), Other)
    main_server.daemon_threads = other_server.daemon_threads = True
    PORTS["main"], PORTS["other"] = main_server.server_address[1], other_server.server_address[1]
    if a.pid_file:
        with open(a.pid_file, "w") as f:
            f.write(str(os.getpid()))
    for s in (main_server, other_server):
        threading.Thread(target=s.serve_forever, daemon=True).start()
    print("hostile upstream serving at http://127.0.0.1:%d" % PORTS["main"], flush=True)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait(a.lifetime)
    sys.exit(0)


if __name__ == "__main__":
    main()
